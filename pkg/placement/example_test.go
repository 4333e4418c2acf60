package placement_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/generate"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/placement"
)

// Apply places a strategy's pods by role: the per-node handler DaemonSet on
// the workloads nodes, the rest on the infra nodes; every pod gets the pull
// secrets.
func ExampleApply() {
	s, err := generate.Sample(&identity.Config{Namespace: "sample-system", Registry: "registry.example/sample", Version: "v1.2.0"}, generate.Options{})
	if err != nil {
		panic(err)
	}
	err = placement.Apply(s, placement.Spec{
		Placement: &identity.Placement{
			Infra: &identity.NodePlacement{
				NodeSelector: map[string]string{"node-role.kubernetes.io/control-plane": ""},
				Tolerations:  []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			},
			Workloads: &identity.NodePlacement{NodeSelector: map[string]string{"example.com/virt": "true"}},
		},
		ImagePullSecrets: []string{"registry-credentials"},
	})
	if err != nil {
		panic(err)
	}
	for _, o := range s.Objects {
		sel, found, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "spec", "nodeSelector")
		if !found {
			continue
		}
		secrets, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "imagePullSecrets")
		fmt.Println(o.GetKind(), o.GetName(), sel, len(secrets))
	}
	// Output:
	// Deployment sample-api map[node-role.kubernetes.io/control-plane:] 1
	// Deployment sample-controller map[node-role.kubernetes.io/control-plane:] 1
	// DaemonSet sample-handler map[example.com/virt:true] 1
}
