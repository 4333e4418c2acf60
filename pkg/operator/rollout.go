package operator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/crdsafety"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/health"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// reconcileOptions maps the spec onto the reconciler's options.
func (r *Reconciler) reconcileOptions(s *state, onEvent func(engine.Event)) engine.Options {
	in := s.Installation
	canary := in.Spec.CanaryOrDefault()
	caLife, serverLife := in.Spec.CertificateLifetimes()
	return engine.Options{
		Observed:       observedIdentity(in),
		Owner:          Owner(in),
		Roles:          kinds.KubeVirtRoles(),
		OwnerReference: &metav1.OwnerReference{APIVersion: r.res.GroupVersionKind().GroupVersion().String(), Kind: r.res.GroupVersionKind().Kind, Name: in.Name, UID: in.UID},
		Adopt:          adoptPolicy(in.Spec.Adopt),
		PruneCRDs:      in.Spec.PruneCRDs,
		StageDeadline:  r.opts.StageDeadline,
		Interval:       r.opts.Interval,
		Canary:         engine.CanaryOptions{Step: intstr.FromString(fmt.Sprintf("%d%%", canary.StepPercent))},
		Certificates: engine.CertOptions{
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

// stageApply rolls the strategy out with engine.Run, keeping
// status.components fresh from the run's events, and records the outcome.
func (r *Reconciler) stageApply(ctx context.Context, s *state) (bool, error) {
	ro := newRollout(s.Installation, s.Target)
	if ro.changing && !ro.retryFailed {
		if err := r.startRollout(ctx, s, ro); err != nil {
			return false, err
		}
	}
	res, drifts, runErr := r.runRollout(ctx, s, ro)
	switch {
	case errors.Is(runErr, errDeletedMidRollout) && ctx.Err() == nil:
		// Reconcile again at once (the deletion's event does too): the
		// delete stages run.
		s.log.Info("rollout stopped: the installation is being deleted", "version", s.Target.Version)
		s.Outcome = "deleted"
		s.Result.RequeueAfter = 10 * time.Millisecond
		return true, nil
	case runErr != nil && ctx.Err() != nil:
		// Stopped (the operator shuts down): not a failure of the product.
		s.Outcome = "error"
		return false, runErr
	case runErr != nil:
		return r.failedRollout(ctx, s, ro, runErr)
	}
	return false, r.finishRollout(ctx, s, ro, res, drifts)
}

// rollout is what one apply stage knows before it runs.
type rollout struct {
	// observed is the identity the status says is deployed.
	observed strategy.Identity
	// fresh: nothing observed yet, the first rollout. (Not "no
	// identifier observed": a strategy ConfigMap may record none, and
	// then every resync was a fresh rollout, with two status writes and
	// two events.)
	fresh bool
	// updating: another identity than the observed one is the target.
	updating bool
	// changing: the run deploys something the status does not say is
	// deployed (or a spec it has not observed).
	changing bool
	// retryFailed: a failed rollout of the same spec is retried (the
	// cluster may have been repaired) but stays Failed until it succeeds.
	retryFailed bool
	// rollback: updating to a strategy rolled out before
	// (rolledOutBefore); its Helm hooks run as helm rollback's.
	rollback bool
	// start is when the stage began.
	start time.Time
}

func newRollout(in *v1alpha1.Installation, target strategy.Identity) rollout {
	ro := rollout{observed: observedIdentity(in), start: time.Now()}
	ro.fresh = ro.observed == (strategy.Identity{})
	ro.updating = !ro.fresh && ro.observed != target
	ro.changing = ro.updating || ro.fresh || in.Status.Phase != v1alpha1.PhaseDeployed || in.Status.ObservedGeneration != in.Generation
	ro.retryFailed = in.Status.Phase == v1alpha1.PhaseFailed && in.Status.ObservedGeneration == in.Generation && targetIdentity(in) == target
	ro.rollback = ro.updating && rolledOutBefore(in, target)
	return ro
}

// markDeploying sets the status of a rollout that starts: phase
// Deploying, the target, Progressing (and, on the first rollout,
// Available and Created false).
func markDeploying(in *v1alpha1.Installation, ro rollout, target strategy.Identity) {
	in.Status.Phase = v1alpha1.PhaseDeploying
	in.Status.TargetVersion, in.Status.TargetRegistry, in.Status.TargetIdentifier = target.Version, target.Registry, target.Identifier
	switch {
	case ro.fresh:
		msg := "deploying " + target.Version
		in.SetCondition(v1alpha1.ConditionProgressing, metav1.ConditionTrue, v1alpha1.ReasonDeploymentInProgress, msg)
		in.SetCondition(v1alpha1.ConditionAvailable, metav1.ConditionFalse, v1alpha1.ReasonDeploymentInProgress, msg)
		in.SetCondition(v1alpha1.ConditionCreated, metav1.ConditionFalse, v1alpha1.ReasonDeploymentInProgress, msg)
	case ro.updating:
		msg := fmt.Sprintf("updating from %s to %s", ro.observed.Version, target.Version)
		in.SetCondition(v1alpha1.ConditionProgressing, metav1.ConditionTrue, v1alpha1.ReasonUpdateInProgress, msg)
	default:
		in.SetCondition(v1alpha1.ConditionProgressing, metav1.ConditionTrue, v1alpha1.ReasonDeploymentInProgress, "deploying "+target.Version)
	}
	if c := in.Condition(v1alpha1.ConditionDegraded); c == nil {
		in.SetCondition(v1alpha1.ConditionDegraded, metav1.ConditionFalse, v1alpha1.ReasonDeploymentInProgress, "")
	}
}

// startRollout writes the status of a rollout that starts and reports it.
func (r *Reconciler) startRollout(ctx context.Context, s *state, ro rollout) error {
	s.update(func(in *v1alpha1.Installation) { markDeploying(in, ro, s.Target) })
	if err := r.writeStatus(ctx, s); err != nil {
		return err
	}
	action, reason, note := "Deploy", v1alpha1.ReasonDeploymentInProgress, "deploying"
	switch {
	case ro.rollback:
		action, reason, note = "Rollback", v1alpha1.ReasonUpdateInProgress, "rolling back from "+ro.observed.Version+" to"
	case ro.updating:
		action, reason, note = "Update", v1alpha1.ReasonUpdateInProgress, "updating from "+ro.observed.Version+" to"
	}
	r.event(s.Installation, corev1.EventTypeNormal, reason, action, "%s %s (identifier %s)", note, s.Target.Version, short(s.Target.Identifier))
	s.log.Info("rollout started", "version", s.Target.Version, "identifier", s.Target.Identifier, "update", ro.updating, "rollback", ro.rollback)
	return nil
}

// runRollout runs engine.Run, its events kept in the status
// (runEvents), the workload changes of the namespace recorded meanwhile
// (watchDrift). It returns errDeletedMidRollout when the Installation's
// deletion stopped it.
func (r *Reconciler) runRollout(ctx context.Context, s *state, ro rollout) (*engine.Result, *driftLog, error) {
	in := s.Installation
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
	// The components a run of the deployed target does not reach (it
	// stops before their step) stay rolled over; another target's are
	// not until the run finds them so.
	events := r.newRunEvents(runCtx, s, !ro.fresh && !ro.updating)
	runOpts := r.reconcileOptions(s, events.observe)
	runOpts.ServedCertificates = r.servedCheck(in, ro.changing)
	runOpts.Rollback = ro.rollback
	stopDrift := r.watchDrift(in.Namespace)
	res, runErr := r.rc.Run(runCtx, s.Strategy, runOpts)
	drifts := stopDrift()
	if errors.Is(context.Cause(runCtx), errDeletedMidRollout) && ctx.Err() == nil {
		return res, drifts, errDeletedMidRollout
	}
	return res, drifts, runErr
}

// failureReason is the reason a failed run's conditions give.
func failureReason(runErr error, in *v1alpha1.Installation) string {
	var degraded *health.DegradedError
	var conflict *apply.ConflictError
	switch {
	case failedCanary(runErr, in):
		return v1alpha1.ReasonCanaryFailed
	case errors.As(runErr, &conflict):
		return v1alpha1.ReasonApplyFailed
	case errors.As(runErr, &degraded):
		return v1alpha1.ReasonDeploymentFailed
	}
	return v1alpha1.ReasonApplyFailed
}

// markFailed sets the status of a failed run: Degraded with reason (and
// Synchronized false when an object was not applied; phase Failed when
// a canary failed).
func markFailed(in *v1alpha1.Installation, reason string, runErr error) {
	if reason == v1alpha1.ReasonCanaryFailed {
		in.Status.Phase = v1alpha1.PhaseFailed
	}
	in.SetCondition(v1alpha1.ConditionDegraded, metav1.ConditionTrue, reason, runErr.Error())
	if reason == v1alpha1.ReasonApplyFailed {
		in.SetCondition(v1alpha1.ConditionSynchronized, metav1.ConditionFalse, reason, runErr.Error())
	}
}

// failedRollout records a run that failed: claimed meanwhile (waits for
// the claim), refused before a write (Stalled until something changes),
// or failed (Degraded, retried).
func (r *Reconciler) failedRollout(ctx context.Context, s *state, ro rollout, runErr error) (bool, error) {
	in := s.Installation
	var claimed *engine.ClaimedError
	if errors.As(runErr, &claimed) {
		// Claimed since the claim stage looked: nothing was written.
		return true, r.waitForClaim(ctx, s, claimed)
	}
	reason := failureReason(runErr, in)
	refusal, refused := asRefusal(runErr)
	if refused {
		// Refused before the write it guards (a CRD change the preflight
		// refuses): what runs stays as it is, Stalled until the
		// Installation or the cluster changes; looked at again at the
		// next resync, not retried at once.
		reason = refusal.RefusalReason()
		s.update(func(in *v1alpha1.Installation) {
			in.SetCondition(v1alpha1.ConditionDegraded, metav1.ConditionTrue, reason, runErr.Error())
		})
	} else {
		if ro.changing {
			r.metrics.RolloutSeconds.WithLabelValues("failed").Observe(time.Since(ro.start).Seconds())
		}
		s.update(func(in *v1alpha1.Installation) { markFailed(in, reason, runErr) })
	}
	if err := r.writeStatus(ctx, s); err != nil {
		return false, errors.Join(runErr, err)
	}
	r.event(in, corev1.EventTypeWarning, reason, "Rollout", "%s", runErr.Error())
	s.Outcome = "degraded"
	if refused {
		s.log.Info("rollout refused", "reason", reason, "error", runErr.Error())
		s.Result.RequeueAfter = r.resync()
		return true, nil
	}
	return false, runErr
}

// markDeployed sets the status of a run that rolled target out: phase
// Deployed, target observed, every condition saying so.
func markDeployed(in *v1alpha1.Installation, target strategy.Identity) {
	in.Status.Phase = v1alpha1.PhaseDeployed
	in.Status.ObservedVersion, in.Status.ObservedRegistry, in.Status.ObservedIdentifier = target.Version, target.Registry, target.Identifier
	in.Status.TargetVersion, in.Status.TargetRegistry, in.Status.TargetIdentifier = target.Version, target.Registry, target.Identifier
	in.SetCondition(v1alpha1.ConditionAvailable, metav1.ConditionTrue, v1alpha1.ReasonAllComponentsReady, "all components are ready")
	in.SetCondition(v1alpha1.ConditionProgressing, metav1.ConditionFalse, v1alpha1.ReasonAllComponentsReady, "")
	in.SetCondition(v1alpha1.ConditionDegraded, metav1.ConditionFalse, v1alpha1.ReasonAllComponentsReady, "")
	in.SetCondition(v1alpha1.ConditionCreated, metav1.ConditionTrue, v1alpha1.ReasonAllResourcesCreated, "all resources were created")
	in.SetCondition(v1alpha1.ConditionSynchronized, metav1.ConditionTrue, v1alpha1.ReasonAllResourcesSynchronized, "all resources were applied")
}

// finishRollout records a run that rolled the target out, and says when
// to come back (at once when someone changed a workload meanwhile).
func (r *Reconciler) finishRollout(ctx context.Context, s *state, ro rollout, res *engine.Result, drifts *driftLog) error {
	in := s.Installation
	s.update(func(in *v1alpha1.Installation) { markDeployed(in, s.Target) })
	if res.ServedCertificates != nil {
		r.certChecked.Store(in.UID, time.Now())
		r.recordServedCertificates(s, res.ServedCertificates)
	}
	if err := r.writeStatus(ctx, s); err != nil {
		return err
	}
	if ro.changing {
		r.metrics.RolloutSeconds.WithLabelValues("deployed").Observe(time.Since(ro.start).Seconds())
		r.event(in, corev1.EventTypeNormal, v1alpha1.ReasonAllComponentsReady, "Deploy",
			"deployed %s: %d created, %d updated, %d recreated, %d unchanged, %d pruned",
			s.Target.Version, res.Count(apply.ActionCreate), res.Count(apply.ActionUpdate), res.Count(apply.ActionRecreate),
			res.Count(apply.ActionUnchanged), len(res.Pruned))
		s.log.Info("rollout finished", "version", s.Target.Version, "identifier", s.Target.Identifier,
			"created", res.Count(apply.ActionCreate), "updated", res.Count(apply.ActionUpdate), "pruned", len(res.Pruned))
	}
	if ro.fresh || ro.updating {
		// A strategy rolled out that the status did not say was deployed
		// (not a resync, nor a retry of the spec it deployed): its notes
		// once, as helm install and helm upgrade print them.
		r.showNotes(ctx, s)
	}
	s.Result.RequeueAfter = r.pollInterval(in)
	if ref, ok := drifts.foreign(res); ok {
		// Someone changed a workload while the rollout ran (its own
		// writes queue nothing; see workloadDrift): repair it now.
		s.log.V(1).Info("a workload changed during the rollout; reconciling again", "object", ref.String())
		s.Result.RequeueAfter = 10 * time.Millisecond
	}
	return nil
}

// failedCanary reports whether a rollout failed at a DaemonSet canary: the
// reconciler says so (a *engine.CanaryError), or, on a retry of the same
// target, the status already says CanaryFailed and a DaemonSet failed (the
// retry finds the DaemonSet applied and starts no canary).
func failedCanary(runErr error, in *v1alpha1.Installation) bool {
	var canaryErr *engine.CanaryError
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

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// servedCheck says whether this run checks the certificates the
// installation's Services present: after every rollout, and on resyncs at
// most every Options.ServedCertificateCheck.
func (r *Reconciler) servedCheck(in *v1alpha1.Installation, changing bool) engine.ServedCheck {
	every := r.opts.ServedCertificateCheck
	if every == 0 {
		every = DefaultServedCertificateCheck
	}
	if every < 0 {
		return engine.ServedCheck{}
	}
	due := changing
	if last, ok := r.certChecked.Load(in.UID); !ok || time.Since(last.(time.Time)) >= every {
		due = true
	}
	return engine.ServedCheck{Enabled: due, Dial: r.opts.DialService}
}

// recordServedCertificates sets the CertificatesServed condition from a
// check (none when the product has no generated certificate) and reports
// a newly found mismatch as a Warning event.
func (r *Reconciler) recordServedCertificates(s *state, served []engine.ServedCertificate) {
	if len(served) == 0 {
		s.update(func(in *v1alpha1.Installation) { in.RemoveCondition(v1alpha1.ConditionCertificatesServed) })
		return
	}
	var matched, unreachable int
	var wrong []string
	for _, c := range served {
		switch c.State {
		case engine.ServedMatch:
			matched++
		case engine.ServedMismatch:
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

// showNotes records the notes of the strategy just rolled out (a chart's
// rendered NOTES.txt, strategy.Notes) as a Normal Event of reason Notes on
// the Installation, cut to the API server's 1 KiB limit on an Event's
// note (the cut says where the whole text is), and writes the whole text
// to the operator's log. The Event is created directly, not through the
// recorder: the recorder folds Events of one reason and action within
// minutes into a series that keeps the first note, so the notes of an
// upgrade soon after an install would show the install's.
func (r *Reconciler) showNotes(ctx context.Context, s *state) {
	text := strings.TrimSpace(s.Strategy.Notes())
	if text == "" {
		return
	}
	in := s.Installation
	s.log.Info("chart notes", "version", s.Target.Version, "identifier", s.Target.Identifier, "notes", text)
	gvk := r.res.GroupVersionKind()
	now := time.Now()
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{GenerateName: in.Name + "-notes-", Namespace: in.Namespace},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: Name,
		ReportingInstance:   Name + "-" + reportingHost(),
		Action:              "Deploy",
		Reason:              v1alpha1.ReasonNotes,
		Type:                corev1.EventTypeNormal,
		Regarding: corev1.ObjectReference{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Namespace: in.Namespace,
			Name: in.Name, UID: in.UID, ResourceVersion: in.ResourceVersion},
		Note: notesNote(s.Target.Version, text, notesWhere(in)),
	}
	if _, err := r.kube.EventsV1().Events(in.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		s.log.Error(err, "could not record the chart's notes as an event")
	}
}

// reportingHost is the host name the Events' reporting instance names, as
// the recorder's.
func reportingHost() string {
	h, _ := os.Hostname()
	return h
}

// notesNote is the note of a Notes Event: "NOTES of VERSION:" and the
// text, cut at a rune boundary to maxEventNote bytes with where the
// whole text is.
func notesNote(version, text, where string) string {
	note := "NOTES of " + version + ":\n" + text
	if len(note) <= maxEventNote {
		return note
	}
	more := fmt.Sprintf("\n…(cut at %d bytes; the whole text: %s)", maxEventNote, where)
	cut := maxEventNote - len(more)
	for cut > 0 && !utf8.RuneStart(note[cut]) {
		cut--
	}
	return note[:cut] + more
}

// notesWhere says where the whole notes of in's strategy are: its Notes
// document for a strategy ConfigMap or artifact (which decode prints),
// and always the operator's log.
func notesWhere(in *v1alpha1.Installation) string {
	log := `the operator's log, message "chart notes"`
	st := in.Status.Strategy
	switch {
	case st == nil:
		return log
	case st.Source == v1alpha1.StrategySourceOCI && st.OCI != "":
		return fmt.Sprintf("kubectl installstrategy decode %s%s -o yaml (kind Notes), or %s", oci.Scheme, st.OCI, log)
	case st.Source == v1alpha1.StrategySourceConfigMap && in.Spec.Strategy != nil && in.Spec.Strategy.ConfigMap != nil:
		return fmt.Sprintf("kubectl installstrategy decode cm/%s -n %s -o yaml (kind Notes), or %s", in.Spec.Strategy.ConfigMap.Name, in.Namespace, log)
	}
	return log
}
