package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/apply/applytest"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// versionedCRD is a CRD of group with the given versions (the last one
// stored), every version with the same schema.
func versionedCRD(group string, versions ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: things.%[1]s}
spec:
  group: %[1]s
  scope: Namespaced
  names: {plural: things, singular: thing, kind: Thing, listKind: ThingList}
  versions:
`, group)
	for i, v := range versions {
		fmt.Fprintf(&b, `  - name: %s
    served: true
    storage: %v
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`, v, i == len(versions)-1)
	}
	return b.String()
}

// crdGVR is the resource of CRDs.
var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// thingsGroup returns the test's environment, a namespace and an API group
// of its own for versionedCRD, whose CRD is deleted when the test ends.
func thingsGroup(t *testing.T) (*testenv.Env, string, string) {
	t.Helper()
	env := testenv.New(t)
	ns := env.Namespace(t.Context(), t)
	group := strings.TrimPrefix(ns, "t-") + ".example.com"
	t.Cleanup(func() {
		_ = env.Dynamic.Resource(crdGVR).Delete(context.Background(), "things."+group, metav1.DeleteOptions{})
	})
	return env, ns, group
}

// TestStoredVersionsMigrated: custom resources stored at v1alpha1; an
// upgrade whose CRD defines only v1 first rewrites them at v1 and sets
// status.storedVersions to [v1] (a plan shows it as a step), then drops
// v1alpha1 from the CRD; the objects read back at v1.
func TestStoredVersionsMigrated(t *testing.T) {
	env, ns, group := thingsGroup(t)
	ctx := t.Context()
	owner := inventory.Owner{Namespace: ns, Name: "stored", Kind: inventory.KindPlugin}
	run := func(version, text string, dry bool) *engine.Result {
		t.Helper()
		s, _, err := strategy.Parse([]byte(text), strategy.ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Identity = strategy.Identity{Version: version}
		opts := engine.Options{Owner: owner, StageDeadline: time.Minute, Interval: 200 * time.Millisecond,
			OnEvent: func(e engine.Event) { t.Logf("%s %s %s %s %s", e.Type, e.Step, e.Ref, e.Action, e.Reason) }}
		if dry {
			p, err := engine.Plan(ctx, env.Config, s, opts)
			if err != nil {
				t.Fatal(err)
			}
			return &engine.Result{Plan: p}
		}
		res, err := engine.Run(ctx, env.Config, s, opts)
		if err != nil {
			t.Fatalf("run %s: %v", version, err)
		}
		return res
	}
	run("v1", versionedCRD(group, "v1alpha1"), false)
	old := schema.GroupVersionResource{Group: group, Version: "v1alpha1", Resource: "things"}
	for i := range 3 {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion(group + "/v1alpha1")
		o.SetKind("Thing")
		o.SetName(fmt.Sprintf("thing-%d", i))
		o.Object["spec"] = map[string]any{"size": int64(i)}
		if _, err := env.Dynamic.Resource(old).Namespace(ns).Create(ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	v2 := versionedCRD(group, "v1")
	p := run("v2", v2, true).Plan
	var planned []string
	for _, st := range p.Steps {
		for _, it := range st.Items {
			if it.Action == apply.ActionMigrate {
				planned = append(planned, st.Name+" "+it.Ref.String()+": "+it.Reason)
			}
		}
	}
	if len(planned) != 1 || !strings.HasPrefix(planned[0], engine.StorageVersionsStep+" CustomResourceDefinition") || !strings.Contains(planned[0], "drop v1alpha1") {
		t.Errorf("plan of v2: migration steps %q, want one of things.%s dropping v1alpha1", planned, group)
	}

	// A first attempt stops right after writing the CRD (the operator
	// restarted, a fault): the next run, whose CRD step writes nothing,
	// must still migrate.
	{
		s, _, err := strategy.Parse([]byte(v2), strategy.ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Identity = strategy.Identity{Version: "v2"}
		stopped, stop := context.WithCancel(ctx)
		_, err = engine.Run(stopped, env.Config, s, engine.Options{Owner: owner, StageDeadline: time.Minute, Interval: 200 * time.Millisecond,
			OnEvent: func(e engine.Event) {
				if e.Type == engine.EventApplied && e.Step == "crds" && e.Action == apply.ActionUpdate {
					stop()
				}
			}})
		stop()
		if err == nil {
			t.Fatal("the interrupted run of v2 succeeded")
		}
	}
	run("v2", v2, false)
	checkOnlyV1(ctx, t, env, group)
	list, err := env.Dynamic.Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "things"}).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("read back at v1: %v", err)
	}
	if len(list.Items) != 3 {
		t.Errorf("%d things read back at v1, want 3", len(list.Items))
	}
	for _, o := range list.Items {
		if size, _, _ := unstructured.NestedInt64(o.Object, "spec", "size"); o.GetAPIVersion() != group+"/v1" || fmt.Sprintf("thing-%d", size) != o.GetName() {
			t.Errorf("%s: apiVersion %s, spec.size %d", o.GetName(), o.GetAPIVersion(), size)
		}
	}
	// Nothing is left to migrate.
	for _, st := range run("v2", v2, true).Plan.Steps {
		if st.Name == engine.StorageVersionsStep {
			t.Errorf("plan after the migration still has step %s: %+v", st.Name, st.Items)
		}
	}
}

// The migration updates status.storedVersions by its own request, outside
// the applier: a cache that still shows the CRD from before that write
// (with the old version stored) must not be taken for it, or the last
// apply keeps the dropped version in the CRD and the run reports success.
// The cache here stops at the first copy of the new definition.
func TestStoredVersionsMigratedThroughALaggingCache(t *testing.T) {
	env, ns, group := thingsGroup(t)
	ctx := t.Context()
	a, err := apply.NewForConfig(env.Config, apply.Options{})
	if err != nil {
		t.Fatal(err)
	}
	lag := applytest.NewLaggingCache(applytest.StartCache(t, env.Config))
	rc := engine.NewWithClients(engine.Clients{Applier: a, Kube: env.Kube, Cache: lag})
	owner := inventory.Owner{Namespace: ns, Name: "lagging", Kind: inventory.KindPlugin}
	parse := func(version, text string) *strategy.Strategy {
		t.Helper()
		s, _, err := strategy.Parse([]byte(text), strategy.ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Identity = strategy.Identity{Version: version}
		return s
	}
	opts := engine.Options{Owner: owner, StageDeadline: time.Minute, Interval: 200 * time.Millisecond,
		OnEvent: func(e engine.Event) { t.Logf("%s %s %s %s %s", e.Type, e.Step, e.Ref, e.Action, e.Reason) }}
	v1 := parse("v1", versionedCRD(group, "v1alpha1"))
	if _, err := rc.Run(ctx, v1, opts); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Dynamic.Resource(schema.GroupVersionResource{Group: group, Version: "v1alpha1", Resource: "things"}).Namespace(ns).Create(ctx,
		&unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1alpha1", "kind": "Thing", "metadata": map[string]any{"name": "thing"}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crd := v1.Objects[0]
	lag.FreezeWhen(crd, func(u *unstructured.Unstructured) bool { return u.GetGeneration() >= 2 })
	// The run itself need not read the CRD from the cache before the
	// migration (its wait judges the update's response), so the test
	// reads it through the cache once the update is written, before the
	// migration's status write: the cache stops at the new definition
	// with the old version stored.
	opts.OnEvent = func(e engine.Event) {
		t.Logf("%s %s %s %s %s", e.Type, e.Step, e.Ref, e.Action, e.Reason)
		if e.Type != engine.EventApplied || e.Ref != strategy.RefOf(crd) || e.Action != apply.ActionUpdate {
			return
		}
		deadline := time.Now().Add(30 * time.Second)
		for !lag.Frozen(crd) && time.Now().Before(deadline) {
			if _, _, err := lag.Cached(ctx, crd.GroupVersionKind(), "", crd.GetName()); err != nil {
				t.Errorf("read the CRD through the cache: %v", err)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if _, err := rc.Run(ctx, parse("v2", versionedCRD(group, "v1")), opts); err != nil {
		t.Fatalf("run v2: %v", err)
	}
	if !lag.Frozen(crd) {
		t.Fatal("the cache never held the new definition: nothing was tested")
	}
	checkOnlyV1(ctx, t, env, group)
}

// checkOnlyV1 asserts that the things CRD of group defines and stores only
// v1.
func checkOnlyV1(ctx context.Context, t *testing.T, env *testenv.Env, group string) {
	t.Helper()
	live, err := env.Dynamic.Resource(crdGVR).Get(ctx, "things."+group, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored, _, _ := unstructured.NestedStringSlice(live.Object, "status", "storedVersions")
	versions, _, _ := unstructured.NestedSlice(live.Object, "spec", "versions")
	if strings.Join(stored, ",") != "v1" || len(versions) != 1 {
		t.Errorf("after the upgrade: storedVersions %v, %d versions in the CRD; want [v1] and only v1", stored, len(versions))
	}
}
