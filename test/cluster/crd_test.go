package cluster_test

import (
	"context"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/installstrategy/installstrategy/internal/testenv"
)

func TestCRDBecomesEstablishedAndServesCustomResources(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := testenv.New(t)
	ns := env.Namespace(ctx, t)

	// CRDs are cluster-scoped: a group named after the test namespace keeps
	// runs and tests apart.
	group := ns + ".test.installstrategy.io"
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"size": {Type: "integer", Minimum: ptr.To[float64](1)},
						}},
					},
				}},
			}},
		},
	}
	if err := env.Client.Create(ctx, crd); err != nil {
		t.Fatalf("create CRD: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := env.Client.Delete(ctx, crd); err != nil {
			t.Errorf("delete CRD: %v", err)
		}
	})
	env.WaitCRDEstablished(ctx, t, crd.Name)

	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}
	widget := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": group + "/v1",
		"kind":       "Widget",
		"metadata":   map[string]any{"name": "w1"},
		"spec":       map[string]any{"size": int64(3)},
	}}
	if _, err := env.Dynamic.Resource(gvr).Namespace(ns).Create(ctx, widget, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create custom resource: %v", err)
	}
	got, err := env.Dynamic.Resource(gvr).Namespace(ns).Get(ctx, "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get custom resource: %v", err)
	}
	if size, _, _ := unstructured.NestedInt64(got.Object, "spec", "size"); size != 3 {
		t.Fatalf("custom resource spec.size = %d, want 3", size)
	}

	// The schema is enforced: the API server, not a fake, validates.
	bad := widget.DeepCopy()
	bad.SetName("w2")
	_ = unstructured.SetNestedField(bad.Object, int64(0), "spec", "size")
	if _, err := env.Dynamic.Resource(gvr).Namespace(ns).Create(ctx, bad, metav1.CreateOptions{}); err == nil {
		t.Fatalf("custom resource with spec.size 0 was accepted, want a validation error")
	}
}
