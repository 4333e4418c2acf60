package engine_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/crdsafety"
	"github.com/installstrategy/installstrategy/pkg/engine"
)

// TestCRDPreflightStrategyOwnObjects mirrors KubeVirt's rollback v1.9.0 ->
// v1.8.4 (the older virtualmachineclusterpreferences lack
// .spec.devices.preferredVideoType, which the strategy's own preferences
// set) on a CRD of our own, on a real cluster: the strategy's own objects,
// which the upgrade rewrites without the field, and an object the upgrade
// prunes, do not refuse it; a user's object using the field, a user's
// value on one of the strategy's objects, and the pruned object kept by
// NoPrune each do, before any write.
func TestCRDPreflightStrategyOwnObjects(t *testing.T) {
	rig := newPreflightRig(t, "preferences")
	ns, group, crdName, things := rig.ns, rig.group, rig.crdName, rig.things
	ctx := t.Context()
	thing := func(name, spec string) string {
		return fmt.Sprintf("---\napiVersion: %s/v1\nkind: Thing\nmetadata: {name: %s, namespace: %s}\nspec: %s\n", group, name, ns, spec)
	}
	withVideo := `videoType: {type: string}, disk: {type: string}`
	noVideo := `disk: {type: string}`
	// The older strategy: its own objects set videoType (own-b does not);
	// "dropped" is one the newer strategy no longer holds.
	older := gadgetCRD(group, "Namespaced", withVideo) + thing("own-a", "{videoType: vga, disk: sda}") + thing("own-b", "{disk: sdb}") + thing("dropped", "{videoType: vga}")
	// The newer one drops the field from the CRD and from its objects.
	newer := gadgetCRD(group, "Namespaced", noVideo) + thing("own-a", "{disk: sda}") + thing("own-b", "{disk: sdb}")
	run := func(text string, noPrune bool) (*engine.Result, error) {
		t.Helper()
		return rig.run(text, engine.Options{NoPrune: noPrune})
	}
	snapshot := rig.snapshot
	// refused runs newer and wants a refusal of videoType that counts
	// exactly the objects named, and nothing written.
	refused := func(why string, noPrune bool, objects ...string) {
		t.Helper()
		before := snapshot()
		_, err := run(newer, noPrune)
		var unsafe *crdsafety.UnsafeError
		if !errors.As(err, &unsafe) {
			t.Fatalf("%s: run error %v, want a refusal", why, err)
		}
		var got []string
		for _, f := range unsafe.Findings {
			if f.CRD == crdName && f.Rule == crdsafety.RuleFieldRemoved && f.Path == ".spec.videoType" {
				got = append(got, f.Examples...)
			} else {
				t.Errorf("%s: unexpected finding %s", why, f)
			}
		}
		slices.Sort(got)
		want := make([]string, len(objects))
		for i, o := range objects {
			want[i] = ns + "/" + o
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: refusal counts %v, want %v (%v)", why, got, want, err)
		}
		if after := snapshot(); after != before {
			t.Errorf("%s: refused, but written:\n before %s\n after  %s", why, before, after)
		}
	}
	edit := func(name string, set func(spec map[string]any)) {
		t.Helper()
		o, err := things.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		spec, _ := o.Object["spec"].(map[string]any)
		set(spec)
		if _, err := things.Update(ctx, o, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
			t.Fatal(err)
		}
	}

	if _, err := run(older, false); err != nil {
		t.Fatalf("install: %v", err)
	}
	// A user's own object using the field: users' data.
	user := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": "Thing",
		"metadata": map[string]any{"name": "user", "namespace": ns}, "spec": map[string]any{"videoType": "bochs"}}}
	if _, err := things.Create(ctx, user, metav1.CreateOptions{FieldManager: "kubectl-create"}); err != nil {
		t.Fatal(err)
	}
	refused("a user's object", false, "user")
	if err := things.Delete(ctx, "user", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// A user's value on one of the strategy's own objects outlives the
	// strategy's write: users' data.
	edit("own-b", func(spec map[string]any) { spec["videoType"] = "virtio" })
	refused("a user's value on the strategy's object", false, "own-b")
	edit("own-b", func(spec map[string]any) { delete(spec, "videoType") })
	// Without prune, the object the newer strategy drops stays, its value
	// pruned by the API server: users' data.
	refused("a dropped object kept by NoPrune", true, "dropped")

	// The strategy's own values, and the object it prunes: the upgrade
	// (this rollback) goes through.
	if _, err := run(newer, false); err != nil {
		t.Fatalf("upgrade with only the strategy's own objects using the field: %v", err)
	}
	a, err := things.Get(ctx, "own-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, has := a.Object["spec"].(map[string]any)["videoType"]; has {
		t.Errorf("own-a after the upgrade: %v", a.Object["spec"])
	}
	if _, err := things.Get(ctx, "dropped", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the dropped object after the upgrade: %v", err)
	}
	live, err := rig.env.Dynamic.Resource(crdGVR).Get(ctx, crdName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(fmt.Sprint(live.Object["spec"]), "videoType") {
		t.Errorf("the CRD still defines videoType: %v", live.Object["spec"])
	}
}

// TestCRDPreflightAdoptedObjects: an object the target strategy holds but
// no installation owns is the strategy's own only when the run adopts it,
// and then only the values of its previous installer (kubectl here) become
// the strategy's: without adoption it is not written (users' data, refused);
// a value a controller wrote stays users' data even on adoption; adopted
// with only kubectl's values, the upgrade goes through.
func TestCRDPreflightAdoptedObjects(t *testing.T) {
	rig := newPreflightRig(t, "adopted")
	ns, group, crdName, things := rig.ns, rig.group, rig.crdName, rig.things
	ctx := t.Context()
	if _, err := rig.run(gadgetCRD(group, "Namespaced", `videoType: {type: string}, disk: {type: string}`), engine.Options{}); err != nil {
		t.Fatalf("install: %v", err)
	}
	create := func(name, manager string, spec map[string]any) {
		t.Helper()
		o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": "Thing",
			"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec}}
		if _, err := things.Create(ctx, o, metav1.CreateOptions{FieldManager: manager}); err != nil {
			t.Fatal(err)
		}
	}
	create("kubectl-made", "kubectl-client-side-apply", map[string]any{"videoType": "vga", "disk": "sda"})
	newer := gadgetCRD(group, "Namespaced", `disk: {type: string}`) +
		fmt.Sprintf("---\napiVersion: %s/v1\nkind: Thing\nmetadata: {name: kubectl-made, namespace: %s}\nspec: {disk: sda}\n", group, ns)
	refusedFor := func(why string, opts engine.Options, want ...string) {
		t.Helper()
		_, err := rig.run(newer, opts)
		var unsafe *crdsafety.UnsafeError
		if !errors.As(err, &unsafe) || len(unsafe.Findings) != 1 || unsafe.Findings[0].CRD != crdName || !slices.Equal(unsafe.Findings[0].Examples, want) {
			t.Errorf("%s: %v, want a refusal of videoType counting %v", why, err, want)
		}
	}
	refusedFor("not adopted", engine.Options{}, ns+"/kubectl-made")
	create("controller-made", "my-controller", map[string]any{"videoType": "vga"})
	newerWithBoth := newer + fmt.Sprintf("---\napiVersion: %s/v1\nkind: Thing\nmetadata: {name: controller-made, namespace: %s}\nspec: {disk: sdb}\n", group, ns)
	before := rig.snapshot()
	_, err := rig.run(newerWithBoth, engine.Options{Adopt: apply.AdoptAll})
	var unsafe *crdsafety.UnsafeError
	if !errors.As(err, &unsafe) || len(unsafe.Findings) != 1 || !slices.Equal(unsafe.Findings[0].Examples, []string{ns + "/controller-made"}) {
		t.Errorf("adopting a controller's value: %v, want a refusal counting controller-made only", err)
	}
	if after := rig.snapshot(); after != before {
		t.Errorf("refused, but written:\n before %s\n after  %s", before, after)
	}
	if err := things.Delete(ctx, "controller-made", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rig.run(newer, engine.Options{Adopt: apply.AdoptAll}); err != nil {
		t.Fatalf("adopting kubectl's object: %v", err)
	}
	o, err := things.Get(ctx, "kubectl-made", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, has := o.Object["spec"].(map[string]any)["videoType"]; has {
		t.Errorf("kubectl-made after the adopting upgrade: %v", o.Object["spec"])
	}
}
