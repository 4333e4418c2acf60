package health_test

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/installstrategy/installstrategy/pkg/health"
)

// A Deployment is rolled over when its controller has seen its latest
// generation, every replica is updated and available and its Available
// condition is True. The checker reads the object as the API server returns
// it (here written by hand, with no pods to list).
func ExampleChecker_Check() {
	deploy := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"namespace": "shop", "name": "web", "generation": int64(2)},
		"spec":     map[string]any{"replicas": int64(2)},
		"status": map[string]any{"observedGeneration": int64(2), "replicas": int64(2),
			"updatedReplicas": int64(1), "readyReplicas": int64(2), "availableReplicas": int64(2)},
	}}
	c := &health.Checker{Kube: fake.NewClientset(), PodsEvery: -1}
	st, err := c.Check(context.Background(), deploy)
	fmt.Println(st.Ready, st.Reason, err)

	_ = unstructured.SetNestedField(deploy.Object, int64(2), "status", "updatedReplicas")
	st, err = c.Check(context.Background(), deploy)
	fmt.Println(st.Ready, st.Reason, err)

	_ = unstructured.SetNestedSlice(deploy.Object, []any{map[string]any{"type": "Available", "status": "True"}}, "status", "conditions")
	st, err = c.Check(context.Background(), deploy)
	fmt.Println(st.Ready, *st.Replicas, err)
	// Output:
	// false Updated: 1/2 <nil>
	// false Deployment not Available <nil>
	// true {2 2 2} <nil>
}
