package engine

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// Reconciler runs, plans and uninstalls strategies on one cluster with
// clients built once: its applier (dynamic client and REST mapper over
// cached discovery; held as the applier interface of cluster.go), its
// typed client and, optionally, a cache of live
// objects. Build one and keep it (an operator builds it at start), instead
// of calling the package functions Run, Plan and Uninstall, which build
// new clients and ask discovery anew on every call. It is safe for
// concurrent use; every call takes the installation's options.
type Reconciler struct {
	a    applier
	kube kubernetes.Interface
}

// Clients are what a Reconciler uses: an applier (whose Options are
// replaced per call), a typed client, and an optional cache from which
// live objects are read where it holds them (see apply.Cache; the API
// server is asked otherwise).
type Clients struct {
	Applier *apply.Applier
	Kube    kubernetes.Interface
	Cache   apply.Cache
}

// New returns a Reconciler with clients built from cfg, reading live
// objects from the API server.
func New(cfg *rest.Config) (*Reconciler, error) {
	a, err := apply.NewForConfig(cfg, apply.Options{})
	if err != nil {
		return nil, err
	}
	kcfg := rest.CopyConfig(cfg)
	kcfg.WarningHandler = rest.NoWarnings{}
	kube, err := kubernetes.NewForConfig(kcfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return NewWithClients(Clients{Applier: a, Kube: kube}), nil
}

// NewWithClients returns a Reconciler over the given clients.
func NewWithClients(c Clients) *Reconciler {
	var a applier = applierOf{c.Applier}
	if c.Cache != nil {
		a = a.WithCache(c.Cache)
	}
	return &Reconciler{a: a, kube: c.Kube}
}

// WithCache returns a Reconciler sharing the clients that reads live
// objects from c where c holds them.
func (rc *Reconciler) WithCache(c apply.Cache) *Reconciler {
	return &Reconciler{a: rc.a.WithCache(c), kube: rc.kube}
}

// applier returns the reconciler's applier with a call's options, its
// REST mapper reset: kinds served or removed since the last call are seen.
func (rc *Reconciler) applier(opts apply.Options) applier {
	a := rc.a.WithOptions(opts)
	a.ResetMapper()
	return a
}

// Run makes the cluster match s (see the package function Run).
func (rc *Reconciler) Run(ctx context.Context, s *strategy.Strategy, opts Options) (*Result, error) {
	s, hooks := plan.SplitHooks(s)
	r, err := rc.newRun(ctx, s, opts)
	if err != nil {
		return nil, err
	}
	if len(hooks) > 0 {
		r.planHooks(hooks)
		return r.runWithHooks(ctx, hooks)
	}
	return r.run(ctx)
}

// Plan returns what Run would do (see the package function Plan).
func (rc *Reconciler) Plan(ctx context.Context, s *strategy.Strategy, opts Options) (*plan.Plan, error) {
	s, hooks := plan.SplitHooks(s)
	r, err := rc.newRun(ctx, s, opts)
	if err != nil {
		return nil, err
	}
	r.planHooks(hooks)
	return r.plan(ctx)
}

// Run makes the cluster at cfg match s: step by step in the plan's order,
// waiting for each step to be ready, then prune. Objects of kinds the
// cluster does not serve are skipped (see Result.Applied). It returns the
// result so far and an error naming the step when a step fails; conflicts
// with objects that are not ours are joined into the error at the end (the
// rest of the strategy is still applied, but nothing is pruned).
//
// The installation's inventory is written before the first object (what
// it held plus everything s holds, so a run that stops half-way still
// knows what it may have created) and again after prune (what s holds).
//
// Run builds its clients for this call; a caller that runs often keeps a
// Reconciler (New) instead.
func Run(ctx context.Context, cfg *rest.Config, s *strategy.Strategy, opts Options) (*Result, error) {
	rc, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return rc.Run(ctx, s, opts)
}

// Plan returns what Run would do with the same arguments, without writing:
// the plan's steps with the action of every object (server-side dry runs
// tell where only the server knows), certificates and CA bundles as Run
// would write them, and the prune list. Print it with (*plan.Plan).Print.
func Plan(ctx context.Context, cfg *rest.Config, s *strategy.Strategy, opts Options) (*plan.Plan, error) {
	rc, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return rc.Plan(ctx, s, opts)
}

// Uninstall deletes what the installation's inventory lists and still
// carries its labels (see the package function Uninstall).
func (rc *Reconciler) Uninstall(ctx context.Context, opts UninstallOptions) ([]strategy.ObjectRef, error) {
	if opts.Strategy != nil {
		return rc.uninstallWithHooks(ctx, opts)
	}
	return rc.uninstall(ctx, opts)
}

// Uninstall deletes what the installation's inventory lists and still
// carries its labels, in prune order (webhooks and APIServices first, then
// custom resources, workloads, …, Namespaces and CRDs last; a Namespace only
// when it holds nothing that is not the installation's), then its CA Secret
// and its inventory. It returns the deleted objects. An installation an
// older installstrategy applied, which has no inventory yet, is removed by
// what that version marked as its own (plan.LegacyObjects).
func Uninstall(ctx context.Context, cfg *rest.Config, opts UninstallOptions) ([]strategy.ObjectRef, error) {
	rc, err := New(cfg)
	if err != nil {
		return nil, fmt.Errorf("uninstall: %w", err)
	}
	return rc.Uninstall(ctx, opts)
}

// typedSecret returns the live Secret ns/name, from the cache where it
// holds it (or the running step's probe says it is absent); nil when it
// does not exist.
func (r *run) typedSecret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	ref := &unstructured.Unstructured{}
	ref.SetGroupVersionKind(kinds.Secret.WithVersion("v1"))
	ref.SetNamespace(ns)
	ref.SetName(name)
	var a plan.Getter = r.a
	r.mu.Lock()
	if r.probed != nil {
		a = r.probed
	}
	r.mu.Unlock()
	live, err := a.Get(ctx, ref)
	if err != nil || live == nil {
		return nil, err
	}
	sec := &corev1.Secret{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(live.Object, sec); err != nil {
		return nil, fmt.Errorf("secret %s/%s: %w", ns, name, err)
	}
	return sec, nil
}
