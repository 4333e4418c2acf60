// Package engine owns the staged pipeline that makes a cluster match a
// strategy: it builds the plan (pkg/plan), then for every step applies its
// objects (pkg/apply) and waits until they are rolled over (pkg/health)
// before the next step starts, generates certificates for empty TLS Secrets
// and injects their CA bundle into webhooks and APIServices, rolls
// DaemonSets out with a canary on the update path, and finally prunes what
// the strategy no longer holds. Run is the one entry point; Options.OnEvent
// reports progress.
package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/health"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

type run struct {
	opts Options
	s    *strategy.Strategy
	// original is the strategy as the caller gave it, before namespaces
	// were defaulted (which Options.Claims is matched against).
	original *strategy.Strategy
	// req is what the strategy declares the cluster must offer (nil
	// when it declares nothing); s no longer holds it.
	req *strategy.Requirements
	// checked is set once beforeFirstWrite passed.
	checked bool
	a       applier
	kube    kubernetes.Interface
	checker *health.Checker
	certs   *certState
	inv     *inventory.Inventory
	invs    *inventory.Store
	mu      sync.Mutex
	res     *Result
	// probed is the applier of the step running (apply.Probe over its
	// objects), which the certificates' reads of its Secrets use too.
	probed plan.Getter
	// crds is the applied CRD step not yet waited for (settleCRDs).
	crds *appliedCRDs
	// ensured holds, by name, the results of the Namespaces applied
	// ahead of the steps (ensureNamespace), which their step takes.
	ensured map[string]apply.Result
	// absent holds the cluster-scoped objects the claim check found
	// absent (read no more before the first write).
	absent map[strategy.ObjectRef]bool
}

func (r *run) emit(e Event) {
	if r.opts.OnEvent == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.opts.OnEvent(e)
}

// beforeFirstWrite runs, once per run, the checks that precede its first
// write (the pre-hooks' included): the cluster-scoped objects are not
// another live installation's (ClaimedError); no CRD change loses or
// invalidates what custom resources hold unless an override accepts it;
// the cluster offers what the strategy requires; the API server takes
// every object the run would write (a server-side dry run).
func (r *run) beforeFirstWrite(ctx context.Context) error {
	if r.checked {
		return nil
	}
	for _, check := range []func(context.Context) error{r.claim, r.crdPreflight, r.declaredPreflight, r.serverPreflight} {
		if err := check(ctx); err != nil {
			return err
		}
	}
	r.checked = true
	return nil
}

func (r *run) run(ctx context.Context) (*Result, error) {
	s, opts := r.s, r.opts
	if err := r.beforeFirstWrite(ctx); err != nil {
		return r.res, err
	}
	if err := r.ensureNamespace(ctx, r.opts.Owner.Namespace); err != nil {
		return r.res, err
	}
	refs, err := r.recordable()
	if err != nil {
		return r.res, err
	}
	r.inv.Add(refs...)
	r.inv.Version = s.Identity.Version
	r.inv.Released = false
	if err := r.invs.Write(ctx, r.inv); err != nil {
		return r.res, err
	}
	r.certs, err = newCertState(ctx, r, r.opts.Certificates, false)
	if err != nil {
		return r.res, err
	}
	if err := r.certs.publishBundle(ctx); err != nil {
		return r.res, err
	}
	var conflicts []error
	for _, step := range r.res.Plan.Steps {
		if idx := r.crds.needed(step); len(idx) > 0 {
			if err := r.settleCRDs(ctx, idx); err != nil {
				return r.res, err
			}
		}
		errs, err := r.step(ctx, step)
		conflicts = append(conflicts, errs...)
		if err != nil {
			r.emit(Event{Type: EventDegraded, Step: step.Name, Reason: err.Error()})
			return r.res, &StepError{Step: step.Name, Err: err}
		}
	}
	if opts.NoWait {
		r.leaveCreatedCRDs()
	}
	if err := r.settleCRDs(ctx, nil); err != nil {
		return r.res, err
	}
	if len(conflicts) > 0 {
		return r.res, errors.Join(conflicts...)
	}
	if !opts.NoPrune {
		if err := r.prune(ctx); err != nil {
			return r.res, &StepError{Step: plan.PruneStep, Err: err}
		}
	}
	if err := r.recordApplied(ctx); err != nil {
		return r.res, &StepError{Step: plan.PruneStep, Err: err}
	}
	r.res.RolledOver = true
	if opts.ServedCertificates.Enabled {
		served, err := r.certs.checkServed(ctx, opts.ServedCertificates)
		if err != nil {
			return r.res, err
		}
		if served == nil {
			served = []ServedCertificate{}
		}
		r.res.ServedCertificates = served
	}
	return r.res, nil
}

func (rc *Reconciler) newRun(ctx context.Context, s *strategy.Strategy, opts Options) (*run, error) {
	opts.defaults()
	if err := opts.Owner.Validate(); err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	// A transient failure (a webhook whose backend is still starting, 429,
	// 5xx) is retried until the step's deadline.
	a := rc.a.WithOptions(apply.Options{Identity: s.Identity, FieldManager: opts.FieldManager, Owner: opts.Owner, Adopt: opts.Adopt, Adoptable: opts.Adoptable, SystemConsent: opts.SystemConsent, RetryFor: opts.StageDeadline, LeavePodTemplates: opts.LeavePodTemplates})
	if !opts.Claims.answers(s, opts.Owner) {
		// Kinds served since the last run are found. (A claim check whose
		// answer the run takes has just asked discovery.)
		a.ResetMapper()
	}
	kube := rc.kube
	original := s
	req, s, err := s.Requirements()
	if err != nil {
		return nil, err
	}
	s, err = a.DefaultNamespaces(s, opts.Owner.Namespace)
	if err != nil {
		return nil, err
	}
	s = withImplicitNamespaces(s, opts.Owner.Namespace)
	invs := inventory.NewStore(kube)
	invs.FieldManager, invs.OwnerReference = opts.FieldManager, opts.OwnerReference
	inv, err := invs.Get(ctx, opts.Owner)
	if err != nil {
		return nil, err
	}
	if !inv.Exists() && opts.Observed != (strategy.Identity{}) {
		// The first inventory of an installation an older installstrategy
		// applied starts from what that version marked as its own. One
		// that observes nothing was never installed, by any version.
		legacy, err := plan.LegacyObjects(ctx, a)
		if err != nil {
			return nil, fmt.Errorf("inventory of %s: %w", opts.Owner, err)
		}
		inv.Add(legacy...)
	}
	return &run{
		opts: opts, s: s, original: original, req: req, a: a, kube: kube, inv: inv, invs: invs,
		// A rolling-out workload's pods are listed every few polls (for
		// a failed pod), not at every poll.
		checker: &health.Checker{Kube: kube, Identity: s.Identity, PodsEvery: 5 * opts.Interval, VerifyPods: opts.VerifyPods},
		res:     &Result{Plan: plan.Build(s, plan.Options{Observed: opts.Observed, Roles: opts.Roles})},
	}, nil
}

func (r *run) plan(ctx context.Context) (*plan.Plan, error) {
	p := r.res.Plan
	var claimed *ClaimedError
	err := r.claim(ctx)
	switch {
	case errors.As(err, &claimed):
		p.Blocked = claimed.Error()
	case err != nil:
		return p, err
	}
	if p.CRDSafety, err = r.crdChanges(ctx); err != nil {
		return p, err
	}
	if p.Unmet, err = r.unmet(ctx); err != nil {
		return p, err
	}
	r.certs, err = newCertState(ctx, r, r.opts.Certificates, true)
	if err != nil {
		return nil, err
	}
	err = plan.Observe(ctx, r.a, r.a.DryRunner(), p, r.s, plan.ObserveOptions{Parallelism: r.opts.Parallelism, PruneCRDs: r.opts.PruneCRDs, Desired: r.certs.desired, Inventory: r.inv})
	if r.opts.NoPrune {
		p.Prune = nil
	}
	notePruned(p)
	if err != nil {
		return p, err
	}
	migrate, err := r.migrationsPlanned(ctx, p)
	if migrate != nil {
		withMigrationStep(p, migrate)
	}
	return p, err
}

// step applies one step's objects, then waits until they are ready. It
// returns the conflicts separately from the error that stops the run.
func (r *run) step(ctx context.Context, step plan.Step) ([]error, error) {
	r.emit(Event{Type: EventStepStarted, Step: step.Name})
	// Objects the cache does not hold are looked up by a list per
	// resource and namespace, not one read each (the certificates'
	// reads of their Secrets included).
	raw := make([]*unstructured.Unstructured, 0, len(step.Items))
	for _, it := range step.Items {
		if _, ok := r.ensuredResult(it.Object); !ok {
			raw = append(raw, it.Object)
		}
	}
	a := r.a.Probe(ctx, raw)
	r.mu.Lock()
	r.probed = a
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.probed = nil
		r.mu.Unlock()
	}()
	objs := make([]*unstructured.Unstructured, 0, len(step.Items))
	for _, it := range step.Items {
		obj, err := r.certs.desired(ctx, it.Object)
		if err != nil {
			return nil, err
		}
		objs = append(objs, obj)
	}
	results, conflicts, errs := r.writeStep(ctx, a, step, objs)
	r.keepResults(results)
	if err := r.recordNamespaces(ctx, results...); err != nil {
		return conflicts, err
	}
	if err := errors.Join(errs...); err != nil {
		return conflicts, err
	}
	if step.Stage == kinds.StageCRDs {
		// Not waited for here: the API server establishes the CRDs while
		// the steps that do not need their kinds run (virt-operator does
		// not wait for them at all). The first step that writes one of
		// their kinds, or the end of the run, waits (settleCRDs).
		r.crds = newAppliedCRDs(step, objs, results)
		return conflicts, nil
	}
	if err := r.wait(ctx, step, objs, results, waitHow{}); err != nil {
		return conflicts, err
	}
	r.emit(Event{Type: EventStepReady, Step: step.Name})
	return conflicts, nil
}

// applyOne applies one object with a (the run's applier, probed for the
// step); DaemonSets on the update path go through the canary rollout. A
// Job that completed before with the same applied hash and was removed
// since (ttlSecondsAfterFinished) is not run again.
func (r *run) applyOne(ctx context.Context, a plan.Writer, step plan.Step, obj *unstructured.Unstructured) (apply.Result, error) {
	if info, _ := kinds.Lookup(obj.GroupVersionKind().GroupKind()); step.Stage == kinds.StageWorkloads && info.Canary && obj.GetAPIVersion() == info.APIVersion() &&
		r.res.Plan.Path == plan.PathUpdate && !r.opts.Canary.Disabled && !r.opts.NoWait {
		return r.canary(ctx, step, obj)
	}
	if res, done, err := r.completedJob(ctx, obj); done || err != nil {
		return res, err
	}
	return a.Apply(ctx, obj)
}

// writeStep applies a step's objects (Parallelism at a time) with a,
// except those this run applied ahead of the steps, and emits an
// EventApplied for each. Conflicts (*apply.ConflictError) are returned
// apart from the other errors.
func (r *run) writeStep(ctx context.Context, a plan.Writer, step plan.Step, objs []*unstructured.Unstructured) (results []apply.Result, conflicts, errs []error) {
	results = make([]apply.Result, len(objs))
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.opts.Parallelism)
	for i, obj := range objs {
		if res, ok := r.ensuredResult(obj); ok {
			// Applied ahead of the steps by this run (ensureNamespace).
			results[i] = res
			continue
		}
		g.Go(func() error {
			res, err := r.applyOne(gctx, a, step, obj)
			// Kept until the step's wait: only what its health check reads.
			res.Object = health.Essentials(res.Object)
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
	return results, conflicts, errs
}

// keepResults records what happened to each object of a step in the run's
// result (and the adopted ones in the inventory).
func (r *run) keepResults(results []apply.Result) {
	r.mu.Lock()
	// The run keeps what happened to each object, not the objects: the
	// step's live copies and the writes' responses (as large as the
	// strategy together) are dropped with the step.
	for _, res := range results {
		res.Object = nil
		r.res.Applied = append(r.res.Applied, res)
		if res.Adopted {
			r.res.Adopted = append(r.res.Adopted, res.Ref)
			r.recordAdopted(res.Ref)
		}
	}
	r.mu.Unlock()
}
