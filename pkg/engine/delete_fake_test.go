package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// The delete path of prune and uninstall (deleteItems) over fakes of the
// interfaces it takes (deleter, namespacedKinds, a dynamic client): which
// items it deletes, which it keeps and why, and what leaves the
// inventory. The cluster tests (the uninstall and prune tests here,
// internal/cli's TestClusterManifestStyles for a namespace kept) show the
// same against a real API server.

// fakeDeleter records deletes; fail fails the delete of the named refs.
type fakeDeleter struct {
	deleted []string
	fail    map[string]bool
}

func (d *fakeDeleter) Delete(_ context.Context, live *unstructured.Unstructured) error {
	ref := strategy.RefOf(live).String()
	if d.fail[ref] {
		return errors.New("delete " + ref + ": refused")
	}
	d.deleted = append(d.deleted, ref)
	return nil
}

func (d *fakeDeleter) WaitGone(context.Context, *unstructured.Unstructured) error { return nil }

// fakeKinds is a discovery answer.
type fakeKinds []*metav1.APIResourceList

func (k fakeKinds) ServerPreferredNamespacedResources() ([]*metav1.APIResourceList, error) {
	return k, nil
}

var _ deleter = (*fakeDeleter)(nil)
var _ namespacedKinds = fakeKinds(nil)

// servedKinds are the namespaced kinds of the fake cluster: its own kinds
// and the kinds Kubernetes makes objects of by itself.
var servedKinds = fakeKinds{
	{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: []string{"list"}},
		{Name: "serviceaccounts", Kind: "ServiceAccount", Namespaced: true, Verbs: []string{"list"}},
		{Name: "secrets", Kind: "Secret", Namespaced: true, Verbs: []string{"list"}},
		{Name: "pods", Kind: "Pod", Namespaced: true, Verbs: []string{"list"}},
		{Name: "pods/log", Kind: "Pod", Namespaced: true, Verbs: []string{"get"}},
		{Name: "bindings", Kind: "Binding", Namespaced: true, Verbs: []string{"create"}},
		{Name: "events", Kind: "Event", Namespaced: true, Verbs: []string{"list"}},
		{Name: "endpoints", Kind: "Endpoints", Namespaced: true, Verbs: []string{"list"}},
	}},
	{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
		{Name: "replicasets", Kind: "ReplicaSet", Namespaced: true, Verbs: []string{"list"}},
	}},
	{GroupVersion: "events.k8s.io/v1", APIResources: []metav1.APIResource{
		{Name: "events", Kind: "Event", Namespaced: true, Verbs: []string{"list"}},
	}},
	{GroupVersion: "discovery.k8s.io/v1", APIResources: []metav1.APIResource{
		{Name: "endpointslices", Kind: "EndpointSlice", Namespaced: true, Verbs: []string{"list"}},
	}},
}

var listKinds = map[schema.GroupVersionResource]string{
	{Version: "v1", Resource: "configmaps"}:                                "ConfigMapList",
	{Version: "v1", Resource: "serviceaccounts"}:                           "ServiceAccountList",
	{Version: "v1", Resource: "secrets"}:                                   "SecretList",
	{Version: "v1", Resource: "pods"}:                                      "PodList",
	{Version: "v1", Resource: "events"}:                                    "EventList",
	{Version: "v1", Resource: "endpoints"}:                                 "EndpointsList",
	{Group: "apps", Version: "v1", Resource: "replicasets"}:                "ReplicaSetList",
	{Group: "events.k8s.io", Version: "v1", Resource: "events"}:            "EventList",
	{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}: "EndpointSliceList",
	{Group: "example.com", Version: "v1", Resource: "widgets"}:             "WidgetList",
}

// systemMadeObjects are what Kubernetes puts in a namespace by itself.
func systemMadeObjects(ns string) []runtime.Object {
	pod := obj("v1", "Pod", ns, "web-1")
	pod.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs"}})
	return []runtime.Object{
		obj("v1", "ServiceAccount", ns, "default"),
		obj("v1", "ConfigMap", ns, "kube-root-ca.crt"),
		obj("v1", "Event", ns, "web.1"),
		obj("events.k8s.io/v1", "Event", ns, "web.2"),
		obj("v1", "Endpoints", ns, "web"),
		obj("discovery.k8s.io/v1", "EndpointSlice", ns, "web-abc"),
		pod,
	}
}

func TestDeleteItemsWithFakes(t *testing.T) {
	owner := inventory.Owner{Namespace: "app", Name: "demo", Kind: inventory.KindInstallation}
	nsItem := func(name string) plan.Item {
		live := obj("v1", "Namespace", "", name)
		return plan.Item{Ref: strategy.RefOf(live), Action: apply.ActionDelete, Reason: "not in the strategy", Live: live}
	}
	item := func(o *unstructured.Unstructured, action apply.Action, reason string) plan.Item {
		return plan.Item{Ref: strategy.RefOf(o), Action: action, Reason: reason, Live: o}
	}
	deployment := obj("apps/v1", "Deployment", "app", "web")
	crd := defining("example.com", "Widget", "widgets")
	for _, tc := range []struct {
		name    string
		items   []plan.Item
		objects []runtime.Object
		// forbidden is a resource the fake cluster refuses to list.
		forbidden string
		fail      map[string]bool
		// deleted and kept are refs; reasons are substrings of the
		// EventKept reasons, by ref.
		deleted, kept []string
		reasons       map[string]string
		// inInventory are the refs left in the inventory.
		inInventory []string
		wantErr     bool
	}{{
		name:    "a namespace holding only what Kubernetes makes, the installation's and owned objects is deleted",
		items:   []plan.Item{item(deployment, apply.ActionDelete, "pruned"), nsItem("app")},
		objects: append(systemMadeObjects("app"), obj("v1", "ConfigMap", "app", inventory.ConfigMapName(owner)), obj("v1", "ConfigMap", "app", "settings")),
		deleted: []string{"Deployment.apps/app/web", "Namespace/app"},
	}, {
		name:    "a namespace holding a foreign object is kept, with the object named",
		items:   []plan.Item{nsItem("app")},
		objects: append(systemMadeObjects("app"), obj("v1", "ConfigMap", "app", "theirs")),
		kept:    []string{"Namespace/app"},
		reasons: map[string]string{"Namespace/app": "ConfigMap/app/theirs"},
	}, {
		name:    "a namespace holding an object owned by a cluster-scoped object is kept: its owner stays",
		items:   []plan.Item{nsItem("app")},
		objects: append(systemMadeObjects("app"), ownedBy(obj("v1", "ConfigMap", "app", "theirs"), "rbac.authorization.k8s.io/v1", "ClusterRole")),
		kept:    []string{"Namespace/app"},
		reasons: map[string]string{"Namespace/app": "ConfigMap/app/theirs"},
	}, {
		name:      "a namespace with a kind that may not be listed is kept",
		items:     []plan.Item{nsItem("app")},
		objects:   systemMadeObjects("app"),
		forbidden: "secrets",
		kept:      []string{"Namespace/app"},
		reasons:   map[string]string{"Namespace/app": "any secrets (not allowed to list them)"},
	}, {
		name:        "items not to delete are kept; a kept CRD stays in the inventory, the others leave it",
		items:       []plan.Item{item(deployment, apply.ActionSkip, "not ours any more"), item(crd, apply.ActionSkip, "CRD kept: prune CRDs is off")},
		kept:        []string{"Deployment.apps/app/web", "CustomResourceDefinition.apiextensions.k8s.io/widgets.example.com"},
		reasons:     map[string]string{"Deployment.apps/app/web": "not ours any more"},
		inInventory: []string{"CustomResourceDefinition.apiextensions.k8s.io/widgets.example.com"},
	}, {
		name:        "a delete that fails is reported, stays in the inventory, and the rest go on",
		items:       []plan.Item{item(deployment, apply.ActionDelete, "pruned"), item(obj("v1", "ConfigMap", "app", "settings"), apply.ActionDelete, "pruned")},
		fail:        map[string]bool{"Deployment.apps/app/web": true},
		deleted:     []string{"ConfigMap/app/settings"},
		inInventory: []string{"Deployment.apps/app/web"},
		wantErr:     true,
	}, {
		name:    "a CRD is deleted after the objects before it",
		items:   []plan.Item{item(deployment, apply.ActionDelete, "pruned"), item(crd, apply.ActionDelete, "pruned")},
		deleted: []string{"Deployment.apps/app/web", "CustomResourceDefinition.apiextensions.k8s.io/widgets.example.com"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, tc.objects...)
			if tc.forbidden != "" {
				dyn.PrependReactor("list", tc.forbidden, func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: tc.forbidden}, "", errors.New("no"))
				})
			}
			del := &fakeDeleter{fail: tc.fail}
			inv := inventory.New(owner)
			inv.Entries[strategy.ObjectRef{Kind: "ConfigMap", Namespace: "app", Name: "settings"}] = inventory.Entry{}
			for _, it := range tc.items {
				inv.Entries[it.Ref] = inventory.Entry{}
			}
			var events []Event
			deleted, kept, err := deleteItems(t.Context(), deleteClients{Deleter: del, Kinds: servedKinds, Dynamic: dyn}, inv, "", tc.items, func(e Event) { events = append(events, e) })
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want one: %v", err, tc.wantErr)
			}
			if got := refStrings(deleted); !slices.Equal(got, tc.deleted) {
				t.Errorf("deleted %v, want %v", got, tc.deleted)
			}
			if !slices.Equal(del.deleted, tc.deleted) {
				t.Errorf("the deleter was asked to delete %v, want %v", del.deleted, tc.deleted)
			}
			if got := refStrings(kept); !slices.Equal(got, tc.kept) {
				t.Errorf("kept %v, want %v", got, tc.kept)
			}
			for _, e := range events {
				want := EventPruned
				if slices.Contains(tc.kept, e.Ref.String()) {
					want = EventKept
				}
				if e.Type != want {
					t.Errorf("%s: event %s (%s), want %s", e.Ref, e.Type, e.Reason, want)
				}
				if r, ok := tc.reasons[e.Ref.String()]; ok && !strings.Contains(e.Reason, r) {
					t.Errorf("%s: reason %q, want it to say %q", e.Ref, e.Reason, r)
				}
			}
			if len(events) != len(tc.deleted)+len(tc.kept) {
				t.Errorf("%d events, want one per deleted or kept item: %+v", len(events), events)
			}
			for _, it := range tc.items {
				if got, want := inv.Has(it.Ref), slices.Contains(tc.inInventory, it.Ref.String()); got != want {
					t.Errorf("%s in the inventory: %v, want %v", it.Ref, got, want)
				}
			}
		})
	}
}

// ownedBy gives o an owner reference to an object of kind.
func ownedBy(o *unstructured.Unstructured, apiVersion, kind string) *unstructured.Unstructured {
	o.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: "owner", UID: "owner"}})
	return o
}

func refStrings(refs []strategy.ObjectRef) []string {
	var out []string
	for _, r := range refs {
		out = append(out, r.String())
	}
	return out
}
