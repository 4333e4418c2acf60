package engine_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

func annotate(o *unstructured.Unstructured, key, value string) *unstructured.Unstructured {
	o.SetAnnotations(map[string]string{key: value})
	return o
}

// An uninstall keeps what Helm's keeps: a CRD annotated
// helm.sh/resource-policy: keep stays, and with it a user's custom
// resource of it (argo-cd's CRDs and every Application); our own
// annotation does the same for any strategy (here written " Keep ", which
// Helm's uninstall also reads as keep). A policy other than keep deletes,
// and so does no policy. Each kept object is reported (EventKept) and
// leaves the inventory, which then goes.
func TestUninstallKeepsResourcePolicyKeep(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	group := ns + ".keep.installstrategy.test"
	s := gizmoStrategy(ns, group)
	annotate(s.Objects[0], metakeys.HelmResourcePolicyAnnotation, "keep")
	s.Objects[1] = annotate(s.Objects[1], metakeys.HelmResourcePolicyAnnotation, "delete")
	s.Objects = append(s.Objects,
		annotate(widgetCRD(t, s.Objects[0], group), metakeys.ResourcePolicyAnnotation, " Keep "),
		annotate(configMapObject(ns, "kept"), metakeys.ResourcePolicyAnnotation, "keep"))
	owner := inventory.Owner{Namespace: ns, Name: "keep"}
	if _, err := engine.Run(ctx, env.Config, s, engine.Options{Owner: owner, StageDeadline: time.Minute}); err != nil {
		t.Fatal(err)
	}
	gizmos := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "gizmos"}
	users := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": group + "/v1", "kind": "Gizmo", "metadata": map[string]any{"name": "users", "namespace": ns}}}
	if _, err := env.Dynamic.Resource(gizmos).Namespace(ns).Create(ctx, users, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var kept []string
	deleted, err := engine.Uninstall(ctx, env.Config, engine.UninstallOptions{Owner: owner, Wait: true, OnEvent: func(e engine.Event) {
		if e.Type == engine.EventKept {
			if !strings.HasPrefix(e.Reason, plan.KeptReasonPrefix) {
				t.Errorf("kept %s: reason %q", e.Ref, e.Reason)
			}
			kept = append(kept, e.Ref.String())
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	crd := func(name string) strategy.ObjectRef {
		return strategy.ObjectRef{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition", Name: name}
	}
	wantKept := []strategy.ObjectRef{crd("gizmos." + group), crd("widgets." + group), {Kind: "ConfigMap", Namespace: ns, Name: "kept"}}
	for _, ref := range wantKept {
		if !slices.Contains(kept, ref.String()) {
			t.Errorf("%s not reported kept: %v", ref, kept)
		}
		if slices.Contains(deleted, ref) {
			t.Errorf("%s deleted", ref)
		}
	}
	if len(kept) != len(wantKept) {
		t.Errorf("kept %v, want %v", kept, wantKept)
	}
	for _, name := range []string{"gizmos." + group, "widgets." + group} {
		if _, err := env.Dynamic.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("CRD %s: %v", name, err)
		}
	}
	if _, err := env.Dynamic.Resource(gizmos).Namespace(ns).Get(ctx, "users", metav1.GetOptions{}); err != nil {
		t.Errorf("the user's gizmo: %v", err)
	}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "kept", metav1.GetOptions{}); err != nil {
		t.Errorf("configmap kept: %v", err)
	}
	// resource-policy "delete" is no keep; the strategy's own Gizmo has
	// no policy.
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("configmap settings (policy delete): %v, want it deleted", err)
	}
	if _, err := env.Dynamic.Resource(gizmos).Namespace(ns).Get(ctx, "g1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("gizmo g1 of the strategy: %v, want it deleted", err)
	}
	inv, err := inventory.NewStore(env.Kube).Get(ctx, owner)
	if err != nil || inv.Exists() {
		t.Errorf("inventory after uninstall: exists %v, %v", inv != nil && inv.Exists(), err)
	}
}

// A prune keeps, as helm upgrade does, an object the new strategy drops
// whose live copy says keep: it stays in the cluster, orphaned — out of
// the inventory (Helm's next release no longer lists it either) — while
// the dropped object without the policy goes. A later strategy that holds
// the kept object again takes it back (it still carries the
// installation's labels), and from then on it is pruned as usual.
func TestPruneKeepsResourcePolicyKeep(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	owner := inventory.Owner{Namespace: ns, Name: "keep"}
	run := func(version string, objs ...*unstructured.Unstructured) *engine.Result {
		t.Helper()
		s := &strategy.Strategy{Identity: strategy.Identity{Version: version}, Objects: objs}
		res, err := engine.Run(ctx, env.Config, s, engine.Options{Owner: owner, StageDeadline: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	keptRef := strategy.ObjectRef{Kind: "ConfigMap", Namespace: ns, Name: "kept"}
	droppedRef := strategy.ObjectRef{Kind: "ConfigMap", Namespace: ns, Name: "dropped"}
	run("v1", configMapObject(ns, "stays"), annotate(configMapObject(ns, "kept"), metakeys.HelmResourcePolicyAnnotation, "keep"), configMapObject(ns, "dropped"))
	res := run("v2", configMapObject(ns, "stays"))
	if !slices.Contains(res.Pruned, droppedRef) || slices.Contains(res.Pruned, keptRef) || !slices.Contains(res.Kept, keptRef) {
		t.Fatalf("pruned %v, kept %v", res.Pruned, res.Kept)
	}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "kept", metav1.GetOptions{}); err != nil {
		t.Fatalf("configmap kept: %v", err)
	}
	invs := inventory.NewStore(env.Kube)
	inv, err := invs.Get(ctx, owner)
	if err != nil || inv.Has(keptRef) || !inv.Has(strategy.ObjectRef{Kind: "ConfigMap", Namespace: ns, Name: "stays"}) {
		t.Fatalf("inventory after prune: lists kept %v, err %v", inv.Has(keptRef), err)
	}
	// Orphaned: the next run neither deletes nor reports it.
	if res := run("v2", configMapObject(ns, "stays")); len(res.Pruned) > 0 || len(res.Kept) > 0 {
		t.Fatalf("second v2 run: pruned %v, kept %v", res.Pruned, res.Kept)
	}
	// Taken back without the policy, then pruned.
	run("v3", configMapObject(ns, "stays"), configMapObject(ns, "kept"))
	if inv, err = invs.Get(ctx, owner); err != nil || !inv.Has(keptRef) {
		t.Fatalf("inventory after v3: lists kept %v, err %v", inv.Has(keptRef), err)
	}
	if res := run("v4", configMapObject(ns, "stays")); !slices.Contains(res.Pruned, keptRef) {
		t.Fatalf("v4 pruned %v, kept %v; want kept pruned (no policy any more)", res.Pruned, res.Kept)
	}
}
