package inventory_test

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// TestLargeInventory: 20,000 objects (about 1.4 MB of JSON, more than a
// ConfigMap may hold) are stored compressed and read back; an unchanged
// write is skipped; a small inventory goes back to readable JSON; a
// corrupt compressed list is an error naming its place.
func TestLargeInventory(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	owner := inventory.Owner{Namespace: ns, Name: "large"}
	st := inventory.NewStore(env.Kube)
	inv := inventory.New(owner)
	inv.Version = "v1.0.0"
	for i := range 20000 {
		inv.Add(strategy.ObjectRef{Kind: "ConfigMap", Namespace: "bench-apply-synthetic", Name: fmt.Sprintf("synthetic-%05d", i)})
	}
	if err := st.Write(ctx, inv); err != nil {
		t.Fatal(err)
	}
	cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, inventory.ConfigMapName(owner), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cm.Data[inventory.ObjectsKey]; ok || len(cm.BinaryData[inventory.ObjectsGzipKey]) == 0 {
		t.Fatalf("20,000 entries not stored compressed: data keys %d, binaryData %d bytes", len(cm.Data), len(cm.BinaryData[inventory.ObjectsGzipKey]))
	}
	t.Logf("20,000 entries: %d bytes compressed", len(cm.BinaryData[inventory.ObjectsGzipKey]))
	got, err := st.Get(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Entries) != 20000 || !got.Has(strategy.ObjectRef{Kind: "ConfigMap", Namespace: "bench-apply-synthetic", Name: "synthetic-19999"}) || got.Version != "v1.0.0" {
		t.Fatalf("read back %d entries, version %q", len(got.Entries), got.Version)
	}
	if err := st.Write(ctx, got); err != nil {
		t.Fatal(err)
	}
	again, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, cm.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.ResourceVersion != cm.ResourceVersion {
		t.Fatal("an unchanged large inventory was written again")
	}

	small := inventory.New(owner)
	small.Version = "v1.0.0"
	small.Add(strategy.ObjectRef{Kind: "ConfigMap", Namespace: ns, Name: "one"})
	got.Entries = small.Entries
	if err := st.Write(ctx, got); err != nil {
		t.Fatal(err)
	}
	cm, err = env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, cm.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cm.BinaryData[inventory.ObjectsGzipKey]; ok || cm.Data[inventory.ObjectsKey] == "" {
		t.Fatalf("a one-entry inventory is not plain JSON: %v / %v", cm.Data, cm.BinaryData)
	}

	cm.Data = nil
	cm.BinaryData = map[string][]byte{inventory.ObjectsGzipKey: []byte("not gzip")}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, owner); err == nil {
		t.Fatal("a corrupt compressed inventory was read")
	} else {
		t.Log(err)
	}
}
