package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/health"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// Helm hooks (objects annotated helm.sh/hook, which a strategy rendered
// from a chart keeps, see pkg/plan's SplitHooks) run as helm install,
// upgrade, rollback and uninstall run them: the pre-* phase before the
// release's objects, the post-* phase after they are ready; within a
// phase one hook at a time in Helm's order (plan.PhaseHooks), a Job
// waited for until it completed, a Pod until it ended; delete policies
// honoured. Hook objects are not the release's: the inventory does not
// record them, so prune and uninstall do not delete them (their delete
// policy does), as Helm leaves them. A reconcile of the strategy whose
// hooks already ran (metakeys.HooksRanAnnotation) runs none again.

// hookKey names a strategy for the inventory's record of the hooks that
// ran: its identity, its hook objects and its release's objects (s, the
// strategy less its hooks). Another strategy of the same identity (a
// chart encoded again with other values, no new --identifier) is another
// key, so its upgrade runs the upgrade hooks, as every helm upgrade does.
func hookKey(s *strategy.Strategy, hooks []plan.Hook) string {
	h := sha256.New()
	enc := json.NewEncoder(h)
	_ = enc.Encode(s.Identity)
	for _, hk := range hooks {
		_ = enc.Encode(hk.Object.Object)
	}
	for _, o := range s.Objects {
		_ = enc.Encode(o.Object)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// hookRunner runs the hook phases of one installation.
type hookRunner struct {
	a        hookClient
	owner    inventory.Owner
	hooks    []plan.Hook
	deadline time.Duration
	interval time.Duration
	emit     func(Event)
	// finished reads what the Events say of a Job that is gone
	// (run.finishedJob): a hook Job with ttlSecondsAfterFinished: 0
	// (ingress-nginx's) may be removed before a poll sees it complete.
	finished func(ctx context.Context, obj *unstructured.Unstructured, uid types.UID) (*unstructured.Unstructured, error)
}

// newHookRunner returns a runner of hooks with their namespaces defaulted
// to the owner's, as the release's objects are.
func newHookRunner(a applier, kube kubernetes.Interface, owner inventory.Owner, id strategy.Identity, hooks []plan.Hook, deadline, interval time.Duration, emit func(Event)) (*hookRunner, error) {
	objs := make([]*unstructured.Unstructured, len(hooks))
	for i, h := range hooks {
		objs[i] = h.Object
	}
	s, err := a.DefaultNamespaces(&strategy.Strategy{Identity: id, Objects: objs}, owner.Namespace)
	if err != nil {
		return nil, fmt.Errorf("hooks: %w", err)
	}
	out := make([]plan.Hook, len(hooks))
	for i, h := range hooks {
		h.Object = s.Objects[i]
		out[i] = h
	}
	return &hookRunner{a: a.Direct(), owner: owner, hooks: out, deadline: deadline, interval: interval, emit: emit, finished: (&run{kube: kube}).finishedJob}, nil
}

// namespaces returns the namespaces the hooks of phase live in.
func (h *hookRunner) namespaces(phase plan.HookPhase) []string {
	var out []string
	for _, hk := range plan.PhaseHooks(h.hooks, phase) {
		if ns := hk.Object.GetNamespace(); ns != "" && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out
}

// run runs the hooks of phase in Helm's order. A hook that fails stops
// the phase with an error naming it (a *StepError of step "hook PHASE"),
// after its hook-failed policy and the hook-succeeded policies of the
// hooks before it; when all succeed, the hook-succeeded policies apply,
// last hook first.
func (h *hookRunner) run(ctx context.Context, phase plan.HookPhase) error {
	ordered := plan.PhaseHooks(h.hooks, phase)
	step := "hook " + string(phase)
	fail := func(err error) error {
		h.emit(Event{Type: EventDegraded, Step: step, Reason: err.Error()})
		return &StepError{Step: step, Err: err}
	}
	for i, hk := range ordered {
		if hk.Deletes(plan.HookBeforeCreation) {
			if err := h.delete(ctx, step, hk, plan.HookBeforeCreation); err != nil {
				return fail(err)
			}
		}
		res, err := h.a.Apply(ctx, hk.Object)
		h.emit(Event{Type: EventApplied, Step: step, Ref: hk.Ref(), Action: res.Action, Reason: res.Reason})
		if err == nil && (res.Action == apply.ActionConflict || res.Action == apply.ActionSkip) {
			err = fmt.Errorf("%s: %s", res.Action, res.Reason)
		}
		if err == nil {
			var uid types.UID
			if res.Object != nil {
				uid = res.Object.GetUID()
			}
			err = h.wait(ctx, hk, uid)
		}
		if err != nil {
			err = fmt.Errorf("hook %s: %w", hk.Ref(), err)
			var errs []error
			if hk.Deletes(plan.HookFailed) {
				errs = append(errs, h.delete(ctx, step, hk, plan.HookFailed))
			}
			for _, prev := range ordered[:i] {
				if prev.Deletes(plan.HookSucceeded) {
					errs = append(errs, h.delete(ctx, step, prev, plan.HookSucceeded))
				}
			}
			return fail(errors.Join(append([]error{err}, errs...)...))
		}
	}
	for _, hk := range slices.Backward(ordered) {
		if hk.Deletes(plan.HookSucceeded) {
			if err := h.delete(ctx, step, hk, plan.HookSucceeded); err != nil {
				return fail(err)
			}
		}
	}
	for _, hk := range ordered {
		if !hk.Deletes(plan.HookSucceeded) {
			// Helm leaves it too: not the release's, so neither prune nor
			// uninstall deletes it (its TTL, if any, or the next run's
			// before-hook-creation does).
			h.emit(Event{Type: EventKept, Step: step, Ref: hk.Ref(), Action: apply.ActionSkip, Reason: HookLeftReason(hk)})
		}
	}
	if len(ordered) > 0 {
		h.emit(Event{Type: EventStepReady, Step: step})
	}
	return nil
}

// wait waits until a hook's object finished (health.RunOutcome), up to
// the step deadline: an error when it failed or did not finish.
func (h *hookRunner) wait(ctx context.Context, hk plan.Hook, uid types.UID) error {
	var reason string
	err := wait.PollUntilContextTimeout(ctx, h.interval, h.deadline, true, func(ctx context.Context) (bool, error) {
		live, err := h.a.Get(ctx, hk.Object)
		if err == nil && live == nil && uid != "" && removedWhenFinished(hk.Ref()) {
			// Removed once finished (its TTL): its Events say how.
			live, err = h.finished(ctx, hk.Object, uid)
		}
		if err != nil {
			return false, err
		}
		if live == nil {
			return false, nil
		}
		finished, ok, why := health.RunOutcome(live)
		if finished && !ok {
			reason = why
		}
		return finished, nil
	})
	if err != nil {
		return fmt.Errorf("did not finish within %s: %w", h.deadline, err)
	}
	if reason != "" {
		return errors.New(reason)
	}
	return nil
}

// delete deletes a hook's live object for policy and waits until it is
// gone; absent is fine. A CRD is never deleted (as Helm never deletes one
// by a hook's policy), nor an object that does not carry the owner's
// labels.
func (h *hookRunner) delete(ctx context.Context, step string, hk plan.Hook, policy string) error {
	if definesKinds(hk.Ref()) {
		return nil
	}
	live, err := h.a.Get(ctx, hk.Object)
	if err != nil || live == nil {
		return err
	}
	if !h.owner.Owns(live.GetLabels()) {
		return fmt.Errorf("hook %s (delete policy %s): the live object is not installation %s's; not deleted", hk.Ref(), policy, h.owner)
	}
	if err := h.a.Delete(ctx, live); err != nil {
		return err
	}
	h.emit(Event{Type: EventPruned, Step: step, Ref: hk.Ref(), Action: apply.ActionDelete, Reason: "hook delete policy " + policy})
	wctx, cancel := context.WithTimeout(ctx, h.deadline)
	defer cancel()
	return h.a.WaitGone(wctx, live)
}

// removedWhenFinished reports whether ref is of a kind whose objects may
// delete themselves once finished (kinds.Info.RemovedWhenFinished: Jobs).
func removedWhenFinished(ref strategy.ObjectRef) bool {
	info, _ := kinds.Lookup(ref.GroupKind())
	return info.RemovedWhenFinished
}

// HookLeftReason says why a hook's object stays in the cluster after its
// phase: its delete policy does not remove a hook that succeeded, as with
// Helm, and it is not in the inventory.
func HookLeftReason(hk plan.Hook) string {
	return "hook left in the cluster, as Helm leaves it (delete policy " + strings.Join(hk.DeletePolicies, ",") + "); not in the inventory: uninstall leaves it too"
}

// hookAction is what the run is to Helm: a rollback when the caller says
// so, an install when the installation has no inventory (or one an
// uninstall released), an upgrade otherwise.
func (r *run) hookAction() plan.HookAction {
	switch {
	case r.opts.Rollback:
		return plan.HookRollback
	case !r.inv.Exists() || r.inv.Released:
		return plan.HookInstall
	default:
		return plan.HookUpgrade
	}
}

// hooksDone says why no hook of this run runs: the inventory records
// that the hooks of this strategy ran (an inventory an uninstall released
// records nothing: installing again runs the install hooks). "" means
// they run.
func (r *run) hooksDone(key string) string {
	if r.inv.Exists() && !r.inv.Released && r.inv.HooksRan == key {
		return "the hooks of this strategy ran (" + metakeys.HooksRanAnnotation + ")"
	}
	return ""
}

// runWithHooks is run with the hook phases of its action around it: the
// pre-* phase after the checks that precede any write, the post-* phase
// after the steps and prune, then the inventory records that they ran.
func (r *run) runWithHooks(ctx context.Context, hooks []plan.Hook) (*Result, error) {
	action := r.hookAction()
	pre, post := plan.PhasesOf(action)
	key := hookKey(r.original, hooks)
	if done := r.hooksDone(key); done != "" {
		return r.run(ctx)
	}
	h, err := newHookRunner(r.a, r.kube, r.opts.Owner, r.s.Identity, hooks, r.opts.StageDeadline, r.opts.Interval, r.emit)
	if err != nil {
		return r.res, err
	}
	if len(plan.PhaseHooks(hooks, pre)) > 0 {
		// What run checks before its first write, before the hooks'.
		if err := r.beforeFirstWrite(ctx); err != nil {
			return r.res, err
		}
		for _, ns := range h.namespaces(pre) {
			if err := r.ensureNamespace(ctx, ns); err != nil {
				return r.res, err
			}
		}
		if err := h.run(ctx, pre); err != nil {
			return r.res, err
		}
	}
	res, err := r.run(ctx)
	if err != nil {
		return res, err
	}
	if err := h.run(ctx, post); err != nil {
		return res, err
	}
	r.inv.HooksRan = key
	if err := r.invs.Write(ctx, r.inv); err != nil {
		return res, fmt.Errorf("hooks: %w", err)
	}
	return res, nil
}

// planHooks adds the hook phases of the run's action to its plan.
func (r *run) planHooks(hooks []plan.Hook) {
	if len(hooks) == 0 {
		return
	}
	r.res.Plan.Hooks = plan.PlanHooks(hooks, r.hookAction(), r.hooksDone(hookKey(r.original, hooks)))
}

// uninstallWithHooks is uninstall with the pre-delete hooks of s before
// it and its post-delete hooks after it. The namespaces the post-delete
// hooks live in are deleted after them.
func (rc *Reconciler) uninstallWithHooks(ctx context.Context, opts UninstallOptions) ([]strategy.ObjectRef, error) {
	s, hooks := plan.SplitHooks(opts.Strategy)
	pre, post := plan.PhaseHooks(hooks, plan.PreDelete), plan.PhaseHooks(hooks, plan.PostDelete)
	if opts.AdmissionOnly || len(pre)+len(post) == 0 {
		return rc.uninstall(ctx, opts)
	}
	emit := func(e Event) {
		if opts.OnEvent != nil {
			opts.OnEvent(e)
		}
	}
	a := rc.applier(apply.Options{Identity: s.Identity, Owner: opts.Owner, SystemConsent: opts.SystemConsent, RetryFor: DefaultStageDeadline})
	h, err := newHookRunner(a, rc.kube, opts.Owner, s.Identity, hooks, DefaultStageDeadline, time.Second, emit)
	if err != nil {
		return nil, fmt.Errorf("uninstall: %w", err)
	}
	if err := h.run(ctx, plan.PreDelete); err != nil {
		return nil, fmt.Errorf("uninstall: %w", err)
	}
	if len(post) == 0 {
		return rc.uninstall(ctx, opts)
	}
	first := opts
	first.deferNamespaces = h.namespaces(plan.PostDelete)
	deleted, err := rc.uninstall(ctx, first)
	if err != nil {
		return deleted, err
	}
	if err := h.run(ctx, plan.PostDelete); err != nil {
		return deleted, fmt.Errorf("uninstall: %w", err)
	}
	if inv, err := inventory.NewStore(rc.kube).Get(ctx, opts.Owner); err != nil || !inv.Exists() {
		// Nothing was deferred: the first uninstall removed the inventory.
		return deleted, err
	}
	rest, err := rc.uninstall(ctx, opts)
	return append(deleted, rest...), err
}
