package apply_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// crdVersions is a CRD's spec.versions as name:served/storage.
func crdVersions(crd *unstructured.Unstructured) []string {
	var out []string
	list, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range list {
		m := v.(map[string]any)
		out = append(out, fmt.Sprintf("%s:%v/%v", m["name"], m["served"], m["storage"]))
	}
	return out
}

func parseOne(t *testing.T, text string) *unstructured.Unstructured {
	t.Helper()
	s, _, err := strategy.Parse([]byte(text), strategy.ParseOptions{})
	if err != nil || len(s.Objects) != 1 {
		t.Fatalf("parse: %v (%d objects)", err, len(s.Objects))
	}
	return s.Objects[0]
}

// TestWithLiveKeepsStoredVersionsServed: a CRD whose new definition drops
// a version objects are stored at keeps that version as the live CRD
// serves it, no longer stored (one it did not serve stays unserved; one
// no object is stored at goes), and on a real cluster the objects stored
// at it still read there, with the fields only it defines, until they are
// migrated.
func TestWithLiveKeepsStoredVersionsServed(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	group := strings.TrimPrefix(ns, "t-") + ".example.com"
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	t.Cleanup(func() {
		_ = env.Dynamic.Resource(crds).Delete(context.Background(), "things."+group, metav1.DeleteOptions{})
	})
	v1 := parseOne(t, testenv.ThingsCRD(group, "Namespaced", "note: {type: string}"))
	v2 := parseOne(t, testenv.ThingsCRDv2(group, "note: {type: string}", "color: {type: string}"))

	// As logic: the live CRD at v2 with both versions stored.
	live := v2.DeepCopy()
	_ = unstructured.SetNestedStringSlice(live.Object, []string{"v1", "v2"}, "status", "storedVersions")
	if got := crdVersions(apply.WithLive(v1, live)); !slices.Equal(got, []string{"v1:true/true", "v2:true/false"}) {
		t.Errorf("v2 stored and served: versions %v, want v2 kept served, not stored", got)
	}
	unserved := live.DeepCopy()
	versions, _, _ := unstructured.NestedSlice(unserved.Object, "spec", "versions")
	versions[1].(map[string]any)["served"] = false
	_ = unstructured.SetNestedSlice(unserved.Object, versions, "spec", "versions")
	if got := crdVersions(apply.WithLive(v1, unserved)); !slices.Equal(got, []string{"v1:true/true", "v2:false/false"}) {
		t.Errorf("v2 stored, not served: versions %v, want v2 kept unserved", got)
	}
	_ = unstructured.SetNestedStringSlice(live.Object, []string{"v1"}, "status", "storedVersions")
	if got := crdVersions(apply.WithLive(v1, live)); !slices.Equal(got, []string{"v1:true/true"}) {
		t.Errorf("v2 not stored: versions %v, want v2 dropped", got)
	}
	if got := crdVersions(v1); !slices.Equal(got, []string{"v1:true/true"}) {
		t.Errorf("WithLive changed its argument: %v", got)
	}

	// On the cluster: v2 installed, an object written at v2 with the new
	// field, then the definition without v2 applied.
	a, _ := newApplier(t, env, apply.Options{Owner: testOwner})
	mustApply(t, a, v2, apply.ActionCreate)
	things := env.Dynamic.Resource(schema.GroupVersionResource{Group: group, Version: "v2", Resource: "things"}).Namespace(ns)
	thing := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v2", "kind": "Thing",
		"metadata": map[string]any{"name": "colored"}, "spec": map[string]any{"note": "n", "color": "blue"}}}
	testenv.WaitFor(ctx, t, "a thing written at v2", func(ctx context.Context) (bool, string, error) {
		_, err := things.Create(ctx, thing, metav1.CreateOptions{})
		return err == nil, fmt.Sprint(err), nil
	})
	mustApply(t, a, v1, apply.ActionUpdate)
	crd, err := env.Dynamic.Resource(crds).Get(ctx, "things."+group, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := crdVersions(crd); !slices.Equal(got, []string{"v1:true/true", "v2:true/false"}) {
		t.Errorf("live CRD after applying v1: versions %v, want v2 kept served, not stored", got)
	}
	got, err := things.Get(ctx, "colored", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("read at v2 after applying v1: %v", err)
	}
	if c, _, _ := unstructured.NestedString(got.Object, "spec", "color"); c != "blue" {
		t.Errorf("the thing at v2 after applying v1: color %q, want blue", c)
	}
}
