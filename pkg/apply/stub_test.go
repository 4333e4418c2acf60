package apply_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/apply/applytest"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
)

// A ConfigMap of half a megabyte that anyone who may write ConfigMaps has
// labelled as an installation's costs the informers a stub of its
// metadata, not its bytes, until the applier reads or writes it; then it
// is served from memory, and kept whole from its next change.
func TestInformersKeepOthersObjectsAsStubs(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	cms := env.Dynamic.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(ns)
	big := configMap(t, ns, "big", map[string]string{"blob": strings.Repeat("x", 512<<10)})
	big.SetLabels(map[string]string{metakeys.ManagedByLabel: metakeys.ManagedBy, "tenant": strings.Repeat("y", 63)})
	if _, err := cms.Create(ctx, big, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := applytest.StartCache(t, env.Config)
	gvk := big.GroupVersionKind()
	testenv.WaitFor(ctx, t, "the ConfigMaps' informer", func(ctx context.Context) (bool, string, error) {
		held, ok, err := c.Cached(ctx, gvk, ns, "big")
		if err != nil {
			return false, err.Error(), nil
		}
		if ok {
			t.Fatalf("the cache serves a ConfigMap the applier never read: %d bytes", len(held.Object))
		}
		return true, "", nil
	})
	stub, err := c.InformerObjectForTest(ctx, gvk, ns, "big")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(stub.Object); len(b) > 1<<10 {
		t.Errorf("the informer holds %d bytes of it, want a stub:\n%.300s", len(b), b)
	}
	if _, ok := stub.GetLabels()["tenant"]; ok || stub.GetLabels()[metakeys.ManagedByLabel] != metakeys.ManagedBy {
		t.Errorf("the stub's labels: %v, want the managed-by label alone", stub.GetLabels())
	}

	// Read by the applier: from the API server once, then from memory.
	cfg, rec := applytest.Record(env.Config)
	a, err := apply.NewForConfig(cfg, apply.Options{Identity: testID, Owner: testOwner})
	if err != nil {
		t.Fatal(err)
	}
	a = a.WithCache(c)
	for i, want := range []int{1, 0} {
		rec.Reset()
		live, err := a.Get(ctx, big)
		if err != nil || live == nil {
			t.Fatalf("read %d: %v, %v", i, live, err)
		}
		if got, _, _ := unstructured.NestedString(live.Object, "data", "blob"); len(got) != 512<<10 {
			t.Fatalf("read %d: %d bytes of data", i, len(got))
		}
		n := 0
		for _, r := range rec.Reads() {
			if strings.HasSuffix(r.Path, "/configmaps/big") {
				n++
			}
		}
		if n != want {
			t.Errorf("read %d: %d reads of the ConfigMap from the API server, want %d", i, n, want)
		}
	}

	// Its next change is kept whole.
	live, err := cms.Get(ctx, "big", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(live.Object, "z", "data", "small"); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Update(ctx, live, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(ctx, t, "the informer keeps it whole", func(ctx context.Context) (bool, string, error) {
		u, err := c.InformerObjectForTest(ctx, gvk, ns, "big")
		if err != nil {
			return false, "", err
		}
		got, _, _ := unstructured.NestedString(u.Object, "data", "small")
		return got == "z", "data.small " + got, nil
	})
}
