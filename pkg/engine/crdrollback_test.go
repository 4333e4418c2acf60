package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/crdsafety"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// The product of our own for the rollback tests: things v1 with a note,
// then v2 (stored) adding a color.
const (
	rollbackProps   = "note: {type: string}"
	rollbackV2Props = "color: {type: string}"
)

// rollbackRig is a preflightRig at v2 of things: one object written at v1
// before the upgrade ("old"), one at v2 without the new field ("plain")
// and one at v2 using it ("colored").
type rollbackRig struct {
	*preflightRig
	v1, v2 string
}

func newRollbackRig(t *testing.T, name string) *rollbackRig {
	rig := &rollbackRig{preflightRig: newPreflightRig(t, name)}
	rig.v1 = testenv.ThingsCRD(rig.group, "Namespaced", rollbackProps)
	rig.v2 = testenv.ThingsCRDv2(rig.group, rollbackProps, rollbackV2Props)
	if _, err := rig.run(rig.v1, engine.Options{}); err != nil {
		t.Fatalf("install v1: %v", err)
	}
	rig.create("v1", "old", map[string]any{"note": "written at v1"})
	if _, err := rig.run(rig.v2, engine.Options{}); err != nil {
		t.Fatalf("upgrade to v2: %v", err)
	}
	rig.create("v2", "plain", map[string]any{"note": "written at v2"})
	rig.create("v2", "colored", map[string]any{"note": "colored at v2", "color": "blue"})
	return rig
}

// at is the things resource of the rig's namespace at version.
func (r *rollbackRig) at(version string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: r.group, Version: version, Resource: "things"}
}

func (r *rollbackRig) create(version, name string, spec map[string]any) {
	r.t.Helper()
	o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": r.group + "/" + version, "kind": "Thing",
		"metadata": map[string]any{"name": name}, "spec": spec}}
	if _, err := r.env.Dynamic.Resource(r.at(version)).Namespace(r.ns).Create(r.t.Context(), o, metav1.CreateOptions{}); err != nil {
		r.t.Fatal(err)
	}
}

// uncolor removes the color of "colored", as its user would, at v2.
func (r *rollbackRig) uncolor() {
	r.t.Helper()
	res := r.env.Dynamic.Resource(r.at("v2")).Namespace(r.ns)
	o, err := res.Get(r.t.Context(), "colored", metav1.GetOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	unstructured.RemoveNestedField(o.Object, "spec", "color")
	if _, err := res.Update(r.t.Context(), o, metav1.UpdateOptions{}); err != nil {
		r.t.Fatal(err)
	}
}

// refusesColored asserts that err refuses the rollback for the color
// field, naming "colored" and no other object.
func (r *rollbackRig) refusesColored(err error) {
	r.t.Helper()
	var unsafe *crdsafety.UnsafeError
	if !errors.As(err, &unsafe) {
		r.t.Fatalf("rollback: %v, want a refusal", err)
	}
	want := r.ns + "/colored"
	for _, f := range unsafe.Findings {
		if f.Rule == crdsafety.RuleFieldRemoved && f.Path == ".spec.color" && f.Objects == 1 && slices.Equal(f.Examples, []string{want}) {
			return
		}
	}
	r.t.Errorf("refusal %v: want %s at .spec.color naming only %s", err, crdsafety.RuleFieldRemoved, want)
}

// crd returns the live CRD's versions (name:served/storage) and its
// stored versions.
func (r *rollbackRig) crd() (versions, stored []string) {
	r.t.Helper()
	live, err := r.env.Dynamic.Resource(crdGVR).Get(r.t.Context(), r.crdName, metav1.GetOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	list, _, _ := unstructured.NestedSlice(live.Object, "spec", "versions")
	for _, v := range list {
		m := v.(map[string]any)
		versions = append(versions, fmt.Sprintf("%s:%v/%v", m["name"], m["served"], m["storage"]))
	}
	stored, _, _ = unstructured.NestedStringSlice(live.Object, "status", "storedVersions")
	return versions, stored
}

// rolledBack asserts that the CRD defines and stores only v1 and that
// every object reads back at v1 with its note (reading an object still
// stored at v2 fails once v2 has left the CRD).
func (r *rollbackRig) rolledBack() {
	r.t.Helper()
	versions, stored := r.crd()
	if !slices.Equal(versions, []string{"v1:true/true"}) || !slices.Equal(stored, []string{"v1"}) {
		r.t.Errorf("after the rollback: versions %v, storedVersions %v; want only v1", versions, stored)
	}
	list, err := r.env.Dynamic.Resource(r.at("v1")).Namespace(r.ns).List(r.t.Context(), metav1.ListOptions{})
	if err != nil {
		r.t.Fatalf("read the things back at v1: %v", err)
	}
	got := map[string]string{}
	for _, o := range list.Items {
		got[o.GetName()], _, _ = unstructured.NestedString(o.Object, "spec", "note")
	}
	want := map[string]string{"old": "written at v1", "plain": "written at v2", "colored": "colored at v2"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		r.t.Errorf("notes after the rollback %v, want %v", got, want)
	}
}

// TestClusterCRDRollbackLosesNothing: things v1 -> v2 (v2 stored, a new
// field) -> back to v1 on a real cluster. While an object's values are in
// the field v1 lacks, the rollback is refused before any write, naming
// that object only; once its user has cleared it, the rollback migrates
// every object to v1 (the storage-version step rewrites the three), trims
// status.storedVersions and drops v2: every object reads back at v1 with
// what it held.
func TestClusterCRDRollbackLosesNothing(t *testing.T) {
	rig := newRollbackRig(t, "rollback")
	before := rig.snapshot()
	_, err := rig.run(rig.v1, engine.Options{})
	rig.refusesColored(err)
	if after := rig.snapshot(); after != before {
		t.Errorf("refused, but written:\n before %s\n after  %s", before, after)
	}

	rig.uncolor()
	var migrated []string
	res, err := rig.run(rig.v1, engine.Options{OnEvent: func(e engine.Event) {
		if e.Step == engine.StorageVersionsStep && e.Type == engine.EventApplied {
			migrated = append(migrated, e.Reason)
		}
	}})
	if err != nil {
		t.Fatalf("rollback: %v", err)
	}
	if len(migrated) != 1 || !strings.HasPrefix(migrated[0], "3 stored objects rewritten at v1; v2 dropped") {
		t.Errorf("storage-version migration %q, want the 3 things rewritten at v1 and v2 dropped", migrated)
	}
	if len(res.Plan.CRDSafety) != 0 {
		t.Errorf("findings of the rollback: %v", res.Plan.CRDSafety)
	}
	rig.rolledBack()
}

// TestCRDRollbackInterrupted: a rollback whose preflight an override let
// through stops right after its CRD write, before the migration. The CRD
// it leaves still serves v2 (no longer stored), so the objects stored at
// it read as they were: the next run without the override is refused
// naming the one object using the field (not every object, as it would be
// if v2 were not readable), and once that object's user has cleared it,
// the next run finishes the migration and loses nothing.
func TestCRDRollbackInterrupted(t *testing.T) {
	rig := newRollbackRig(t, "interrupted")
	ctx := t.Context()
	s, _, err := strategy.Parse([]byte(rig.v1), strategy.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Identity = strategy.Identity{Version: "v0.0.9"}
	stopped, stop := context.WithCancel(ctx)
	defer stop()
	_, err = engine.Run(stopped, rig.env.Config, s, engine.Options{Owner: rig.owner, StageDeadline: time.Minute, Interval: 200 * time.Millisecond,
		AllowCRDChanges: []crdsafety.Allow{{CRD: rig.crdName, Rule: crdsafety.RuleFieldRemoved}},
		OnEvent: func(e engine.Event) {
			if e.Type == engine.EventApplied && e.Step == "crds" && e.Action == apply.ActionUpdate {
				stop()
			}
		}})
	if err == nil {
		t.Fatal("the interrupted rollback succeeded")
	}
	versions, stored := rig.crd()
	if !slices.Equal(versions, []string{"v1:true/true", "v2:true/false"}) || !slices.Contains(stored, "v2") {
		t.Fatalf("after the interruption: versions %v, storedVersions %v; want v1 stored and v2 still served, v2 still listed as stored", versions, stored)
	}
	colored, err := rig.env.Dynamic.Resource(rig.at("v2")).Namespace(rig.ns).Get(ctx, "colored", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("read colored at v2 after the interruption: %v", err)
	}
	if c, _, _ := unstructured.NestedString(colored.Object, "spec", "color"); c != "blue" {
		t.Fatalf("colored after the interruption: color %q, want blue (not yet migrated)", c)
	}

	before := rig.snapshot()
	_, err = rig.run(rig.v1, engine.Options{})
	rig.refusesColored(err)
	if after := rig.snapshot(); after != before {
		t.Errorf("refused, but written:\n before %s\n after  %s", before, after)
	}

	rig.uncolor()
	if _, err := rig.run(rig.v1, engine.Options{}); err != nil {
		t.Fatalf("resumed rollback: %v", err)
	}
	rig.rolledBack()
}

// TestStorageVersionHashIsDiscoverys: engine.StorageVersionHash (a copy
// of the API server's) is what the cluster's discovery shows for a CRD's
// resource, before and after an upgrade moves its storage version; the
// migration's wait for the storage version returns once discovery shows
// it, and not while it shows another.
func TestStorageVersionHashIsDiscoverys(t *testing.T) {
	rig := newPreflightRig(t, "hash")
	rc, err := engine.New(rig.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	hashOf := func(ctx context.Context) (string, string) {
		list, err := rig.env.Kube.Discovery().ServerResourcesForGroupVersion(rig.group + "/v1")
		if err != nil {
			return "", err.Error()
		}
		for _, r := range list.APIResources {
			if r.Name == "things" {
				return r.StorageVersionHash, "hash " + r.StorageVersionHash
			}
		}
		return "", "things not listed"
	}
	for _, step := range []struct{ text, storage, other string }{
		{testenv.ThingsCRD(rig.group, "Namespaced", rollbackProps), "v1", "v2"},
		{testenv.ThingsCRDv2(rig.group, rollbackProps, rollbackV2Props), "v2", "v1"},
	} {
		if _, err := rig.run(step.text, engine.Options{}); err != nil {
			t.Fatal(err)
		}
		crd := parseCRD(t, step.text)
		if err := engine.WaitStorage(t.Context(), rc, crd, step.storage, time.Minute); err != nil {
			t.Errorf("wait for storage at %s: %v", step.storage, err)
		}
		if err := engine.WaitStorage(t.Context(), rc, crd, step.other, time.Second); err == nil || !strings.Contains(err.Error(), "storageVersionHash") {
			t.Errorf("wait for storage at %s while %s stores: %v, want a timeout naming the hash seen", step.other, step.storage, err)
		}
		want := engine.StorageVersionHash(rig.group, step.storage, "Thing")
		testenv.WaitFor(t.Context(), t, "discovery's storageVersionHash of things at "+step.storage, func(ctx context.Context) (bool, string, error) {
			got, why := hashOf(ctx)
			return got == want, why + ", want " + want, nil
		})
	}
	if a, b := engine.StorageVersionHash(rig.group, "v1", "Thing"), engine.StorageVersionHash(rig.group, "v2", "Thing"); a == b {
		t.Errorf("the hashes of v1 and v2 are the same (%s): the test tells nothing", a)
	}
}

func parseCRD(t *testing.T, text string) *unstructured.Unstructured {
	t.Helper()
	s, _, err := strategy.Parse([]byte(text), strategy.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s.Objects[0]
}
