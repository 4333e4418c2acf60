package v1alpha1

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// IsStalledReason reports whether a Degraded condition with this reason
// makes the Installation Stalled (see StalledReasons).
func IsStalledReason(reason string) bool { return slices.Contains(StalledReasons, reason) }

// verdict is one of kstatus's three conditions as SetStatusConditions
// derives it.
type verdict struct {
	status          metav1.ConditionStatus
	reason, message string
}

// SetStatusConditions sets Ready, Reconciling and Stalled (kstatus's
// conditions) from the rest of the status, for the Installation's
// metadata.generation, and reports whether any of them changed. At most
// one of them is True:
//
//   - Stalled: Degraded True for this generation, with a reason of
//     StalledReasons (a refusal, a failed rollout, an exceeded progress
//     deadline, a blocked uninstall) or in phase Failed. Its reason and
//     message are Degraded's. (A failure of an older generation is not:
//     the operator is working on the new one.)
//   - Ready: phase Deployed, the observed strategy is the target one,
//     Available True as observed for this generation, Progressing and
//     Degraded not True, and every component rolled over.
//   - Reconciling: anything else while the Installation exists and is
//     not removed (loading, applying, rolling out, retrying a transient
//     failure, removing the product), with Progressing's reason, else
//     Degraded's, else Reconciling.
//
// Ready mirrors Reconciling's reason (or Stalled's) while False. The
// operator calls it before every status write, where it also sets
// status.observedGeneration: both then say which generation the status
// describes.
func (in *Installation) SetStatusConditions() bool {
	ready, reconciling, stalled := in.statusVerdicts()
	changed := false
	for _, c := range []struct {
		t ConditionType
		v verdict
	}{{ConditionReady, ready}, {ConditionReconciling, reconciling}, {ConditionStalled, stalled}} {
		changed = in.SetCondition(c.t, c.v.status, c.v.reason, c.v.message) || changed
	}
	return changed
}

func (in *Installation) statusVerdicts() (ready, reconciling, stalled verdict) {
	no := func(v verdict) verdict { v.status = metav1.ConditionFalse; return v }
	yes := func(reason, message string) verdict { return verdict{metav1.ConditionTrue, reason, message} }
	deg := in.Condition(ConditionDegraded)
	degraded := deg != nil && deg.Status == metav1.ConditionTrue
	// A failure recorded for an older generation says nothing of this
	// one, which the operator is working on: Reconciling, not Stalled.
	failed := degraded && deg.ObservedGeneration == in.Generation && (IsStalledReason(deg.Reason) || in.Status.Phase == PhaseFailed)
	phase := in.Status.Phase

	var v verdict
	switch {
	case (in.IsDeleting() || phase == PhaseDeleting) && failed:
		v = yes(deg.Reason, deg.Message)
		return no(v), no(v), v
	case phase == PhaseDeleted && (in.IsDeleting() || !degraded):
		// The product was removed: nothing is in progress, nothing failed.
		v = verdict{metav1.ConditionFalse, ReasonDeleted, "the product was removed"}
		return v, v, v
	case in.IsDeleting() || phase == PhaseDeleting:
		v = yes(ReasonDeletionInProgress, "removing the product")
		return no(v), v, no(v)
	case failed:
		v = yes(deg.Reason, deg.Message)
		return no(v), no(v), v
	case phase == PhaseDeleted:
		// Set aside (another installation is active) without a reason
		// for this generation yet.
		v = yes(ReasonAnotherInstallationActive, "phase Deleted")
		if degraded {
			v = yes(deg.Reason, deg.Message)
		}
		return no(v), no(v), v
	}
	if msg, ok := in.rolledOver(); ok {
		v = yes(ReasonAllComponentsReady, msg)
		return v, no(v), no(v)
	}
	v = yes(ReasonReconciling, fmt.Sprintf("generation %d is being reconciled", in.Generation))
	if p := in.Condition(ConditionProgressing); p != nil && p.Status == metav1.ConditionTrue {
		v = yes(p.Reason, p.Message)
	} else if degraded {
		v = yes(deg.Reason, deg.Message)
	} else if msg := in.notRolledOver(); msg != "" {
		v.message = msg
	}
	return no(v), v, no(v)
}

// rolledOver reports whether the target strategy is fully rolled over for
// the current generation, with a message saying what is deployed.
func (in *Installation) rolledOver() (string, bool) {
	if in.Status.Phase != PhaseDeployed || in.IsUpdating() || in.Status.ObservedIdentifier != in.Status.TargetIdentifier {
		return "", false
	}
	avail := in.Condition(ConditionAvailable)
	if avail == nil || avail.Status != metav1.ConditionTrue || avail.ObservedGeneration != in.Generation {
		return "", false
	}
	for _, t := range []ConditionType{ConditionProgressing, ConditionDegraded} {
		if in.IsConditionTrue(t) {
			return "", false
		}
	}
	if in.notRolledOver() != "" {
		return "", false
	}
	return fmt.Sprintf("%s is rolled over: all %d components are available", in.Status.ObservedVersion, len(in.Status.Components)), true
}

// notRolledOver names the first component not rolled over, "" when all
// are.
func (in *Installation) notRolledOver() string {
	for _, c := range in.Status.Components {
		if !c.RolledOver {
			return fmt.Sprintf("%s %s is not rolled over: %d of %d pods updated, %d ready", c.Kind, c.Name, c.Updated, c.Desired, c.Ready)
		}
	}
	return ""
}
