// Package reconcile owns the staged pipeline that makes a cluster match a
// strategy: it builds the plan (pkg/plan), then for every step applies its
// objects (pkg/apply) and waits until they are rolled over (pkg/health)
// before the next step starts, generates certificates for empty TLS Secrets
// and injects their CA bundle into webhooks and APIServices, rolls
// DaemonSets out with a canary on the update path, and finally prunes what
// the strategy no longer holds. Run is the one entry point; Options.OnEvent
// reports progress.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/generate"
	"github.com/installstrategy/installstrategy/pkg/health"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// Options tunes Run. The zero value installs for a fresh cluster (nothing
// observed: the create path), waits up to 5 minutes per step, prunes
// everything but CRDs, and adopts nothing.
type Options struct {
	// Observed is the identity the cluster runs now; it chooses the
	// workload path (plan.ChoosePath). Zero means a fresh install.
	Observed strategy.Identity
	// ManagedBy is the managed-by label value that marks objects as ours
	// (and scopes prune); "" means apply.DefaultManagedBy. Give every
	// installation sharing a cluster its own value.
	ManagedBy string
	// FieldManager is the server-side apply field manager; "" means
	// apply.DefaultFieldManager.
	FieldManager string
	// Adopt says whether existing objects that are not ours are taken
	// over; the zero value reports them as conflicts.
	Adopt apply.AdoptPolicy
	// Roles maps workload names to roles; nil means plan.DefaultRoles.
	Roles map[string]generate.Role
	// NoPrune leaves objects the strategy no longer holds.
	NoPrune bool
	// PruneCRDs lets prune delete CRDs (and their custom resources).
	PruneCRDs bool
	// NoWait applies every step without waiting for readiness (CRDs are
	// still waited for, since later kinds need them).
	NoWait bool
	// WaitForAPIServices waits for APIServices to become Available; the
	// zero value only writes them (their backends may have no endpoint).
	WaitForAPIServices bool
	// StageDeadline bounds the wait of each step; 0 means
	// DefaultStageDeadline.
	StageDeadline time.Duration
	// Interval is the polling interval of waits; 0 means 1 second.
	Interval time.Duration
	// Parallelism bounds concurrent writes within a step; 0 means 8.
	Parallelism int
	// Certificates tunes certificate generation for empty TLS Secrets.
	Certificates CertOptions
	// Canary tunes the DaemonSet canary rollout of the update path.
	Canary CanaryOptions
	// OnEvent, when set, is called (from one goroutine at a time) with
	// the progress of the run.
	OnEvent func(Event)
}

func (o *Options) defaults() {
	if o.ManagedBy == "" {
		o.ManagedBy = apply.DefaultManagedBy
	}
	if o.FieldManager == "" {
		o.FieldManager = apply.DefaultFieldManager
	}
	if o.StageDeadline == 0 {
		o.StageDeadline = DefaultStageDeadline
	}
	if o.Interval == 0 {
		o.Interval = time.Second
	}
	if o.Parallelism <= 0 {
		o.Parallelism = 8
	}
}

// DefaultStageDeadline is how long one step may wait for its objects when
// Options.StageDeadline is 0.
const DefaultStageDeadline = 5 * time.Minute

// EventType classifies an Event.
type EventType string

// Event types.
const (
	// EventStepStarted: a step begins.
	EventStepStarted EventType = "StepStarted"
	// EventApplied: an object was written or found unchanged (Action says
	// which).
	EventApplied EventType = "Applied"
	// EventStepReady: every object of the step is ready.
	EventStepReady EventType = "StepReady"
	// EventCanary: the canary rollout of a DaemonSet moved on (Reason
	// names the phase and the maxUnavailable value).
	EventCanary EventType = "Canary"
	// EventPruned: an object was deleted.
	EventPruned EventType = "Pruned"
	// EventDegraded: a step failed or ran out of time.
	EventDegraded EventType = "Degraded"
)

// Event is one piece of progress of Run.
type Event struct {
	Type EventType
	Step string
	// Ref is the object, zero for step events.
	Ref    strategy.ObjectRef
	Action apply.Action
	Reason string
}

// Result is what Run did.
type Result struct {
	// Plan is the plan that was run, as built before any write.
	Plan *plan.Plan
	// Applied holds the result of every strategy object, in step order.
	Applied []apply.Result
	// Pruned lists the deleted objects, in deletion order.
	Pruned []strategy.ObjectRef
	// Kept lists objects prune left alone (CRDs without PruneCRDs).
	Kept []strategy.ObjectRef
	// RolledOver is true when every step was ready and prune ran.
	RolledOver bool
}

// Count returns how many applied objects had an action.
func (r *Result) Count(a apply.Action) int {
	n := 0
	for _, x := range r.Applied {
		if x.Action == a {
			n++
		}
	}
	return n
}

// StepError says which step failed.
type StepError struct {
	Step string
	Err  error
}

func (e *StepError) Error() string { return fmt.Sprintf("step %s: %v", e.Step, e.Err) }

// Unwrap returns the cause (a *health.DegradedError when the step did not
// become ready).
func (e *StepError) Unwrap() error { return e.Err }

type run struct {
	opts    Options
	s       *strategy.Strategy
	a       *apply.Applier
	kube    kubernetes.Interface
	checker *health.Checker
	certs   *certState
	mu      sync.Mutex
	res     *Result
}

func (r *run) emit(e Event) {
	if r.opts.OnEvent == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.opts.OnEvent(e)
}

// Run makes the cluster at cfg match s: step by step in the plan's order,
// waiting for each step to be ready, then prune. Objects of kinds the
// cluster does not serve are skipped (see Result.Applied). It returns the
// result so far and an error naming the step when a step fails; conflicts
// with objects that are not ours are joined into the error at the end (the
// rest of the strategy is still applied, but nothing is pruned).
func Run(ctx context.Context, cfg *rest.Config, s *strategy.Strategy, opts Options) (*Result, error) {
	r, err := newRun(cfg, s, opts)
	if err != nil {
		return nil, err
	}
	if err := r.ensureNamespaces(ctx); err != nil {
		return r.res, err
	}
	r.certs, err = newCertState(ctx, r, r.opts.Certificates, false)
	if err != nil {
		return r.res, err
	}
	var conflicts []error
	for _, step := range r.res.Plan.Steps {
		errs, err := r.step(ctx, step)
		conflicts = append(conflicts, errs...)
		if err != nil {
			r.emit(Event{Type: EventDegraded, Step: step.Name, Reason: err.Error()})
			return r.res, &StepError{Step: step.Name, Err: err}
		}
	}
	if len(conflicts) > 0 {
		return r.res, errors.Join(conflicts...)
	}
	if !opts.NoPrune {
		if err := r.prune(ctx); err != nil {
			return r.res, &StepError{Step: plan.PruneStep, Err: err}
		}
	}
	r.res.RolledOver = true
	return r.res, nil
}

func newRun(cfg *rest.Config, s *strategy.Strategy, opts Options) (*run, error) {
	opts.defaults()
	a, err := apply.NewForConfig(cfg, apply.Options{Identity: s.Identity, FieldManager: opts.FieldManager, ManagedBy: opts.ManagedBy, Adopt: opts.Adopt})
	if err != nil {
		return nil, err
	}
	kcfg := rest.CopyConfig(cfg)
	kcfg.WarningHandler = rest.NoWarnings{}
	kube, err := kubernetes.NewForConfig(kcfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return &run{
		opts: opts, s: s, a: a, kube: kube,
		checker: &health.Checker{Kube: kube, Identity: s.Identity},
		res:     &Result{Plan: plan.Build(s, plan.Options{Observed: opts.Observed, Roles: opts.Roles})},
	}, nil
}

// Plan returns what Run would do with the same arguments, without writing:
// the plan's steps with the action of every object (server-side dry runs
// tell where only the server knows), certificates and CA bundles as Run
// would write them, and the prune list. Print it with (*plan.Plan).Print.
func Plan(ctx context.Context, cfg *rest.Config, s *strategy.Strategy, opts Options) (*plan.Plan, error) {
	r, err := newRun(cfg, s, opts)
	if err != nil {
		return nil, err
	}
	r.certs, err = newCertState(ctx, r, r.opts.Certificates, true)
	if err != nil {
		return nil, err
	}
	p := r.res.Plan
	err = plan.Observe(ctx, r.a, p, s, plan.ObserveOptions{Parallelism: r.opts.Parallelism, PruneCRDs: r.opts.PruneCRDs, Desired: r.certs.desired})
	if r.opts.NoPrune {
		p.Prune = nil
	}
	return p, err
}

// ensureNamespaces creates the namespaces the strategy's objects live in
// when they do not exist (they are never pruned).
func (r *run) ensureNamespaces(ctx context.Context) error {
	seen := map[string]bool{}
	for _, o := range r.s.Objects {
		ns := o.GetNamespace()
		if ns == "" || seen[ns] {
			continue
		}
		seen[ns] = true
		if _, err := r.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
			continue
		} else if !apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace %s: %w", ns, err)
		}
		_, err := r.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{FieldManager: r.opts.FieldManager})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	return nil
}

// step applies one step's objects, then waits until they are ready. It
// returns the conflicts separately from the error that stops the run.
func (r *run) step(ctx context.Context, step plan.Step) ([]error, error) {
	r.emit(Event{Type: EventStepStarted, Step: step.Name})
	objs := make([]*unstructured.Unstructured, 0, len(step.Items))
	for _, it := range step.Items {
		obj, err := r.certs.desired(ctx, it.Object)
		if err != nil {
			return nil, err
		}
		objs = append(objs, obj)
	}
	results := make([]apply.Result, len(objs))
	var (
		mu        sync.Mutex
		conflicts []error
		errs      []error
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.opts.Parallelism)
	for i, obj := range objs {
		g.Go(func() error {
			res, err := r.applyOne(gctx, step, obj)
			results[i] = res
			var conflict *apply.ConflictError
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.As(err, &conflict):
				conflicts = append(conflicts, err)
			case err != nil:
				errs = append(errs, err)
			}
			r.emit(Event{Type: EventApplied, Step: step.Name, Ref: res.Ref, Action: res.Action, Reason: res.Reason})
			return nil
		})
	}
	_ = g.Wait()
	r.mu.Lock()
	r.res.Applied = append(r.res.Applied, results...)
	r.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return conflicts, err
	}
	if err := r.wait(ctx, step, objs, results); err != nil {
		return conflicts, err
	}
	if step.Stage == kinds.StageCRDs {
		// Kinds of the new CRDs are served now.
		r.a.ResetMapper()
	}
	r.emit(Event{Type: EventStepReady, Step: step.Name})
	return conflicts, nil
}

// applyOne applies one object; DaemonSets on the update path go through
// the canary rollout.
func (r *run) applyOne(ctx context.Context, step plan.Step, obj *unstructured.Unstructured) (apply.Result, error) {
	if step.Stage == kinds.StageWorkloads && obj.GetKind() == "DaemonSet" && obj.GetAPIVersion() == "apps/v1" &&
		r.res.Plan.Path == plan.PathUpdate && !r.opts.Canary.Disabled && !r.opts.NoWait {
		return r.canary(ctx, step, obj)
	}
	return r.a.Apply(ctx, obj)
}

// wait waits until the written objects of a step are ready.
func (r *run) wait(ctx context.Context, step plan.Step, objs []*unstructured.Unstructured, results []apply.Result) error {
	if r.opts.NoWait && step.Stage != kinds.StageCRDs {
		return nil
	}
	var waitFor []*unstructured.Unstructured
	for i, o := range objs {
		switch results[i].Action {
		case apply.ActionSkip, apply.ActionConflict:
			continue
		}
		info, _ := kinds.Lookup(o.GroupVersionKind().GroupKind())
		if info.Health == kinds.HealthNone || (info.Health == kinds.HealthAPIService && !r.opts.WaitForAPIServices) {
			continue
		}
		waitFor = append(waitFor, o)
	}
	if len(waitFor) == 0 {
		return nil
	}
	return r.checker.Wait(ctx, r.a.Get, waitFor, health.WaitOptions{Deadline: r.opts.StageDeadline, Interval: r.opts.Interval})
}

// prune deletes what the strategy no longer holds, in the kind table's
// prune order, waiting for each group to be gone before the next.
func (r *run) prune(ctx context.Context) error {
	r.emit(Event{Type: EventStepStarted, Step: plan.PruneStep})
	// Kinds whose CRDs this run created have no objects of ours to list.
	crdKinds, err := plan.CRDKinds(r.s)
	if err != nil {
		return err
	}
	byName := map[string]schema.GroupKind{}
	for gk, name := range crdKinds {
		byName[name] = gk
	}
	empty := map[schema.GroupKind]bool{}
	for _, res := range r.res.Applied {
		if gk, ok := byName[res.Ref.Name]; ok && res.Action == apply.ActionCreate && res.Ref.Kind == "CustomResourceDefinition" {
			empty[gk] = true
		}
	}
	items, err := plan.Prunable(ctx, r.a, r.s, plan.ObserveOptions{PruneCRDs: r.opts.PruneCRDs, Parallelism: r.opts.Parallelism, EmptyKinds: empty})
	if err != nil {
		return err
	}
	r.res.Plan.Prune = items
	var errs []error
	for _, it := range items {
		if it.Action != apply.ActionDelete {
			r.res.Kept = append(r.res.Kept, it.Ref)
			continue
		}
		if err := r.a.Delete(ctx, it.Live); err != nil {
			errs = append(errs, err)
			continue
		}
		r.res.Pruned = append(r.res.Pruned, it.Ref)
		r.emit(Event{Type: EventPruned, Step: plan.PruneStep, Ref: it.Ref, Action: apply.ActionDelete, Reason: it.Reason})
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	r.emit(Event{Type: EventStepReady, Step: plan.PruneStep})
	return nil
}
