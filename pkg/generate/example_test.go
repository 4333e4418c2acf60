package generate_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/installstrategy/installstrategy/pkg/generate"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// An operator author declares a small product for one configuration and
// gets its strategy, objects in serialisation order.
func ExampleBuilder() {
	cfg := &identity.Config{Namespace: "demo", Registry: "registry.example", Version: "v0.3.0"}
	b := generate.New(cfg, generate.Options{Product: "demo"})
	b.ServiceAccount("demo-api").
		ClusterRole("demo-api", rbacv1.PolicyRule{APIGroups: []string{"demo.example"}, Resources: []string{"things"}, Verbs: []string{"get", "list", "watch"}}).
		ClusterRoleBinding("demo-api", "demo-api", "demo-api").
		CRD(generate.CRD{Group: "demo.example", Kind: "Thing", Versions: []generate.CRDVersion{{Name: "v1"}}}).
		Service("demo-api", "demo-api", corev1.ServicePort{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443)}).
		TLSSecret("demo-api-certs").
		Deployment(generate.Workload{Name: "demo-api", Role: generate.RoleAPI, Replicas: 2})
	s, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, o := range s.Objects {
		fmt.Println(strategy.RefOf(o))
	}
	fmt.Println(strategy.Images(s.Objects[len(s.Objects)-1]))
	fmt.Println(s.Identity.Version, s.Identity.Registry, len(s.Identity.Identifier))
	// Output:
	// ServiceAccount/demo/demo-api
	// ClusterRole.rbac.authorization.k8s.io/demo-api
	// ClusterRoleBinding.rbac.authorization.k8s.io/demo-api
	// CustomResourceDefinition.apiextensions.k8s.io/things.demo.example
	// Service/demo/demo-api
	// Secret/demo/demo-api-certs
	// Deployment.apps/demo/demo-api
	// [registry.example/demo-api:v0.3.0]
	// v0.3.0 registry.example 64
}

// The sample product's strategy for one version.
func ExampleSample() {
	cfg := &identity.Config{Namespace: "sample-system", Registry: "registry.example/sample", Version: "v1.1.0"}
	s, err := generate.Sample(cfg, generate.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, kc := range s.CountByKind() {
		fmt.Println(kc.Kind, kc.Count)
	}
	// Output:
	// ServiceAccount 3
	// ClusterRole 3
	// ClusterRoleBinding 3
	// Role 1
	// RoleBinding 1
	// CustomResourceDefinition 2
	// Service 2
	// Secret 1
	// ValidatingWebhookConfiguration 1
	// Deployment 2
	// DaemonSet 1
	// ConfigMap 1
}
