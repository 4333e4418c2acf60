package v1alpha1_test

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/api/v1alpha1"
)

// A controller reports progress with SetCondition and the phase, and reads
// the effective settings through the spec's helpers.
func ExampleInstallation_SetCondition() {
	in := &v1alpha1.Installation{
		ObjectMeta: metav1.ObjectMeta{Name: "sample", Namespace: "sample-system", Generation: 1},
		Spec:       v1alpha1.InstallationSpec{Version: "v1.2.0"},
	}
	in.Status.Phase = v1alpha1.PhaseDeploying
	in.Status.TargetVersion = in.Spec.Version
	in.SetCondition(v1alpha1.ConditionProgressing, metav1.ConditionTrue, v1alpha1.ReasonDeploymentInProgress, "applying stage crds")
	in.SetCondition(v1alpha1.ConditionAvailable, metav1.ConditionFalse, v1alpha1.ReasonDeploymentInProgress, "")

	fmt.Println(in.Status.Phase, in.IsConditionTrue(v1alpha1.ConditionProgressing), in.IsDeployed())
	fmt.Println(in.Spec.StrategySourceType(), in.Spec.CanaryOrDefault().StepPercent, in.Spec.UninstallStrategyOrDefault())

	in.Status.Phase = v1alpha1.PhaseDeployed
	in.Status.ObservedGeneration = in.Generation
	in.Status.ObservedVersion = in.Status.TargetVersion
	changed := in.SetCondition(v1alpha1.ConditionProgressing, metav1.ConditionFalse, v1alpha1.ReasonAllComponentsReady, "")
	fmt.Println(changed, in.IsDeployed())
	// Output:
	// Deploying true false
	// Product 10 BlockUninstallIfWorkloadsExist
	// true true
}
