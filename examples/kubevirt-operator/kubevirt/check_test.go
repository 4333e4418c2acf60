package kubevirt

import (
	"os"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/installstrategy/installstrategy/internal/testenv"
)

// operatorDeployment is the example's Deployment in config/operator.yaml.
func operatorDeployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	b, err := os.ReadFile("../config/operator.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var d appsv1.Deployment
		if err := yaml.UnmarshalStrict([]byte(doc), &d); err == nil && d.Kind == "Deployment" {
			return &d
		}
	}
	t.Fatal("config/operator.yaml has no Deployment")
	return nil
}

// TestConfigDeploymentServesVirtOperatorValidator: in KubeVirt's real
// strategies as shipped, virt-operator-validator's webhooks reach the
// example's pods (config/operator.yaml) at the port the example listens on,
// every path has its handler, and the pods mount the Secret whose
// certificate the engine issues for the Service.
func TestConfigDeploymentServesVirtOperatorValidator(t *testing.T) {
	d := operatorDeployment(t)
	w := Webhooks(nil, nil, "kubevirt")
	for _, version := range []string{"v1.8.4", "v1.9.0"} {
		if err := w.Check(testenv.KubeVirtStrategyAsShipped(t, version), &d.Spec.Template); err != nil {
			t.Errorf("%s: %v", version, err)
		}
	}
	// The check fails when the Deployment would not be reached.
	moved := d.Spec.Template.DeepCopy()
	moved.Labels = map[string]string{"app": "elsewhere"}
	moved.Spec.Containers[0].Ports[0].ContainerPort = 9443
	moved.Spec.Volumes = nil
	err := w.Check(testenv.KubeVirtStrategyAsShipped(t, "v1.9.0"), moved)
	for _, want := range []string{"selects map[kubevirt.io:virt-operator], not the operator's pod", "mounts no volume of secret kubevirt-operator-certs"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("check of a pod the Service does not select: %v, want %q", err, want)
		}
	}
}
