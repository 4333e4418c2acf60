package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// A fake cluster for the engine's applier interface (cluster.go): the live
// objects in client-go's fake dynamic client, the kinds it serves in a REST
// mapper built from the kind table, and a fake typed client (pods, events,
// inventories, discovery). Reads and every decision (Prepare, Decide,
// DefaultNamespaces, Mapping) are the real *apply.Applier's over that
// dynamic client; only Apply is the fake's, since the fake API server
// knows neither server-side apply nor dry runs: it creates or updates the
// prepared object (an update keeps the live status and generation: no
// controller here observes a new one), and writes nothing for a dry run.

// fakeCluster holds what the fake appliers of one test share.
type fakeCluster struct {
	dyn    *dynamicfake.FakeDynamicClient
	mapper meta.ResettableRESTMapper
	kube   *kubefake.Clientset
}

// resettable is a REST mapper whose Reset forgets nothing.
type resettable struct{ meta.RESTMapper }

func (resettable) Reset() {}

// newFakeCluster returns a fake cluster serving the kinds of the kind table
// and, for each extra CRD, its kind at its versions, holding objs.
func newFakeCluster(t *testing.T, extra []schema.GroupVersionKind, extraResources []string, objs ...runtime.Object) *fakeCluster {
	t.Helper()
	var mappings []func(m *meta.DefaultRESTMapper)
	var versions []schema.GroupVersion
	listKinds := map[schema.GroupVersionResource]string{}
	add := func(gvk schema.GroupVersionKind, resource string, namespaced bool) {
		versions = append(versions, gvk.GroupVersion())
		scope := meta.RESTScopeRoot
		if namespaced {
			scope = meta.RESTScopeNamespace
		}
		gvr := gvk.GroupVersion().WithResource(resource)
		mappings = append(mappings, func(m *meta.DefaultRESTMapper) {
			m.AddSpecific(gvk, gvr, gvk.GroupVersion().WithResource(strings.ToLower(gvk.Kind)), scope)
		})
		listKinds[gvr] = gvk.Kind + "List"
	}
	for _, info := range kinds.All() {
		if info.Resource != "" {
			add(info.GroupKind.WithVersion(info.Version), info.Resource, info.Namespaced)
		}
	}
	add(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, "pods", true)
	add(schema.GroupVersionKind{Version: "v1", Kind: "Event"}, "events", true)
	for i, gvk := range extra {
		add(gvk, extraResources[i], true)
	}
	// The versions are the mapper's preferred ones, which a read at no
	// version (GetRef) takes.
	m := meta.NewDefaultRESTMapper(versions)
	for _, f := range mappings {
		f(m)
	}
	kube := kubefake.NewClientset()
	// The fake typed client sets no resourceVersion, by which the
	// inventory store tells a create from an update.
	kube.PrependReactor("create", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if o, err := meta.Accessor(a.(clienttesting.CreateAction).GetObject()); err == nil && o.GetResourceVersion() == "" {
			o.SetResourceVersion("1")
		}
		return false, nil, nil
	})
	c := &fakeCluster{
		dyn:    dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, objs...),
		mapper: resettable{m},
		kube:   kube,
	}
	// What the engine writes through the typed client (the CA Secret,
	// inventories) it reads back through the applier: those writes are
	// mirrored into the dynamic client's objects.
	for _, verb := range []string{"create", "update", "delete"} {
		for _, resource := range []string{"secrets", "configmaps"} {
			kube.PrependReactor(verb, resource, c.mirror)
		}
	}
	return c
}

// mirror copies a typed write of a Secret or ConfigMap into the dynamic
// client's objects, unseen by its list of actions (writes). It leaves the
// write itself to the typed client.
func (c *fakeCluster) mirror(a clienttesting.Action) (bool, runtime.Object, error) {
	gvr := a.GetResource()
	tracker := c.dyn.Tracker()
	kind := map[string]string{"secrets": "Secret", "configmaps": "ConfigMap"}[gvr.Resource]
	var typed runtime.Object
	switch a := a.(type) {
	case clienttesting.DeleteAction:
		_ = tracker.Delete(gvr, a.GetNamespace(), a.GetName())
		return false, nil, nil
	case clienttesting.CreateAction:
		typed = a.GetObject()
	case clienttesting.UpdateAction:
		typed = a.GetObject()
	default:
		return false, nil, nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
	if err != nil {
		return true, nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion("v1")
	u.SetKind(kind)
	if _, err := c.kube.Tracker().Get(gvr, u.GetNamespace(), u.GetName()); err == nil && a.GetVerb() == "create" {
		return false, nil, nil // the typed client refuses it
	}
	if _, err := tracker.Get(gvr, u.GetNamespace(), u.GetName()); err == nil {
		_ = tracker.Update(gvr, u, u.GetNamespace())
		return false, nil, nil
	}
	_ = tracker.Create(gvr, u, u.GetNamespace())
	return false, nil, nil
}

// applier returns a fake applier over the cluster with opts.
func (c *fakeCluster) applier(opts apply.Options) fakeApplier {
	return fakeApplier{Applier: apply.New(c.dyn, c.mapper, opts)}
}

// reconciler returns a Reconciler over the cluster.
func (c *fakeCluster) reconciler() *Reconciler {
	return &Reconciler{a: c.applier(apply.Options{}), kube: c.kube}
}

// writes returns the writes the dynamic client was asked for, as
// "VERB resource[/subresource] [namespace/]name", and forgets them.
func (c *fakeCluster) writes() []string {
	var out []string
	for _, a := range c.dyn.Actions() {
		var name string
		switch a := a.(type) {
		case clienttesting.CreateAction:
			o, _ := a.GetObject().(*unstructured.Unstructured)
			name = o.GetName()
		case clienttesting.UpdateAction:
			o, _ := a.GetObject().(*unstructured.Unstructured)
			name = o.GetName()
		case clienttesting.DeleteAction:
			name = a.GetName()
		case clienttesting.PatchAction:
			name = a.GetName()
		default:
			continue
		}
		res := a.GetResource().Resource
		if sub := a.GetSubresource(); sub != "" {
			res += "/" + sub
		}
		if ns := a.GetNamespace(); ns != "" {
			name = ns + "/" + name
		}
		out = append(out, a.GetVerb()+" "+res+" "+name)
	}
	c.dyn.ClearActions()
	return out
}

// live returns the object the fake cluster holds for obj, nil when none.
func (c *fakeCluster) live(t *testing.T, o *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	got, err := c.applier(apply.Options{}).Get(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// fakeApplier is a real *apply.Applier over the fake cluster whose Apply
// is the fake's (see above).
type fakeApplier struct{ *apply.Applier }

func (f fakeApplier) Apply(ctx context.Context, obj *unstructured.Unstructured) (apply.Result, error) {
	ref := strategy.RefOf(obj)
	ri, err := f.Resource(obj)
	var notServed *apply.NotServedError
	if errors.As(err, &notServed) {
		return apply.Result{Ref: ref, Action: apply.ActionSkip, Reason: notServed.Error()}, nil
	}
	if err != nil {
		return apply.Result{Ref: ref}, err
	}
	live, err := f.Get(ctx, obj)
	if err != nil {
		return apply.Result{Ref: ref}, err
	}
	prepared, err := f.Prepare(obj, live)
	if err != nil {
		return apply.Result{Ref: ref}, err
	}
	res := f.Decide(prepared, live)
	switch {
	case res.Action == apply.ActionUnchanged:
		return res, nil
	case res.Action == apply.ActionConflict:
		return res, &apply.ConflictError{Ref: ref}
	case f.Options().DryRun:
		return res, nil
	}
	w := prepared.DeepCopy()
	if live == nil {
		w.SetUID(types.UID("uid-" + ref.String()))
		w.SetGeneration(1)
		res.Object, err = ri.Create(ctx, w, metav1.CreateOptions{FieldManager: f.Options().FieldManager})
	} else {
		w.SetUID(live.GetUID())
		w.SetResourceVersion(live.GetResourceVersion())
		w.SetGeneration(live.GetGeneration())
		if st, ok := live.Object["status"]; ok {
			w.Object["status"] = st
		}
		res.Object, err = ri.Update(ctx, w, metav1.UpdateOptions{FieldManager: f.Options().FieldManager})
	}
	if err != nil {
		return res, fmt.Errorf("apply %s: %w", ref, err)
	}
	res.Generation = res.Object.GetGeneration()
	return res, nil
}

func (f fakeApplier) WithOptions(opts apply.Options) applier {
	return fakeApplier{f.Applier.WithOptions(opts)}
}

func (f fakeApplier) Probe(ctx context.Context, objs []*unstructured.Unstructured) applier {
	return fakeApplier{f.Applier.Probe(ctx, objs)}
}

func (f fakeApplier) DryRunner() applier { return fakeApplier{f.Applier.DryRunner()} }

func (f fakeApplier) Direct() applier { return fakeApplier{f.Applier.Direct()} }

func (f fakeApplier) WithCache(c apply.Cache) applier { return fakeApplier{f.Applier.WithCache(c)} }

var _ applier = fakeApplier{}
