package e2e

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
)

// TestAdoptVirtOperatorKubeVirt is issue #27 through the operator: an
// Installation with spec.adopt takes over a KubeVirt v1.9.0 written as
// virt-operator writes it (testenv.CreateAsVirtOperator) and reaches
// Deployed without replacing a pod of any Deployment (virt-handler's are:
// virt-operator removed a volume of the strategy's template), with the
// Deployments' pod templates kept and their certificates still
// virt-operator's.
func TestAdoptVirtOperatorKubeVirt(t *testing.T) {
	testenv.Lock(t, testenv.KubeVirtLock)
	e := setup(t)
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	// KubeVirt as shipped: a stand-in serves virt-api's webhooks
	// (failurePolicy Fail) with the certificate in its Secret.
	s := testenv.KubeVirtStrategyAsShipped(t, "v1.9.0")
	e.env.ServeWebhookStandIn(ctx, t, "kubevirt", "virt-api", "kubevirt-virt-api-certs")
	e.env.CreateAsVirtOperator(ctx, t, s)
	before := e.env.PodUIDs(ctx, t, "kubevirt")
	entry := e.publish(ctx, t, s)
	spec := v1alpha1.InstallationSpec{Version: s.Identity.Version, Registry: s.Identity.Registry,
		Strategy: &v1alpha1.StrategySource{ConfigMap: configMapSource(entry)}, Adopt: true, PruneCRDs: true}
	e.create(ctx, t, "kubevirt", spec)
	e.waitDeployed(ctx, t, "kubevirt", s.Identity.Version)

	e.env.ExpectPodsKept(ctx, t, "kubevirt", before, "DaemonSet/virt-handler")
	ds, err := e.env.Kube.AppsV1().Deployments("kubevirt").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds.Items {
		if d.Annotations[metakeys.KeptTemplateAnnotation] == "" || d.Labels[metakeys.ManagedByLabel] != "installstrategy" {
			t.Errorf("Deployment %s: not taken over with its pod template kept: labels %v, annotations %v", d.Name, d.Labels, d.Annotations)
		}
	}
}
