package plan_test

import (
	"context"
	"errors"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// snapshot is a plan.Cluster over a snapshot of live objects: no cluster,
// no client. Its write decisions are the applier's own (an applier without
// a client decides: Prepare and Decide read only its options).
type snapshot struct {
	decider  *apply.Applier
	live     map[strategy.ObjectRef]*unstructured.Unstructured
	unserved map[schema.GroupKind]bool
}

func newSnapshot(owner inventory.Owner, live ...*unstructured.Unstructured) *snapshot {
	s := &snapshot{
		decider:  apply.New(nil, nil, apply.Options{Owner: owner, Identity: strategy.Identity{Version: "v2"}}),
		live:     map[strategy.ObjectRef]*unstructured.Unstructured{},
		unserved: map[schema.GroupKind]bool{},
	}
	for _, o := range live {
		s.live[strategy.RefOf(o)] = o
	}
	return s
}

func (s *snapshot) Get(_ context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return s.GetRef(context.Background(), strategy.RefOf(obj))
}

func (s *snapshot) GetRef(_ context.Context, ref strategy.ObjectRef) (*unstructured.Unstructured, error) {
	if o, ok := s.live[ref]; ok && !s.unserved[ref.GroupKind()] {
		return o.DeepCopy(), nil
	}
	return nil, nil
}

func (s *snapshot) List(_ context.Context, gk schema.GroupKind, _ string, selector string) ([]*unstructured.Unstructured, error) {
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for ref, o := range s.live {
		if ref.GroupKind() == gk && sel.Matches(labels.Set(o.GetLabels())) {
			out = append(out, o.DeepCopy())
		}
	}
	return out, nil
}

func (s *snapshot) Mapping(ref strategy.ObjectRef, _ string) (*meta.RESTMapping, error) {
	if s.unserved[ref.GroupKind()] {
		return nil, &apply.NotServedError{Ref: ref}
	}
	return &meta.RESTMapping{}, nil
}

func (s *snapshot) Options() apply.Options { return s.decider.Options() }

func (s *snapshot) Prepare(obj, live *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return s.decider.Prepare(obj, live)
}

func (s *snapshot) Decide(prepared, live *unstructured.Unstructured) apply.Result {
	return s.decider.Decide(prepared, live)
}

// ours returns obj as the installation wrote it (labels, applied hash).
func (s *snapshot) ours(t *testing.T, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	p, err := s.decider.Prepare(obj, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// dryRuns is a plan.Writer recording the dry runs it is asked for and
// refusing the objects in refuse.
type dryRuns struct {
	mu     sync.Mutex
	asked  []strategy.ObjectRef
	refuse map[string]error
	s      *snapshot
}

func (d *dryRuns) Apply(ctx context.Context, obj *unstructured.Unstructured) (apply.Result, error) {
	d.mu.Lock()
	d.asked = append(d.asked, strategy.RefOf(obj))
	d.mu.Unlock()
	if err := d.refuse[obj.GetName()]; err != nil {
		return apply.Result{Ref: strategy.RefOf(obj)}, err
	}
	live, _ := d.s.Get(ctx, obj)
	p, err := d.s.Prepare(obj, live)
	if err != nil {
		return apply.Result{}, err
	}
	return d.s.Decide(p, live), nil
}

func (d *dryRuns) askedFor(name string) bool {
	for _, r := range d.asked {
		if r.Name == name {
			return true
		}
	}
	return false
}

func object(apiVersion, kind, namespace, name string, fields map[string]any) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind}}
	for k, v := range fields {
		o.Object[k] = v
	}
	o.SetNamespace(namespace)
	o.SetName(name)
	return o
}

func crd(group, kind, plural string) *unstructured.Unstructured {
	return object("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", plural+"."+group, map[string]any{
		"spec": map[string]any{"group": group, "names": map[string]any{"kind": kind, "plural": plural}, "scope": "Namespaced",
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true}}},
	})
}

var owner = inventory.Owner{Namespace: "ops", Name: "demo", Kind: inventory.KindPlugin}

func itemsByName(p *plan.Plan) map[string]plan.Item {
	out := map[string]plan.Item{}
	for _, st := range p.Steps {
		for _, it := range st.Items {
			out[it.Ref.Name] = it
		}
	}
	return out
}

// TestObserveDecidesEachWriteWithoutACluster covers the write decisions of
// Observe over a snapshot: what is created, left unchanged, updated (and
// dry-run), refused by the dry run, skipped as not served, or a conflict.
func TestObserveDecidesEachWriteWithoutACluster(t *testing.T) {
	cm := func(name, value string) *unstructured.Unstructured {
		return object("v1", "ConfigMap", "app", name, map[string]any{"data": map[string]any{"k": value}})
	}
	ns := object("v1", "Namespace", "", "app", nil)
	widget := object("example.com/v1", "Widget", "app", "w", map[string]any{"spec": map[string]any{"size": int64(1)}})
	gadget := object("other.example/v1", "Gadget", "app", "g", nil)
	s := &strategy.Strategy{Identity: strategy.Identity{Version: "v2"}, Objects: []*unstructured.Unstructured{
		ns, crd("example.com", "Widget", "widgets"), widget, gadget,
		cm("fresh", "1"), cm("same", "1"), cm("drifted", "1"), cm("changed", "1"), cm("refused", "1"), cm("foreign", "1"), cm("theirs", "1"),
	}}
	snap := newSnapshot(owner)
	snap.unserved[schema.GroupKind{Group: "example.com", Kind: "Widget"}] = true
	snap.unserved[schema.GroupKind{Group: "other.example", Kind: "Gadget"}] = true
	for _, o := range []*unstructured.Unstructured{ns, cm("same", "1"), cm("drifted", "1"), cm("changed", "0"), cm("refused", "0")} {
		snap.live[strategy.RefOf(o)] = snap.ours(t, o)
	}
	// Someone edited drifted after the installation wrote it.
	_ = unstructured.SetNestedField(snap.live[strategy.RefOf(cm("drifted", ""))].Object, "edited", "data", "k")
	snap.live[strategy.RefOf(cm("foreign", ""))] = cm("foreign", "by hand")
	theirs := cm("theirs", "1")
	other := inventory.Owner{Namespace: "ops", Name: "other", Kind: inventory.KindPlugin}
	theirs.SetLabels(other.Labels())
	theirs.SetAnnotations(map[string]string{metakeys.AppliedHashAnnotation: "x"})
	snap.live[strategy.RefOf(theirs)] = theirs

	dry := &dryRuns{s: snap, refuse: map[string]error{"refused": errors.New("admission webhook denied the request")}}
	p := plan.Build(s, plan.Options{})
	err := plan.ObserveItems(t.Context(), snap, dry, p, s, plan.ObserveOptions{})

	var refused *plan.DryRunError
	if !errors.As(err, &refused) || refused.Ref.Name != "refused" || !strings.Contains(err.Error(), "admission webhook denied") {
		t.Fatalf("ObserveItems error = %v, want the dry-run refusal of ConfigMap refused", err)
	}
	got := itemsByName(p)
	for _, tc := range []struct {
		name   string
		action apply.Action
		reason string
		dryRun bool
	}{
		{"fresh", apply.ActionCreate, "", true},
		{"same", apply.ActionUnchanged, "", false},
		{"drifted", apply.ActionUpdate, "drift at .data.k", true},
		{"changed", apply.ActionUpdate, "strategy changed", true},
		{"refused", apply.ActionUpdate, "admission webhook denied", true},
		{"foreign", apply.ActionConflict, "not applied by installstrategy", false},
		{"theirs", apply.ActionConflict, "", false},
		{"w", apply.ActionCreate, "kind served once CRD widgets.example.com of this strategy is established", false},
		{"g", apply.ActionSkip, "is not served by the cluster", false},
	} {
		it := got[tc.name]
		if it.Action != tc.action || !strings.Contains(it.Reason, tc.reason) {
			t.Errorf("%s: action %q reason %q, want %q with %q", tc.name, it.Action, it.Reason, tc.action, tc.reason)
		}
		if dry.askedFor(tc.name) != tc.dryRun {
			t.Errorf("%s: dry run asked = %v, want %v", tc.name, dry.askedFor(tc.name), tc.dryRun)
		}
	}
}

// TestObserveSkipsTheDryRunInANamespaceStillToCreate: a dry-run create in
// a namespace that does not exist yet would fail; the write is planned
// without it.
func TestObserveSkipsTheDryRunInANamespaceStillToCreate(t *testing.T) {
	cm := object("v1", "ConfigMap", "later", "c", nil)
	s := &strategy.Strategy{Objects: []*unstructured.Unstructured{object("v1", "Namespace", "", "later", nil), cm}}
	snap := newSnapshot(owner)
	dry := &dryRuns{s: snap}
	p := plan.Build(s, plan.Options{})
	if err := plan.ObserveItems(t.Context(), snap, dry, p, s, plan.ObserveOptions{}); err != nil {
		t.Fatal(err)
	}
	if it := itemsByName(p)["c"]; it.Action != apply.ActionCreate {
		t.Errorf("ConfigMap c: %q, want create", it.Action)
	}
	if dry.askedFor("c") || !dry.askedFor("later") {
		t.Errorf("dry runs asked for %v, want the Namespace only", dry.asked)
	}
}

// TestObserveDoesNotRerunACompletedJob: a Job the inventory records as
// completed with the same applied hash is done, not missing.
func TestObserveDoesNotRerunACompletedJob(t *testing.T) {
	job := object("batch/v1", "Job", "app", "migrate", map[string]any{"spec": map[string]any{"template": map[string]any{}}})
	s := &strategy.Strategy{Identity: strategy.Identity{Version: "v2"}, Objects: []*unstructured.Unstructured{job}}
	snap := newSnapshot(owner)
	prepared := snap.ours(t, job)
	for _, tc := range []struct {
		hash string
		want apply.Action
	}{
		{prepared.GetAnnotations()[metakeys.AppliedHashAnnotation], apply.ActionUnchanged},
		{"another-strategy", apply.ActionCreate},
	} {
		inv := inventory.New(owner)
		inv.Entries[strategy.RefOf(job)] = inventory.Entry{ObjectRef: strategy.RefOf(job), Hash: tc.hash}
		p := plan.Build(s, plan.Options{})
		if err := plan.ObserveItems(t.Context(), snap, &dryRuns{s: snap}, p, s, plan.ObserveOptions{Inventory: inv, NoDryRun: true}); err != nil {
			t.Fatal(err)
		}
		if it := itemsByName(p)["migrate"]; it.Action != tc.want {
			t.Errorf("recorded hash %q: %q (%s), want %q", tc.hash, it.Action, it.Reason, tc.want)
		}
	}
}

// TestPrunableDecidesWhatIsDeletedAndWhatIsKept covers prune's decisions
// over a snapshot: only the installation's own objects that the strategy
// dropped are deleted; foreign objects, objects kept by their resource
// policy and CRDs (without the flag) are listed as skipped; objects gone
// are not listed; deletion follows the kind table's prune order.
func TestPrunableDecidesWhatIsDeletedAndWhatIsKept(t *testing.T) {
	snap := newSnapshot(owner)
	kept := object("v1", "ConfigMap", "app", "kept", nil)
	keptOurs := snap.ours(t, kept)
	keptOurs.SetAnnotations(map[string]string{metakeys.AppliedHashAnnotation: "h", metakeys.HelmResourcePolicyAnnotation: "keep"})
	foreign := object("v1", "ConfigMap", "app", "relabelled", nil)
	for _, o := range []*unstructured.Unstructured{
		snap.ours(t, object("v1", "Namespace", "", "app", nil)),
		snap.ours(t, object("apps/v1", "Deployment", "app", "old", nil)),
		snap.ours(t, object("v1", "ConfigMap", "app", "still", nil)),
		snap.ours(t, crd("example.com", "Widget", "widgets")),
		keptOurs, foreign,
	} {
		snap.live[strategy.RefOf(o)] = o
	}
	inv := inventory.New(owner)
	for ref := range snap.live {
		inv.Add(ref)
	}
	inv.Add(strategy.ObjectRef{Kind: "ConfigMap", Namespace: "app", Name: "gone"})
	s := &strategy.Strategy{Objects: []*unstructured.Unstructured{object("v1", "ConfigMap", "app", "still", nil)}}

	for _, pruneCRDs := range []bool{false, true} {
		items, err := plan.Prunable(t.Context(), snap, s, plan.ObserveOptions{Inventory: inv, PruneCRDs: pruneCRDs})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, it := range items {
			got = append(got, it.Ref.Kind+"/"+it.Ref.Name+" "+string(it.Action))
		}
		crdAction := "skip"
		if pruneCRDs {
			crdAction = "delete"
		}
		// Deployments go before ConfigMaps, Namespaces and CRDs last
		// (kinds.Info.PruneOrder); "still" is in the strategy, "gone" is
		// not in the cluster.
		want := []string{"Deployment/old delete", "ConfigMap/kept skip", "ConfigMap/relabelled skip", "Namespace/app delete", "CustomResourceDefinition/widgets.example.com " + crdAction}
		if strings.Join(got, ", ") != strings.Join(want, ", ") {
			t.Errorf("PruneCRDs=%v: prune = %v, want %v", pruneCRDs, got, want)
		}
		for _, it := range items {
			switch it.Ref.Name {
			case "kept":
				if !strings.HasPrefix(it.Reason, plan.KeptReasonPrefix) {
					t.Errorf("kept: reason %q, want the resource policy", it.Reason)
				}
			case "relabelled":
				if !strings.Contains(it.Reason, "no longer carries the labels") {
					t.Errorf("relabelled: reason %q, want the missing labels", it.Reason)
				}
			}
		}
	}

	all, err := plan.Removable(t.Context(), snap, plan.ObserveOptions{Inventory: inv})
	if err != nil {
		t.Fatal(err)
	}
	deleted := map[string]bool{}
	for _, it := range all {
		deleted[it.Ref.Name] = it.Action == apply.ActionDelete
	}
	if !deleted["still"] || deleted["relabelled"] || deleted["kept"] || len(all) != 6 {
		t.Errorf("uninstall deletes %v (of %d listed), want every object of ours but the kept one", deleted, len(all))
	}
}

// TestLegacyObjectsNeedTheAppliedHash: the first inventory of an
// Installation an older installstrategy applied starts from the objects
// carrying its managed-by value and the applied hash, not from a
// ConfigMap that carries only the label.
func TestLegacyObjectsNeedTheAppliedHash(t *testing.T) {
	inst := inventory.Owner{Namespace: "ops", Name: "demo", Kind: inventory.KindInstallation}
	snap := newSnapshot(inst)
	legacy := map[string]string{metakeys.ManagedByLabel: inventory.LegacyManagedBy(inst.Namespace, inst.Name)}
	withHash := object("apps/v1", "Deployment", "app", "old", nil)
	withHash.SetLabels(legacy)
	withHash.SetAnnotations(map[string]string{metakeys.AppliedHashAnnotation: "h"})
	labelOnly := object("v1", "ConfigMap", "app", "stored-strategy", nil)
	labelOnly.SetLabels(legacy)
	for _, o := range []*unstructured.Unstructured{withHash, labelOnly} {
		snap.live[strategy.RefOf(o)] = o
	}
	got, err := plan.LegacyObjects(t.Context(), snap)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != strategy.RefOf(withHash) {
		t.Errorf("LegacyObjects = %v, want only %s", got, strategy.RefOf(withHash))
	}
	plugin, err := plan.LegacyObjects(t.Context(), newSnapshot(owner))
	if err != nil || plugin != nil {
		t.Errorf("LegacyObjects of a plugin installation = %v, %v; want none", plugin, err)
	}
}
