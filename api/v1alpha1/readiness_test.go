package v1alpha1_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/installstrategy/installstrategy/api/v1alpha1"
)

// kstatusOf is what kstatus (Flux, Helm 4, cli-utils) computes for the
// Installation.
func kstatusOf(t *testing.T, in *v1alpha1.Installation) *kstatus.Result {
	t.Helper()
	in = in.DeepCopy()
	in.APIVersion, in.Kind = v1alpha1.GroupVersion.String(), "Installation"
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(in)
	if err != nil {
		t.Fatal(err)
	}
	res, err := kstatus.Compute(&unstructured.Unstructured{Object: obj})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// deployed is an Installation of generation gen fully rolled over at
// v1.0.0, its status written for gen.
func deployed(gen int64) *v1alpha1.Installation {
	in := &v1alpha1.Installation{ObjectMeta: metav1.ObjectMeta{Name: "sample", Namespace: "ns", Generation: gen}}
	in.Status = v1alpha1.InstallationStatus{Phase: v1alpha1.PhaseDeployed, ObservedGeneration: gen,
		ObservedVersion: "v1.0.0", ObservedIdentifier: "a", TargetVersion: "v1.0.0", TargetIdentifier: "a",
		Components: []v1alpha1.ComponentStatus{{Kind: "Deployment", Name: "api", Desired: 2, Updated: 2, Ready: 2, RolledOver: true}}}
	in.SetCondition(v1alpha1.ConditionAvailable, metav1.ConditionTrue, v1alpha1.ReasonAllComponentsReady, "")
	in.SetCondition(v1alpha1.ConditionProgressing, metav1.ConditionFalse, v1alpha1.ReasonAllComponentsReady, "")
	in.SetCondition(v1alpha1.ConditionDegraded, metav1.ConditionFalse, v1alpha1.ReasonAllComponentsReady, "")
	return in
}

func TestSetStatusConditions(t *testing.T) {
	degraded := func(reason string) func(*v1alpha1.Installation) {
		return func(in *v1alpha1.Installation) {
			in.SetCondition(v1alpha1.ConditionDegraded, metav1.ConditionTrue, reason, "because "+reason)
		}
	}
	deleting := func(in *v1alpha1.Installation) {
		now := metav1.NewTime(time.Unix(1, 0))
		in.DeletionTimestamp = &now
		in.Status.Phase = v1alpha1.PhaseDeleting
	}
	for _, c := range []struct {
		name   string
		change func(*v1alpha1.Installation)
		// want is the True condition (none: "") and its reason.
		want, reason string
		kstatus      kstatus.Status
	}{
		{"rolled over", func(*v1alpha1.Installation) {}, "Ready", v1alpha1.ReasonAllComponentsReady, kstatus.CurrentStatus},
		{"first install", func(in *v1alpha1.Installation) {
			in.Status = v1alpha1.InstallationStatus{Phase: v1alpha1.PhaseDeploying, ObservedGeneration: in.Generation, TargetVersion: "v1.0.0", TargetIdentifier: "a"}
			in.SetCondition(v1alpha1.ConditionProgressing, metav1.ConditionTrue, v1alpha1.ReasonDeploymentInProgress, "deploying v1.0.0")
			in.SetCondition(v1alpha1.ConditionAvailable, metav1.ConditionFalse, v1alpha1.ReasonDeploymentInProgress, "deploying v1.0.0")
		}, "Reconciling", v1alpha1.ReasonDeploymentInProgress, kstatus.InProgressStatus},
		{"update to another target", func(in *v1alpha1.Installation) {
			in.Status.Phase, in.Status.TargetVersion, in.Status.TargetIdentifier = v1alpha1.PhaseDeploying, "v1.1.0", "b"
			in.SetCondition(v1alpha1.ConditionProgressing, metav1.ConditionTrue, v1alpha1.ReasonUpdateInProgress, "updating")
		}, "Reconciling", v1alpha1.ReasonUpdateInProgress, kstatus.InProgressStatus},
		{"target recorded, phase still Deployed", func(in *v1alpha1.Installation) {
			in.Status.TargetIdentifier = "b"
		}, "Reconciling", v1alpha1.ReasonReconciling, kstatus.InProgressStatus},
		{"Available observed for an older generation", func(in *v1alpha1.Installation) {
			in.Generation++
			in.Status.ObservedGeneration = in.Generation
		}, "Reconciling", v1alpha1.ReasonReconciling, kstatus.InProgressStatus},
		{"a component not rolled over", func(in *v1alpha1.Installation) {
			in.Status.Components[0].RolledOver, in.Status.Components[0].Ready = false, 1
		}, "Reconciling", v1alpha1.ReasonReconciling, kstatus.InProgressStatus},
		{"transient load failure", degraded(v1alpha1.ReasonStrategyLoadFailed), "Reconciling", v1alpha1.ReasonStrategyLoadFailed, kstatus.InProgressStatus},
		{"apply failure", degraded(v1alpha1.ReasonApplyFailed), "Reconciling", v1alpha1.ReasonApplyFailed, kstatus.InProgressStatus},
		{"untrusted strategy", degraded(v1alpha1.ReasonUntrustedStrategy), "Stalled", v1alpha1.ReasonUntrustedStrategy, kstatus.FailedStatus},
		{"invalid spec", degraded(v1alpha1.ReasonInvalidSpec), "Stalled", v1alpha1.ReasonInvalidSpec, kstatus.FailedStatus},
		{"refused CRD change", degraded(v1alpha1.ReasonCRDChangeRefused), "Stalled", v1alpha1.ReasonCRDChangeRefused, kstatus.FailedStatus},
		{"progress deadline exceeded while retried", func(in *v1alpha1.Installation) {
			in.Status.Phase = v1alpha1.PhaseDeploying
			in.SetCondition(v1alpha1.ConditionProgressing, metav1.ConditionTrue, v1alpha1.ReasonDeploymentInProgress, "")
			degraded(v1alpha1.ReasonDeploymentFailed)(in)
		}, "Stalled", v1alpha1.ReasonDeploymentFailed, kstatus.FailedStatus},
		{"a failure of the previous generation", func(in *v1alpha1.Installation) {
			in.Status.Phase = v1alpha1.PhaseFailed
			degraded(v1alpha1.ReasonDeploymentFailed)(in)
			in.Generation++
			in.Status.ObservedGeneration = in.Generation
			in.SetCondition(v1alpha1.ConditionProgressing, metav1.ConditionTrue, v1alpha1.ReasonDeploymentInProgress, "deploying")
		}, "Reconciling", v1alpha1.ReasonDeploymentInProgress, kstatus.InProgressStatus},
		{"phase Failed", func(in *v1alpha1.Installation) {
			in.Status.Phase = v1alpha1.PhaseFailed
			degraded(v1alpha1.ReasonCanaryFailed)(in)
		}, "Stalled", v1alpha1.ReasonCanaryFailed, kstatus.FailedStatus},
		{"another installation active", func(in *v1alpha1.Installation) {
			in.Status = v1alpha1.InstallationStatus{Phase: v1alpha1.PhaseDeleted, ObservedGeneration: in.Generation}
			degraded(v1alpha1.ReasonAnotherInstallationActive)(in)
		}, "Stalled", v1alpha1.ReasonAnotherInstallationActive, kstatus.FailedStatus},
		{"removing", deleting, "Reconciling", v1alpha1.ReasonDeletionInProgress, kstatus.TerminatingStatus},
		{"uninstall blocked", func(in *v1alpha1.Installation) {
			deleting(in)
			degraded(v1alpha1.ReasonUninstallBlocked)(in)
		}, "Stalled", v1alpha1.ReasonUninstallBlocked, kstatus.TerminatingStatus},
		{"removed", func(in *v1alpha1.Installation) {
			deleting(in)
			in.Status.Phase = v1alpha1.PhaseDeleted
		}, "", v1alpha1.ReasonDeleted, kstatus.TerminatingStatus},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := deployed(3)
			c.change(in)
			in.SetStatusConditions()
			var trues []string
			for _, typ := range []v1alpha1.ConditionType{v1alpha1.ConditionReady, v1alpha1.ConditionReconciling, v1alpha1.ConditionStalled} {
				cond := in.Condition(typ)
				if cond == nil {
					t.Fatalf("no %s condition", typ)
				}
				if cond.ObservedGeneration != in.Generation {
					t.Errorf("%s observedGeneration %d, want %d", typ, cond.ObservedGeneration, in.Generation)
				}
				if cond.Status == metav1.ConditionTrue {
					trues = append(trues, string(typ))
				}
			}
			if len(trues) > 1 || (c.want == "" && len(trues) != 0) || (c.want != "" && (len(trues) != 1 || trues[0] != c.want)) {
				t.Fatalf("True: %v, want %q", trues, c.want)
			}
			ready := in.Condition(v1alpha1.ConditionReady)
			if ready.Reason != c.reason {
				t.Errorf("Ready reason %s, want %s", ready.Reason, c.reason)
			}
			if c.want != "" {
				if got := in.Condition(v1alpha1.ConditionType(c.want)); got.Reason != c.reason || got.Message == "" {
					t.Errorf("%s = %s %q, want reason %s and a message", c.want, got.Reason, got.Message, c.reason)
				}
			}
			if res := kstatusOf(t, in); res.Status != c.kstatus {
				t.Errorf("kstatus %s (%s), want %s", res.Status, res.Message, c.kstatus)
			}
			// Deriving again changes nothing.
			if in.SetStatusConditions() {
				t.Error("a second SetStatusConditions changed the conditions")
			}
		})
	}
}

// Every reason StalledReasons lists is a distinct, known reason, so a
// typo there cannot silently turn a refusal into Reconciling.
func TestStalledReasonsAreDistinct(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range v1alpha1.StalledReasons {
		if r == "" || seen[r] {
			t.Errorf("StalledReasons has %q twice or empty", r)
		}
		seen[r] = true
	}
	for _, r := range []string{v1alpha1.ReasonStrategyLoadFailed, v1alpha1.ReasonApplyFailed, v1alpha1.ReasonDumpJobFailed, v1alpha1.ReasonDeploymentInProgress} {
		if v1alpha1.IsStalledReason(r) {
			t.Errorf("%s is retried, not Stalled", r)
		}
	}
}
