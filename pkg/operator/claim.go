package operator

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/engine"
)

// stageClaim stops, before any write, an Installation whose strategy's
// cluster-scoped objects another installation holds that still exists (see
// engine.ClaimedError): ClaimedByOther naming it, nothing applied, and a
// look again after ClaimRequeue. Once the holder is gone, the rollout runs
// and takes over what it left (the CRDs it kept).
func (r *Reconciler) stageClaim(ctx context.Context, s *state) (bool, error) {
	claims, err := r.rc.CheckClaims(ctx, s.Strategy, engine.Options{Owner: Owner(s.Installation)})
	// The rollout that follows takes this answer instead of looking again.
	s.claims = claims
	var claimed *engine.ClaimedError
	if !errors.As(err, &claimed) {
		return false, err
	}
	return true, r.waitForClaim(ctx, s, claimed)
}

// waitForClaim records that another installation holds the strategy's
// cluster-scoped objects and requeues.
func (r *Reconciler) waitForClaim(ctx context.Context, s *state, claimed *engine.ClaimedError) error {
	in := s.Installation
	msg := claimed.Error()
	changed := false
	s.update(func(in *v1alpha1.Installation) {
		if in.Status.Phase == "" {
			in.Status.Phase = v1alpha1.PhaseDeploying
		}
		changed = in.SetCondition(v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonClaimedByOther, msg) || changed
		changed = in.SetCondition(v1alpha1.ConditionProgressing, metav1.ConditionFalse, v1alpha1.ReasonClaimedByOther, msg) || changed
		changed = in.SetCondition(v1alpha1.ConditionSynchronized, metav1.ConditionFalse, v1alpha1.ReasonClaimedByOther, msg) || changed
		if in.Status.Phase != v1alpha1.PhaseDeployed {
			changed = in.SetCondition(v1alpha1.ConditionAvailable, metav1.ConditionFalse, v1alpha1.ReasonClaimedByOther, msg) || changed
		}
	})
	if err := r.writeStatus(ctx, s); err != nil {
		return err
	}
	if changed {
		r.event(in, corev1.EventTypeWarning, v1alpha1.ReasonClaimedByOther, "Check", "%s", msg)
		s.log.Info("cluster-scoped objects claimed by another installation", "holder", claimed.Holder.String())
	}
	s.Outcome = "claimed"
	s.Result.RequeueAfter = ClaimRequeue
	return nil
}
