package engine

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// pagedLists makes the fake dynamic client page its lists as the API
// server does: at most ListOptions.Limit items, then a continue token
// (the index of the next item). It counts the list requests.
func pagedLists(dyn *dynamicfake.FakeDynamicClient, requests *int) {
	sorted := map[string][]runtime.Object{} // by resource and namespace, read once
	dyn.PrependReactor("list", "*", func(action clienttesting.Action) (bool, runtime.Object, error) {
		la := action.(clienttesting.ListActionImpl)
		*requests++
		key := la.GetResource().String() + "/" + la.GetNamespace()
		items, ok := sorted[key]
		if !ok {
			all, err := dyn.Tracker().List(la.GetResource(), la.GetKind(), la.GetNamespace())
			if err != nil {
				return true, nil, err
			}
			if items, err = meta.ExtractList(all); err != nil {
				return true, nil, err
			}
			slices.SortFunc(items, func(a, b runtime.Object) int {
				return strings.Compare(a.(metav1.Object).GetName(), b.(metav1.Object).GetName())
			})
			sorted[key] = items
		}
		from := 0
		if c := la.ListOptions.Continue; c != "" {
			fmt.Sscan(c, &from)
		}
		to := len(items)
		if l := int(la.ListOptions.Limit); l > 0 && from+l < to {
			to = from + l
		}
		page := &unstructured.UnstructuredList{}
		page.SetGroupVersionKind(la.GetKind().GroupVersion().WithKind(la.GetKind().Kind + "List"))
		for _, it := range items[from:to] {
			page.Items = append(page.Items, *it.(*unstructured.Unstructured))
		}
		if to < len(items) {
			page.SetContinue(fmt.Sprint(to))
		}
		return true, page, nil
	})
}

// An installation's Namespace is deleted only when it holds nothing but
// the installation's objects. Deleting a Namespace deletes everything in
// it, so a foreign object past the first page of its kind's list (here a
// person's debugging pod behind the product's 60 pods of a ReplicaSet,
// which are skipped as owned) must keep it as surely as one on the first
// page. A namespace with more objects of a kind than the check reads is
// kept, not deleted on a guess.
func TestNamespaceKeptForAForeignObjectPastTheFirstPage(t *testing.T) {
	owner := inventory.Owner{Namespace: "app", Name: "demo", Kind: inventory.KindInstallation}
	nsLive := obj("v1", "Namespace", "", "app")
	items := []plan.Item{{Ref: strategy.RefOf(nsLive), Action: apply.ActionDelete, Reason: "uninstall", Live: nsLive}}
	owned := func(n int) []runtime.Object {
		var out []runtime.Object
		for i := range n {
			p := obj("v1", "Pod", "app", fmt.Sprintf("web-%05d", i))
			p.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs"}})
			out = append(out, p)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		objects []runtime.Object
		reason  string
	}{{
		name:    "a person's pod after 60 owned pods",
		objects: append(owned(60), obj("v1", "Pod", "app", "zz-debug")),
		reason:  "Pod/app/zz-debug",
	}, {
		name:    "more pods than the check reads",
		objects: owned(maxForeignListPages*foreignListPage + 1),
		reason:  "more than",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, tc.objects...)
			var requests int
			pagedLists(dyn, &requests)
			del := &fakeDeleter{}
			inv := inventory.New(owner)
			inv.Entries[items[0].Ref] = inventory.Entry{}
			var events []Event
			deleted, kept, err := deleteItems(t.Context(), deleteClients{Deleter: del, Kinds: servedKinds, Dynamic: dyn}, inv, "", items, func(e Event) { events = append(events, e) })
			if err != nil {
				t.Fatal(err)
			}
			if len(deleted) > 0 || len(del.deleted) > 0 {
				t.Fatalf("deleted %v: the namespace holds objects that are not the installation's", del.deleted)
			}
			if len(kept) != 1 || len(events) != 1 || !strings.Contains(events[0].Reason, tc.reason) {
				t.Fatalf("kept %v, events %+v; want the namespace kept, the reason naming %q", kept, events, tc.reason)
			}
			if requests > maxForeignListPages*len(servedKinds[0].APIResources)+len(servedKinds) {
				t.Errorf("%d list requests: the check's cost is bounded by the pages it reads", requests)
			}
		})
	}
}
