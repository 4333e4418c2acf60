package crdsafety_test

import (
	"fmt"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/crdsafety"
)

// widgets returns a CRD of one version whose spec has the given string
// properties, color an enum of colors.
func widgets(colors []string, props ...string) *apiextv1.CustomResourceDefinition {
	spec := apiextv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{}}
	for _, p := range props {
		spec.Properties[p] = apiextv1.JSONSchemaProps{Type: "string"}
	}
	var enum []apiextv1.JSON
	for _, c := range colors {
		enum = append(enum, apiextv1.JSON{Raw: []byte(`"` + c + `"`)})
	}
	spec.Properties["color"] = apiextv1.JSONSchemaProps{Type: "string", Enum: enum}
	return &apiextv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextv1.NamespaceScoped,
			Names: apiextv1.CustomResourceDefinitionNames{Plural: "widgets", Kind: "Widget"},
			Versions: []apiextv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextv1.CustomResourceValidation{OpenAPIV3Schema: &apiextv1.JSONSchemaProps{
					Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{"spec": spec}}},
			}},
		},
		Status: apiextv1.CustomResourceDefinitionStatus{StoredVersions: []string{"v1"}},
	}
}

// An upgrade drops a field and an enum value: Compare flags both, Judge
// keeps those a stored object is affected by (nobody uses the field, one
// widget is blue), and Refused leaves out what an override accepts.
func ExampleCompare() {
	live := widgets([]string{"red", "blue"}, "size", "owner")
	desired := widgets([]string{"red"}, "owner")
	findings := crdsafety.Compare(live, desired)
	for _, f := range findings {
		fmt.Println("flagged:", f.Rule, f.Path)
	}

	blue := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"namespace": "shop", "name": "sky"},
		"spec":     map[string]any{"color": "blue", "owner": "ann"},
	}}
	unsafe := crdsafety.Judge(findings, map[string][]*unstructured.Unstructured{"v1": {blue}}, nil)
	for _, f := range unsafe {
		fmt.Println("unsafe:", f.Rule, f.Path, f.Objects, f.Examples)
	}

	allow, _ := crdsafety.ParseAllow("widgets.example.com=" + string(unsafe[0].Rule))
	crdsafety.Permit(unsafe, []crdsafety.Allow{allow})
	fmt.Println("refused after the override:", len(crdsafety.Refused(unsafe)))
	// Output:
	// flagged: enumTightened .spec.color
	// flagged: fieldRemoved .spec.size
	// unsafe: enumTightened .spec.color 1 [shop/sky]
	// refused after the override: 0
}
