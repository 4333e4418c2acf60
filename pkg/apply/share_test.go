package apply_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/apply/applytest"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// The informer cache holds a CRD's version schemas, when they equal the
// strategy's, as the strategy's own values (one copy, not two); re-applies
// decide on the informer's object without copying it and find nothing to
// write, and a schema someone edits is held as read (its own copy), so the
// drift is seen and repaired.
func TestCacheSharesTheStrategysSchemas(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	group := fmt.Sprintf("s%d.share.example.com", time.Now().UnixNano())
	// Parsed from text as strategies are: numbers, booleans, nesting and
	// lists as the strategy parser makes them.
	text := fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.%[1]s
spec:
  group: %[1]s
  names: {kind: Gadget, plural: gadgets, listKind: GadgetList, singular: gadget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        description: A gadget.
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size: {type: integer, minimum: 1, maximum: 10}
              ratio: {type: number, minimum: 0.5}
              enabled: {type: boolean, default: true}
              tags: {type: array, items: {type: string}}
  - name: v2
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`, group)
	st, _, err := strategy.Parse([]byte(text), strategy.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	crd := st.Objects[0]
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	t.Cleanup(func() {
		_ = env.Dynamic.Resource(crdGVR).Delete(context.Background(), crd.GetName(), metav1.DeleteOptions{})
	})
	cache := applytest.StartCache(t, env.Config)
	a, err := apply.NewForConfig(env.Config, apply.Options{Identity: testID, Owner: testOwner})
	if err != nil {
		t.Fatal(err)
	}
	a = a.WithCache(cache)
	if _, err := a.Apply(ctx, crd); err != nil {
		t.Fatal(err)
	}
	gvk := crd.GroupVersionKind()
	// Established (the API server's status writes reach the informer too).
	testenv.WaitFor(ctx, t, "the cache holds the CRD established, its schemas shared", func(ctx context.Context) (bool, string, error) {
		live, ok, err := cache.Cached(ctx, gvk, "", crd.GetName())
		if err != nil || !ok {
			return false, "not cached", err
		}
		conds, _, _ := unstructured.NestedSlice(live.Object, "status", "conditions")
		same, all, err := cache.SharesForTest(ctx, gvk, "", crd.GetName())
		return len(conds) > 0 && same == 2 && all == 2, fmt.Sprintf("%d of %d schemas shared, %d conditions", same, all, len(conds)), err
	})
	// The re-apply decides on the informer's own object (no copy of the
	// schemas) and changes nothing in it.
	own, err := cache.InformerObjectForTest(ctx, gvk, "", crd.GetName())
	if err != nil {
		t.Fatal(err)
	}
	before := own.DeepCopy()
	res, err := a.Apply(ctx, crd)
	if err != nil || res.Action != apply.ActionUnchanged {
		t.Fatalf("re-apply: %+v, %v; want unchanged", res, err)
	}
	if reflect.ValueOf(res.Object.Object).Pointer() != reflect.ValueOf(own.Object).Pointer() {
		t.Error("the re-apply decided on a copy of the cached CRD")
	}
	if !reflect.DeepEqual(own.Object, before.Object) {
		t.Error("the re-apply changed the informer's object")
	}
	// A resync applies a fresh parse of the same strategy (each reconcile
	// gets its own copy): nothing is written, the informer gets no event,
	// and it must still share with the table (not hold one copy while the
	// table holds another).
	again, _, err := strategy.Parse([]byte(text), strategy.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := a.Apply(ctx, again.Objects[0]); err != nil || res.Action != apply.ActionUnchanged {
		t.Fatalf("re-apply of a fresh parse: %+v, %v; want unchanged", res, err)
	}
	if same, all, err := cache.SharesForTest(ctx, gvk, "", crd.GetName()); err != nil || same != 2 || all != 2 {
		t.Fatalf("after re-applying a fresh parse: %d of %d schemas shared (%v); want 2 of 2", same, all, err)
	}

	// Someone edits v1's schema: the cache holds the edit, not the
	// strategy's schema, and the applier repairs it.
	live, err := env.Dynamic.Resource(crdGVR).Get(ctx, crd.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(live.Object, "spec", "versions")
	_ = unstructured.SetNestedField(versions[0].(map[string]any), "edited by hand", "schema", "openAPIV3Schema", "description")
	_ = unstructured.SetNestedSlice(live.Object, versions, "spec", "versions")
	if _, err := env.Dynamic.Resource(crdGVR).Update(ctx, live, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(ctx, t, "the cache holds the edit", func(ctx context.Context) (bool, string, error) {
		same, all, err := cache.SharesForTest(ctx, gvk, "", crd.GetName())
		return same == 1 && all == 2, fmt.Sprintf("%d of %d schemas shared", same, all), err
	})
	cached, _, err := cache.Cached(ctx, gvk, "", crd.GetName())
	if err != nil {
		t.Fatal(err)
	}
	if d := v1Description(cached); d != "edited by hand" {
		t.Fatalf("the cache holds description %q for the edited schema", d)
	}
	res, err = a.Apply(ctx, crd)
	if err != nil || res.Action != apply.ActionUpdate {
		t.Fatalf("apply over the edit: %+v, %v; want an update", res, err)
	}
	testenv.WaitFor(ctx, t, "the repaired schema shared again", func(ctx context.Context) (bool, string, error) {
		same, all, err := cache.SharesForTest(ctx, gvk, "", crd.GetName())
		return same == 2 && all == 2, fmt.Sprintf("%d of %d schemas shared", same, all), err
	})
	if d := v1Description(crd); d != "A gadget." {
		t.Fatalf("the strategy's object changed: description %q", d)
	}
}

// v1Description is the description of a CRD's first version's schema.
func v1Description(crd *unstructured.Unstructured) string {
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if len(versions) == 0 {
		return ""
	}
	v, _ := versions[0].(map[string]any)
	d, _, _ := unstructured.NestedString(v, "schema", "openAPIV3Schema", "description")
	return d
}
