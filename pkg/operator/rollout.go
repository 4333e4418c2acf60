package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/crdsafety"
	"github.com/installstrategy/installstrategy/pkg/health"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/reconcile"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

var workloadResources = map[string]schema.GroupVersionResource{
	"Deployment":  {Group: "apps", Version: "v1", Resource: "deployments"},
	"DaemonSet":   {Group: "apps", Version: "v1", Resource: "daemonsets"},
	"StatefulSet": {Group: "apps", Version: "v1", Resource: "statefulsets"},
}

// reconcileOptions maps the spec onto the reconciler's options.
func (r *Reconciler) reconcileOptions(s *state, onEvent func(reconcile.Event)) reconcile.Options {
	in := s.Installation
	canary := in.Spec.CanaryOrDefault()
	caLife, serverLife := in.Spec.CertificateLifetimes()
	return reconcile.Options{
		Observed:       observedIdentity(in),
		Owner:          Owner(in),
		OwnerReference: &metav1.OwnerReference{APIVersion: r.res.GroupVersionKind().GroupVersion().String(), Kind: r.res.GroupVersionKind().Kind, Name: in.Name, UID: in.UID},
		Adopt:          adoptPolicy(in.Spec.Adopt),
		PruneCRDs:      in.Spec.PruneCRDs,
		StageDeadline:  r.opts.StageDeadline,
		Interval:       r.opts.Interval,
		Canary:         reconcile.CanaryOptions{Step: intstr.FromString(fmt.Sprintf("%d%%", canary.StepPercent))},
		Certificates: reconcile.CertOptions{
			CAValidity:      caLife.Duration,
			CARenewBefore:   caLife.RenewBefore,
			CertValidity:    serverLife.Duration,
			CertRenewBefore: serverLife.RenewBefore,
		},
		// While Degraded, a workload's pods decide its health, not its
		// status: a probe-less container that crashes soon after each start
		// is Ready between its crashes and must not clear the condition.
		VerifyPods:      in.IsConditionTrue(v1alpha1.ConditionDegraded),
		OnEvent:         onEvent,
		Claims:          s.claims,
		AllowCRDChanges: crdAllowances(in),
	}
}

// crdAllowances maps spec.crdSafety.allow onto the reconciler's overrides.
func crdAllowances(in *v1alpha1.Installation) []crdsafety.Allow {
	if in.Spec.CRDSafety == nil {
		return nil
	}
	out := make([]crdsafety.Allow, 0, len(in.Spec.CRDSafety.Allow))
	for _, a := range in.Spec.CRDSafety.Allow {
		out = append(out, crdsafety.Allow{CRD: a.CRD, Rule: crdsafety.Rule(a.Rule)})
	}
	return out
}

func adoptPolicy(adopt bool) apply.AdoptPolicy {
	if adopt {
		return apply.AdoptAll
	}
	return apply.AdoptNever
}

// errDeletedMidRollout stops a rollout whose Installation is being deleted.
var errDeletedMidRollout = errors.New("the installation is being deleted")

// beingDeleted reports whether the Installation (as the manager's cache
// has it) has a deletion timestamp.
func (r *Reconciler) beingDeleted(ctx context.Context, in *v1alpha1.Installation) bool {
	cur := r.res.New()
	if err := r.client.Get(ctx, client.ObjectKeyFromObject(in), cur); err != nil {
		return apierrors.IsNotFound(err)
	}
	return cur.GetDeletionTimestamp() != nil
}

// stageApply rolls the strategy out with reconcile.Run, keeping
// status.components fresh while it runs, and records the outcome.
func (r *Reconciler) stageApply(ctx context.Context, s *state) (bool, error) {
	in := s.Installation
	observed := observedIdentity(in)
	// Nothing observed yet: the first rollout. (Not "no identifier
	// observed": a strategy ConfigMap may record none, and then every
	// resync was a fresh rollout, with two status writes and two events.)
	fresh := observed == (strategy.Identity{})
	updating := !fresh && observed != s.Target
	changing := updating || fresh || in.Status.Phase != v1alpha1.PhaseDeployed || in.Status.ObservedGeneration != in.Generation
	// A failed rollout of the same spec is retried (the cluster may have
	// been repaired) but stays Failed until it succeeds.
	retryFailed := in.Status.Phase == v1alpha1.PhaseFailed && in.Status.ObservedGeneration == in.Generation && targetIdentity(in) == s.Target
	if changing && !retryFailed {
		s.update(func(in *v1alpha1.Installation) {
			in.Status.Phase = v1alpha1.PhaseDeploying
			in.Status.TargetVersion, in.Status.TargetRegistry, in.Status.TargetIdentifier = s.Target.Version, s.Target.Registry, s.Target.Identifier
			switch {
			case fresh:
				msg := "deploying " + s.Target.Version
				in.SetCondition(v1alpha1.ConditionProgressing, metav1.ConditionTrue, v1alpha1.ReasonDeploymentInProgress, msg)
				in.SetCondition(v1alpha1.ConditionAvailable, metav1.ConditionFalse, v1alpha1.ReasonDeploymentInProgress, msg)
				in.SetCondition(v1alpha1.ConditionCreated, metav1.ConditionFalse, v1alpha1.ReasonDeploymentInProgress, msg)
			case updating:
				msg := fmt.Sprintf("updating from %s to %s", observed.Version, s.Target.Version)
				in.SetCondition(v1alpha1.ConditionProgressing, metav1.ConditionTrue, v1alpha1.ReasonUpdateInProgress, msg)
			default:
				in.SetCondition(v1alpha1.ConditionProgressing, metav1.ConditionTrue, v1alpha1.ReasonDeploymentInProgress, "deploying "+s.Target.Version)
			}
			if c := in.Condition(v1alpha1.ConditionDegraded); c == nil {
				in.SetCondition(v1alpha1.ConditionDegraded, metav1.ConditionFalse, v1alpha1.ReasonDeploymentInProgress, "")
			}
		})
		if err := r.writeStatus(ctx, s); err != nil {
			return false, err
		}
		action, reason, note := "Deploy", v1alpha1.ReasonDeploymentInProgress, "deploying"
		if updating {
			action, reason, note = "Update", v1alpha1.ReasonUpdateInProgress, "updating from "+observed.Version+" to"
		}
		r.event(in, corev1.EventTypeNormal, reason, action, "%s %s (identifier %s)", note, s.Target.Version, short(s.Target.Identifier))
		s.log.Info("rollout started", "version", s.Target.Version, "identifier", s.Target.Identifier, "update", updating)
	}

	// Stop the rollout once the Installation is being deleted: its
	// deletion must not wait for a step's deadline. The watch of
	// Installations cancels it (stopDeletedRollouts); the cache is checked
	// once here for a deletion that came before.
	runCtx, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)
	r.rollouts.Store(in.UID, cancelRun)
	defer r.rollouts.Delete(in.UID)
	if r.beingDeleted(ctx, in) {
		cancelRun(errDeletedMidRollout)
	}

	// status.components follows the reconciler's progress: its events
	// (each round of a step's wait, a step ready, a canary phase) refresh
	// it from the informer cache, and a change is written at most once per
	// ProgressInterval (at once when a step is ready). No goroutine polls.
	interval := r.opts.ProgressInterval
	if interval <= 0 {
		interval = DefaultProgressInterval
	}
	var lastWrite time.Time
	progress := func(e reconcile.Event) {
		switch e.Type {
		case reconcile.EventProgress, reconcile.EventCanary:
			if time.Since(lastWrite) < interval {
				return
			}
		case reconcile.EventStepReady:
		default:
			return
		}
		if r.refreshComponents(runCtx, s, true) {
			lastWrite = time.Now()
			if err := r.writeStatus(runCtx, s); err != nil && runCtx.Err() == nil {
				s.log.V(1).Info("progress not written", "error", err.Error())
			}
		}
	}
	onEvent := func(e reconcile.Event) {
		switch e.Type {
		case reconcile.EventApplied:
			r.metrics.Objects.WithLabelValues(e.Ref.Kind, string(e.Action)).Inc()
		case reconcile.EventPruned:
			r.metrics.Objects.WithLabelValues(e.Ref.Kind, string(apply.ActionDelete)).Inc()
			r.event(in, corev1.EventTypeNormal, v1alpha1.ReasonPruned, "Prune", "deleted %s", e.Ref)
		case reconcile.EventKept:
			r.event(in, corev1.EventTypeNormal, v1alpha1.ReasonKept, "Prune", "kept %s: %s", e.Ref, e.Reason)
		case reconcile.EventCanary:
			r.event(in, corev1.EventTypeNormal, v1alpha1.ReasonCanary, "Rollout", "%s: %s", e.Ref, e.Reason)
		case reconcile.EventStaleCache:
			s.log.Info("stale cache", "step", e.Step, "object", e.Ref.String(), "reason", e.Reason)
			r.event(in, corev1.EventTypeWarning, v1alpha1.ReasonStaleCache, "Rollout", "%s: %s", e.Ref, e.Reason)
		case reconcile.EventStepStarted:
			s.log.V(1).Info("step started", "step", e.Step)
		case reconcile.EventStepReady:
			s.log.V(1).Info("step ready", "step", e.Step)
		}
		progress(e)
	}
	start := time.Now()
	runOpts := r.reconcileOptions(s, onEvent)
	runOpts.ServedCertificates = r.servedCheck(in, changing)
	stopDrift := r.watchDrift(in.Namespace)
	res, runErr := r.rc.Run(runCtx, s.Strategy, runOpts)
	drifts := stopDrift()
	if errors.Is(context.Cause(runCtx), errDeletedMidRollout) && ctx.Err() == nil {
		// Reconcile again at once (the deletion's event does too): the
		// delete stages run.
		s.log.Info("rollout stopped: the installation is being deleted", "version", s.Target.Version)
		s.Outcome = "deleted"
		s.Result.RequeueAfter = 10 * time.Millisecond
		return true, nil
	}
	r.refreshComponents(ctx, s, false)

	if runErr != nil && ctx.Err() != nil {
		// Stopped (the operator shuts down): not a failure of the product.
		s.Outcome = "error"
		return false, runErr
	}
	var claimed *reconcile.ClaimedError
	if errors.As(runErr, &claimed) {
		// Claimed since the claim stage looked: nothing was written.
		return true, r.waitForClaim(ctx, s, claimed)
	}
	if refusal, ok := asRefusal(runErr); ok {
		// Refused before the write it guards (a CRD change the preflight
		// refuses): what runs stays as it is, Stalled until the
		// Installation or the cluster changes; looked at again at the
		// next resync, not retried at once.
		reason := refusal.RefusalReason()
		s.update(func(in *v1alpha1.Installation) {
			in.SetCondition(v1alpha1.ConditionDegraded, metav1.ConditionTrue, reason, runErr.Error())
		})
		if err := r.writeStatus(ctx, s); err != nil {
			return false, errors.Join(runErr, err)
		}
		r.event(in, corev1.EventTypeWarning, reason, "Rollout", "%s", runErr.Error())
		s.log.Info("rollout refused", "reason", reason, "error", runErr.Error())
		s.Outcome = "degraded"
		s.Result.RequeueAfter = r.resync()
		return true, nil
	}
	if runErr != nil {
		reason := v1alpha1.ReasonApplyFailed
		var degraded *health.DegradedError
		var conflict *apply.ConflictError
		switch {
		case failedCanary(runErr, in):
			reason = v1alpha1.ReasonCanaryFailed
		case errors.As(runErr, &conflict):
			reason = v1alpha1.ReasonApplyFailed
		case errors.As(runErr, &degraded):
			reason = v1alpha1.ReasonDeploymentFailed
		}
		if changing {
			r.metrics.RolloutSeconds.WithLabelValues("failed").Observe(time.Since(start).Seconds())
		}
		s.update(func(in *v1alpha1.Installation) {
			if reason == v1alpha1.ReasonCanaryFailed {
				in.Status.Phase = v1alpha1.PhaseFailed
			}
			in.SetCondition(v1alpha1.ConditionDegraded, metav1.ConditionTrue, reason, runErr.Error())
			if reason == v1alpha1.ReasonApplyFailed {
				in.SetCondition(v1alpha1.ConditionSynchronized, metav1.ConditionFalse, reason, runErr.Error())
			}
		})
		if err := r.writeStatus(ctx, s); err != nil {
			return false, errors.Join(runErr, err)
		}
		r.event(in, corev1.EventTypeWarning, reason, "Rollout", "%s", runErr.Error())
		s.Outcome = "degraded"
		return false, runErr
	}

	s.update(func(in *v1alpha1.Installation) {
		in.Status.Phase = v1alpha1.PhaseDeployed
		in.Status.ObservedVersion, in.Status.ObservedRegistry, in.Status.ObservedIdentifier = s.Target.Version, s.Target.Registry, s.Target.Identifier
		in.Status.TargetVersion, in.Status.TargetRegistry, in.Status.TargetIdentifier = s.Target.Version, s.Target.Registry, s.Target.Identifier
		in.SetCondition(v1alpha1.ConditionAvailable, metav1.ConditionTrue, v1alpha1.ReasonAllComponentsReady, "all components are ready")
		in.SetCondition(v1alpha1.ConditionProgressing, metav1.ConditionFalse, v1alpha1.ReasonAllComponentsReady, "")
		in.SetCondition(v1alpha1.ConditionDegraded, metav1.ConditionFalse, v1alpha1.ReasonAllComponentsReady, "")
		in.SetCondition(v1alpha1.ConditionCreated, metav1.ConditionTrue, v1alpha1.ReasonAllResourcesCreated, "all resources were created")
		in.SetCondition(v1alpha1.ConditionSynchronized, metav1.ConditionTrue, v1alpha1.ReasonAllResourcesSynchronized, "all resources were applied")
	})
	if res.ServedCertificates != nil {
		r.certChecked.Store(in.UID, time.Now())
		r.recordServedCertificates(s, res.ServedCertificates)
	}
	if err := r.writeStatus(ctx, s); err != nil {
		return false, err
	}
	if changing {
		r.metrics.RolloutSeconds.WithLabelValues("deployed").Observe(time.Since(start).Seconds())
		r.event(in, corev1.EventTypeNormal, v1alpha1.ReasonAllComponentsReady, "Deploy",
			"deployed %s: %d created, %d updated, %d recreated, %d unchanged, %d pruned",
			s.Target.Version, res.Count(apply.ActionCreate), res.Count(apply.ActionUpdate), res.Count(apply.ActionRecreate),
			res.Count(apply.ActionUnchanged), len(res.Pruned))
		s.log.Info("rollout finished", "version", s.Target.Version, "identifier", s.Target.Identifier,
			"created", res.Count(apply.ActionCreate), "updated", res.Count(apply.ActionUpdate), "pruned", len(res.Pruned))
	}
	s.Result.RequeueAfter = r.pollInterval(in)
	if ref, ok := drifts.foreign(res); ok {
		// Someone changed a workload while the rollout ran (its own
		// writes queue nothing; see workloadDrift): repair it now.
		s.log.V(1).Info("a workload changed during the rollout; reconciling again", "object", ref.String())
		s.Result.RequeueAfter = 10 * time.Millisecond
	}
	return false, nil
}

// failedCanary reports whether a rollout failed at a DaemonSet canary: the
// reconciler says so (a *reconcile.CanaryError), or, on a retry of the same
// target, the status already says CanaryFailed and a DaemonSet failed (the
// retry finds the DaemonSet applied and starts no canary).
func failedCanary(runErr error, in *v1alpha1.Installation) bool {
	var canaryErr *reconcile.CanaryError
	if errors.As(runErr, &canaryErr) {
		return true
	}
	var deg *health.DegradedError
	if !errors.As(runErr, &deg) {
		return false
	}
	c := in.Condition(v1alpha1.ConditionDegraded)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonCanaryFailed {
		return false
	}
	for _, o := range deg.Objects {
		// A canary is what the kind table's per-node rule rolls out.
		if info, _ := kinds.Lookup(o.Ref.GroupKind()); o.Failed && info.Health == kinds.HealthDaemonSet {
			return true
		}
	}
	return false
}

// stageGC deletes the stored strategies of the namespace other than the
// deployed one.
//
// The strategies the histories of the namespace's Installations name
// (status.history, spec.historyLimit of each) are kept, so that rollback
// can return to them; the deployed one is recorded at the head of this
// Installation's history.
func (r *Reconciler) stageGC(ctx context.Context, s *state) (bool, error) {
	keep, err := r.historyConfigMaps(ctx, s.Installation.Namespace)
	if err != nil {
		return false, fmt.Errorf("garbage-collect strategies: %w", err)
	}
	res, err := r.store.GCKeeping(ctx, s.Installation.Namespace, s.Target, keep)
	if err != nil {
		return false, fmt.Errorf("garbage-collect strategies: %w", err)
	}
	for _, e := range res.Deleted {
		s.log.V(1).Info("strategy deleted", "configmap", e.String(), "version", e.Identity.Version)
	}
	// The history records what this reconcile loaded and applied: the
	// entry kept is another when its ConfigMap was replaced meanwhile (a
	// tampered copy, untrusted, is kept as the only match until the fresh
	// one is stored), and recording it would retain that copy for good.
	if e := res.Kept; e != nil && s.Installation.Status.Strategy != nil && e.Digest == s.Installation.Status.Strategy.Digest {
		rev := v1alpha1.StrategyRevision{Version: e.Identity.Version, Registry: e.Identity.Registry, Identifier: e.Identity.Identifier,
			ConfigMap: e.Name, Digest: e.Digest, DeployedAt: metav1.Now().Rfc3339Copy()}
		if st := s.Installation.Status.Strategy; st != nil {
			rev.Source = st.Source
		}
		return true, r.recordRevision(ctx, s, rev)
	}
	if st := s.Installation.Status.Strategy; st != nil && st.Source == v1alpha1.StrategySourceOCI && st.OCI != "" {
		// An OCI source is stored in its registry, not in the cluster:
		// the history names the artifact.
		return true, r.recordRevision(ctx, s, v1alpha1.StrategyRevision{Version: s.Target.Version, Registry: s.Target.Registry,
			Identifier: s.Target.Identifier, Digest: st.Digest, OCI: st.OCI, Source: st.Source, DeployedAt: metav1.Now().Rfc3339Copy()})
	}
	if st := s.Installation.Status.Strategy; st != nil && st.Source == v1alpha1.StrategySourceHelm && st.Chart != "" {
		// A chart's render is stored nowhere: the history names the
		// chart and the values it was rendered with.
		return true, r.recordRevision(ctx, s, v1alpha1.StrategyRevision{Version: s.Target.Version, Identifier: s.Target.Identifier,
			Digest: st.Digest, Chart: st.Chart, ValuesDigest: st.ValuesDigest, Source: st.Source, DeployedAt: metav1.Now().Rfc3339Copy()})
	}
	return true, nil
}

// recordRevision puts rev at the head of the history, writing the status
// when that changed it.
func (r *Reconciler) recordRevision(ctx context.Context, s *state, rev v1alpha1.StrategyRevision) error {
	changed := false
	s.update(func(in *v1alpha1.Installation) { changed = in.RecordRevision(rev) })
	if changed {
		if err := r.writeStatus(ctx, s); err != nil {
			return fmt.Errorf("record history: %w", err)
		}
	}
	return nil
}

// historyConfigMaps lists the stored strategies the histories of a
// namespace's Installations name, with the digests they ran with (read from
// the cache), and the ConfigMaps their configMap sources name.
func (r *Reconciler) historyConfigMaps(ctx context.Context, namespace string) ([]store.Retain, error) {
	list, err := r.list(ctx, namespace)
	if err != nil {
		return nil, fmt.Errorf("list installations in %s: %w", namespace, err)
	}
	var out []store.Retain
	for _, in := range list {
		if in.Spec.StrategySourceType() == v1alpha1.StrategySourceConfigMap {
			// A ConfigMap an Installation names is its author's, whatever
			// it holds now (replaced by another version, it is refused,
			// not deleted).
			out = append(out, store.Retain{Name: in.Spec.Strategy.ConfigMap.Name})
		}
		for _, h := range in.Status.History {
			if h.ConfigMap != "" {
				out = append(out, store.Retain{Name: h.ConfigMap, Digest: h.Digest})
			}
		}
	}
	return out, nil
}

// refreshComponents reads the workloads of the strategy and records their
// rollout progress; it reports whether anything changed. cachedOnly (the
// refreshes during a rollout) reads only the informer cache.
func (r *Reconciler) refreshComponents(ctx context.Context, s *state, cachedOnly bool) bool {
	if s.Strategy == nil {
		return false
	}
	checker := &health.Checker{Kube: r.kube, Identity: s.Target}
	if cachedOnly {
		// The rollout lists pods itself; a progress refresh does not.
		checker.PodsEvery = -1
	}
	var comps []v1alpha1.ComponentStatus
	for _, o := range s.Strategy.Objects {
		if _, ok := workloadResources[o.GetKind()]; !ok || o.GroupVersionKind().Group != "apps" {
			continue
		}
		c := v1alpha1.ComponentStatus{Name: o.GetName(), Kind: o.GetKind(), Role: string(plan.RoleOf(o, nil))}
		var live *unstructured.Unstructured
		var err error
		if cachedOnly {
			// A workload the cache does not hold (yet) is not asked for:
			// during a rollout most are not created yet, and a GET each
			// (a 404) per refresh cost more than the rollout's own reads.
			live, _, err = r.live.Cached(ctx, o.GroupVersionKind(), o.GetNamespace(), o.GetName())
		} else {
			live, err = r.applier.Get(ctx, o)
		}
		if err == nil && live != nil {
			c.Desired, c.Updated, c.Ready = workloadCounts(live)
			if st, err := checker.Check(ctx, live); err == nil {
				c.RolledOver = st.Ready
			}
		} else if ctx.Err() != nil {
			return false
		}
		comps = append(comps, c)
	}
	changed := false
	s.update(func(in *v1alpha1.Installation) {
		if !equalComponents(in.Status.Components, comps) {
			in.Status.Components = comps
			changed = true
		}
	})
	return changed
}

func workloadCounts(live *unstructured.Unstructured) (desired, updated, ready int32) {
	get := func(path ...string) int32 {
		v, _, _ := unstructured.NestedInt64(live.Object, path...)
		return int32(v)
	}
	if live.GetKind() == "DaemonSet" {
		return get("status", "desiredNumberScheduled"), get("status", "updatedNumberScheduled"), get("status", "numberReady")
	}
	desired = 1
	if v, found, _ := unstructured.NestedInt64(live.Object, "spec", "replicas"); found {
		desired = int32(v)
	}
	return desired, get("status", "updatedReplicas"), get("status", "readyReplicas")
}

func equalComponents(a, b []v1alpha1.ComponentStatus) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// servedCheck says whether this run checks the certificates the
// installation's Services present: after every rollout, and on resyncs at
// most every Options.ServedCertificateCheck.
func (r *Reconciler) servedCheck(in *v1alpha1.Installation, changing bool) reconcile.ServedCheck {
	every := r.opts.ServedCertificateCheck
	if every == 0 {
		every = DefaultServedCertificateCheck
	}
	if every < 0 {
		return reconcile.ServedCheck{}
	}
	due := changing
	if last, ok := r.certChecked.Load(in.UID); !ok || time.Since(last.(time.Time)) >= every {
		due = true
	}
	return reconcile.ServedCheck{Enabled: due, Dial: r.opts.DialService}
}

// recordServedCertificates sets the CertificatesServed condition from a
// check (none when the product has no generated certificate) and reports
// a newly found mismatch as a Warning event.
func (r *Reconciler) recordServedCertificates(s *state, served []reconcile.ServedCertificate) {
	if len(served) == 0 {
		s.update(func(in *v1alpha1.Installation) { in.RemoveCondition(v1alpha1.ConditionCertificatesServed) })
		return
	}
	var matched, unreachable int
	var wrong []string
	for _, c := range served {
		switch c.State {
		case reconcile.ServedMatch:
			matched++
		case reconcile.ServedMismatch:
			wrong = append(wrong, c.String())
		default:
			unreachable++
		}
	}
	status, reason := metav1.ConditionTrue, v1alpha1.ReasonServedCertificatesMatch
	msg := fmt.Sprintf("%d Service ports present the generated certificates; %d could not be reached from the operator", matched, unreachable)
	switch {
	case len(wrong) > 0:
		status, reason = metav1.ConditionFalse, v1alpha1.ReasonServedCertificateMismatch
		msg = strings.Join(wrong, "; ")
	case matched == 0:
		status, reason = metav1.ConditionUnknown, v1alpha1.ReasonServedCertificatesUnreachable
		msg = fmt.Sprintf("none of the %d Service ports serving generated certificates could be reached from the operator", unreachable)
	}
	in := s.Installation
	if c := in.Condition(v1alpha1.ConditionCertificatesServed); status == metav1.ConditionFalse && (c == nil || c.Status != status || c.Message != msg) {
		r.event(in, corev1.EventTypeWarning, reason, "CheckCertificates", "%s", msg)
	}
	s.update(func(in *v1alpha1.Installation) {
		in.SetCondition(v1alpha1.ConditionCertificatesServed, status, reason, msg)
	})
}
