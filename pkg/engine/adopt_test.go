package engine_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// TestAdoptingMatchingObjectsWritesNoPodTemplate: the objects of a product
// of our own, made by `kubectl create -f` (client-side, field manager
// kubectl-create, no installation labels) exactly as the strategy has them —
// one Deployment with an annotation and a toleration its installer added to
// the pod template — are adopted without writing a pod template: the same
// pods run, a DaemonSet keeps its generation, and a plan afterwards changes
// nothing. A workload whose live template lacks a strategy value (the
// DaemonSet's image changed by hand) gets the strategy's template, and the
// reason says which field.
func TestAdoptingMatchingObjectsWritesNoPodTemplate(t *testing.T) {
	for _, drifted := range []bool{false, true} {
		t.Run(map[bool]string{false: "matching", true: "drifted"}[drifted], func(t *testing.T) {
			ctx := t.Context()
			env := testenv.New(t)
			ns := env.Namespace(ctx, t)
			owner := inventory.Owner{Namespace: ns, Name: "adopter"}
			t.Cleanup(func() {
				if _, err := engine.Uninstall(context.WithoutCancel(ctx), env.Config, engine.UninstallOptions{Owner: owner, Wait: true}); err != nil {
					t.Errorf("cleanup: %v", err)
				}
			})
			s := testenv.NamespacedProduct(t, ns, "v1")
			for _, o := range s.Objects {
				u := o.DeepCopy()
				if u.GetKind() == "Deployment" && u.GetName() == "synthetic-api" {
					tmpl, _, _ := unstructured.NestedMap(u.Object, "spec", "template")
					_ = unstructured.SetNestedField(tmpl, "someone", "metadata", "annotations", "example.com/installed-by")
					_ = unstructured.SetNestedSlice(tmpl, []any{map[string]any{"key": "example.com/dedicated", "operator": "Exists"}}, "spec", "tolerations")
					_ = unstructured.SetNestedMap(u.Object, tmpl, "spec", "template")
				}
				if drifted && u.GetKind() == "DaemonSet" {
					containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
					containers[0].(map[string]any)["image"] = "registry.example/synthetic/other:v0"
					_ = unstructured.SetNestedSlice(u.Object, containers, "spec", "template", "spec", "containers")
				}
				ri := env.Dynamic.Resource(gvr(u.GetKind())).Namespace(ns)
				if _, err := ri.Create(ctx, u, metav1.CreateOptions{FieldManager: "kubectl-create"}); err != nil {
					t.Fatalf("kubectl create %s: %v", strategy.RefOf(u), err)
				}
			}
			for _, o := range s.Objects {
				switch o.GetKind() {
				case "Deployment":
					env.WaitDeploymentRolledOut(ctx, t, ns, o.GetName())
				case "DaemonSet":
					env.WaitDaemonSetRolledOut(ctx, t, ns, o.GetName())
				}
			}
			before := workloads(ctx, t, env, ns)

			res, err := engine.Run(ctx, env.Config, s, engine.Options{Owner: owner, Adopt: apply.AdoptAll, Interval: 200 * time.Millisecond, StageDeadline: 2 * time.Minute})
			if err != nil || !res.RolledOver {
				t.Fatalf("adopt: rolled over %v, %v", res != nil && res.RolledOver, err)
			}
			after := workloads(ctx, t, env, ns)
			for _, r := range res.Applied {
				if r.Ref.Kind != "Deployment" && r.Ref.Kind != "DaemonSet" {
					continue
				}
				key := r.Ref.Kind + "/" + r.Ref.Name
				b, a := before[key], after[key]
				if drifted && r.Ref.Kind == "DaemonSet" {
					if equality.Semantic.DeepEqual(a.template, b.template) || !strings.Contains(r.Reason, "pod template written") || !strings.Contains(r.Reason, ".spec.template.spec.containers[0].image") {
						t.Errorf("%s: drifted template not written, or not said why: %s", key, r.Reason)
					}
					continue
				}
				if !equality.Semantic.DeepEqual(a.template, b.template) || !slices.Equal(a.pods, b.pods) || !strings.Contains(r.Reason, "pod template kept") {
					t.Errorf("%s: pod template written or pods replaced (%s)", key, r.Reason)
				}
				if r.Ref.Kind == "DaemonSet" && a.generation != b.generation {
					t.Errorf("%s: generation %d → %d", key, b.generation, a.generation)
				}
			}
			p, err := engine.Plan(ctx, env.Config, s, engine.Options{Observed: s.Identity, Owner: owner})
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range p.Steps {
				for _, it := range st.Items {
					if it.Action != apply.ActionUnchanged {
						t.Errorf("plan after adoption: %s %s %s %v", it.Ref, it.Action, it.Reason, it.Changes)
					}
				}
			}
		})
	}
}
