package apply

import (
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/strategy"
)

const gadgetCRD = `{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
 "metadata": {"name": "gadgets.example.com", "labels": {"app.kubernetes.io/managed-by": "installstrategy"}},
 "spec": {"group": "example.com", "scope": "Namespaced",
  "names": {"kind": "Gadget", "plural": "gadgets", "listKind": "GadgetList", "singular": "gadget"},
  "versions": [
   {"name": "v1alpha1", "served": true, "storage": false, "schema": SCHEMA},
   {"name": "v1beta1", "served": true, "storage": false, "schema": SCHEMA},
   {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "description": "A gadget.",
     "properties": {"spec": {"type": "object", "description": "The gadget's wishes.", "properties": {"size": {"type": "integer", "minimum": 1}}}}}}}]}}`

const gadgetSchema = `{"openAPIV3Schema": {"type": "object", "description": "A gadget.",
 "properties": {"spec": {"type": "object", "description": "The gadget's wishes.", "properties": {"size": {"type": "integer"}}}}}}`

// decodedGadget is the CRD as the informers decode it: a copy of its own.
func decodedGadget(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(strings.ReplaceAll(gadgetCRD, "SCHEMA", gadgetSchema))); err != nil {
		t.Fatal(err)
	}
	return u
}

func schemasOf(t *testing.T, u *unstructured.Unstructured) []map[string]any {
	t.Helper()
	versions, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "versions")
	var out []map[string]any
	for _, v := range versions.([]any) {
		out = append(out, v.(map[string]any)["schema"].(map[string]any))
	}
	return out
}

func same(a, b map[string]any) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// The informers hold the schemas of a CRD no strategy has shared yet (the
// CRDs an upgrade starts from, listed before its strategy is loaded) with
// one copy of what repeats: equal versions' schemas are one map, and the
// keys and subschemas repeated across versions one copy; a schema equal
// to the one the strategy shares is the strategy's own, as before.
func TestTransformSharesWhatRepeatsInCachedSchemas(t *testing.T) {
	c := &InformerCache{}
	transform := c.transform(func(in any) (any, error) { return in, nil })
	want := decodedGadget(t)
	out, err := transform(decodedGadget(t))
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*unstructured.Unstructured)
	if !reflect.DeepEqual(got.Object, want.Object) {
		t.Fatal("the transform changed the object's content")
	}
	s := schemasOf(t, got)
	if !same(s[0], s[1]) {
		t.Error("equal versions' schemas are held twice")
	}
	if same(s[0], s[2]) {
		t.Error("different versions' schemas are held as one")
	}
	specOf := func(m map[string]any) map[string]any {
		return m["openAPIV3Schema"].(map[string]any)["properties"].(map[string]any)["spec"].(map[string]any)
	}
	keys := map[string]*byte{}
	for k := range specOf(s[0]) {
		keys[k] = unsafe.StringData(k)
	}
	for k := range specOf(s[2]) {
		if p, ok := keys[k]; ok && p != unsafe.StringData(k) {
			t.Errorf("key %q is held twice", k)
		}
	}
	if d0, d2 := specOf(s[0])["description"].(string), specOf(s[2])["description"].(string); unsafe.StringData(d0) != unsafe.StringData(d2) {
		t.Error("an equal description is held twice")
	}

	// The strategy's object is shared: a fresh list holds its schemas.
	st, _, err := strategy.Parse([]byte(strings.ReplaceAll(gadgetCRD, "SCHEMA", gadgetSchema)), strategy.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Share(st.Objects[0])
	out, err = transform(decodedGadget(t))
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range schemasOf(t, out.(*unstructured.Unstructured)) {
		if !same(s, schemasOf(t, st.Objects[0])[i]) {
			t.Errorf("version %d's schema is not the strategy's", i)
		}
	}
}
