package engine

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// widgetsCRD returns the CRD of example.com's namespaced Widgets defining
// versions, the last one stored.
func widgetsCRD(versions ...string) *unstructured.Unstructured {
	crd := defining("example.com", "Widget", "widgets")
	var vs []any
	for i, v := range versions {
		vs = append(vs, map[string]any{"name": v, "served": true, "storage": i == len(versions)-1,
			"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}})
	}
	spec := crd.Object["spec"].(map[string]any)
	spec["scope"], spec["versions"] = "Namespaced", vs
	return crd
}

// The storage-version migration (migrationsPlanned, migrateStoredVersions)
// over the fake cluster: a CRD whose live status.storedVersions lists a
// version the strategy drops has its custom resources rewritten, then the
// version trimmed from status.storedVersions, then the CRD applied, in that
// order; and none of it happens before the API server stores at the new
// version (discovery's storageVersionHash), nor when nothing is stale. The
// cluster tests of storedversions_test.go show the same on an API server.
func TestStoredVersionsWithFakes(t *testing.T) {
	owner := inventory.Owner{Namespace: "app", Name: "demo", Kind: inventory.KindPlugin}
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	widget := func(name string) *unstructured.Unstructured {
		o := obj("example.com/v1", "Widget", "app", name)
		o.Object["spec"] = map[string]any{"size": int64(len(name))}
		return o
	}
	const (
		rewriteA = "update widgets app/a"
		rewriteB = "update widgets app/b"
		trim     = "update customresourcedefinitions/status widgets.example.com"
		applyCRD = "update customresourcedefinitions widgets.example.com"
	)
	for _, tc := range []struct {
		name string
		// stored is the live CRD's status.storedVersions.
		stored []string
		// storedAt is the version discovery says the API server stores at.
		storedAt string
		// writes are the dynamic client's writes, in order.
		writes    []string
		planned   bool
		wantErr   string
		storedNow []string
	}{{
		name: "a dropped stored version: rewrite, trim, apply", stored: []string{"v1alpha1", "v1"}, storedAt: "v1",
		writes: []string{rewriteA, rewriteB, trim, applyCRD}, planned: true, storedNow: []string{"v1"},
	}, {
		name: "a dropped version never stored: nothing to migrate", stored: []string{"v1"}, storedAt: "v1",
		storedNow: []string{"v1"},
	}, {
		name: "the API server still stores at the dropped version: nothing rewritten or trimmed", stored: []string{"v1alpha1", "v1"}, storedAt: "v1alpha1",
		planned: true, wantErr: "does not store widgets.example.com at v1 yet", storedNow: []string{"v1alpha1", "v1"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			desired := widgetsCRD("v1")
			live := widgetsCRD("v1alpha1", "v1")
			live.SetLabels(owner.Labels())
			live.Object["status"] = map[string]any{"storedVersions": toAny(tc.stored)}
			c := newFakeCluster(t, []schema.GroupVersionKind{widgets.GroupVersion().WithKind("Widget")}, []string{"widgets"},
				[]runtime.Object{live, widget("a"), widget("b")}...)
			c.kube.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{{GroupVersion: "example.com/v1",
				APIResources: []metav1.APIResource{{Name: "widgets", Kind: "Widget", Namespaced: true, StorageVersionHash: storageVersionHash("example.com", tc.storedAt, "Widget")}}}}
			var events []Event
			opts := Options{Owner: owner, StageDeadline: 300 * time.Millisecond, OnEvent: func(e Event) { events = append(events, e) }}
			opts.defaults()
			r := &run{opts: opts, a: c.applier(apply.Options{Owner: owner}), kube: c.kube,
				s: &strategy.Strategy{Objects: []*unstructured.Unstructured{desired}}}

			p := &plan.Plan{Steps: []plan.Step{{Name: "crds", Stage: kinds.StageCRDs, Items: []plan.Item{{Ref: strategy.RefOf(desired), Object: desired}}}}}
			step, err := r.migrationsPlanned(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if got := step != nil; got != tc.planned {
				t.Fatalf("planned a migration: %t, want %t (%+v)", got, tc.planned, step)
			}
			if step != nil && (step.Name != StorageVersionsStep || len(step.Items) != 1 || step.Items[0].Action != apply.ActionMigrate || !strings.Contains(step.Items[0].Reason, "drop v1alpha1")) {
				t.Errorf("planned step: %+v", step)
			}
			c.writes()

			err = r.migrateStoredVersions(ctx, []*unstructured.Unstructured{desired}, nil)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("migrate: %v, want an error %q", err, tc.wantErr)
			}
			if got := c.writes(); !slices.Equal(got, tc.writes) {
				t.Errorf("writes %q, want %q", got, tc.writes)
			}
			after := c.live(t, desired)
			if got, _, _ := unstructured.NestedStringSlice(after.Object, "status", "storedVersions"); !slices.Equal(got, tc.storedNow) {
				t.Errorf("status.storedVersions %v, want %v", got, tc.storedNow)
			}
			if len(tc.writes) > 0 {
				if got := servedVersions(after, ""); !slices.Equal(got, []string{"v1"}) {
					t.Errorf("the CRD serves %v after the migration, want [v1]", got)
				}
				if len(events) != 1 || events[0].Action != apply.ActionMigrate || !strings.Contains(events[0].Reason, "2 stored objects rewritten at v1; v1alpha1 dropped") {
					t.Errorf("events %+v", events)
				}
			}
		})
	}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
