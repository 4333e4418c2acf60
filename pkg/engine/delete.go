package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// namespaceKind is the kind of the namespaces objects live in.
var namespaceKind = kinds.Namespace

// definesKinds reports whether ref is of a kind whose objects define other
// kinds (kinds.Info.DefinesKinds: CRDs).
func definesKinds(ref strategy.ObjectRef) bool {
	info, _ := kinds.Lookup(ref.GroupKind())
	return info.DefinesKinds
}

// deleteItems is the one delete path of prune and uninstall: it deletes the
// items whose action is delete, in their order (the kind table's prune
// order: webhooks and APIServices first, Namespaces and CRDs last), and
// keeps the rest (an EventKept each, with the reason). A Namespace is deleted only when it holds nothing but
// the installation's objects (see foreignObjects); otherwise it is kept,
// and reported. Deleted and kept objects leave the inventory.
func deleteItems(ctx context.Context, c deleteClients, inv *inventory.Inventory, caSecret string, items []plan.Item, emit func(Event)) (deleted, kept []strategy.ObjectRef, err error) {
	var errs []error
	crdsReady := readyCustomResources(ctx, c.Dynamic, items)
	for _, it := range items {
		if it.Action == apply.ActionDelete && definesKinds(it.Ref) {
			crdsReady()
		}
		if it.Action != apply.ActionDelete {
			kept = append(kept, it.Ref)
			if !strings.HasPrefix(it.Reason, "CRD kept") {
				delete(inv.Entries, it.Ref)
			}
			emit(Event{Type: EventKept, Ref: it.Ref, Action: it.Action, Reason: it.Reason})
			continue
		}
		if it.Ref.GroupKind() == namespaceKind {
			foreign, err := foreignObjects(ctx, c, inv, bookkeeping(inv.Owner, caSecret), it.Ref.Name)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if len(foreign) > 0 {
				kept = append(kept, it.Ref)
				delete(inv.Entries, it.Ref)
				emit(Event{Type: EventKept, Ref: it.Ref, Action: apply.ActionSkip,
					Reason: "namespace kept: it holds objects that are not this installation's, e.g. " + strings.Join(foreign, ", ")})
				continue
			}
		}
		if err := c.Deleter.Delete(ctx, it.Live); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(inv.Entries, it.Ref)
		deleted = append(deleted, it.Ref)
		emit(Event{Type: EventPruned, Ref: it.Ref, Action: apply.ActionDelete, Reason: it.Reason})
	}
	return deleted, kept, errors.Join(errs...)
}

// readyCustomResources has the API server ready to serve the custom
// resources of every CRD items delete, and returns a function that waits
// until it is. The API server creates a CRD's storage at the first request
// for its kind, and its watch cache then takes a moment to fill; when a
// CRD's deletion is that first request, the cleanup finalizer's list of
// the CRD's custom resources finds the cache still filling ("storage is
// (re)initializing"), and retries with a backoff per CRD that doubles each
// time, so a cache slow to fill kept KubeVirt's 21 CRDs for minutes
// (docs/DEVELOPMENT.md, intermittent tests). So each CRD's custom
// resources are listed first, all at once, in the background while the
// objects before the CRDs are deleted: a list the cache answers (version
// "0", no limit: an unready cache answers 429 with Retry-After, which the
// client waits out and retries). Best effort: a failed list does not keep
// the CRD, the finalizer retries as before.
func readyCustomResources(ctx context.Context, dyn dynamic.Interface, items []plan.Item) (wait func()) {
	var wg sync.WaitGroup
	for _, it := range items {
		if it.Action != apply.ActionDelete || !definesKinds(it.Ref) || it.Live == nil {
			continue
		}
		gvr, ok := strategy.DefinedResource(it.Live)
		if !ok {
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			_, _ = dyn.Resource(gvr).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		})
	}
	return wg.Wait
}

// foreignObjects names up to three objects in a namespace that are not the
// installation's: not in its inventory, not being deleted, not owned by
// another object of the namespace (pods of a ReplicaSet go with it;
// ownedInNamespace), and not made by
// Kubernetes for every namespace (kinds.Info.InEveryNamespace: the default
// ServiceAccount, the kube-root-ca.crt ConfigMap), nor of a kind Kubernetes
// makes objects of by itself (kinds.Info.MadeBySystem: Events, Endpoints of
// Services). Every namespaced kind the cluster serves and can list is
// searched, every page of it up to maxForeignListPages: a kind with more
// objects than that keeps the namespace, named as such.
func foreignObjects(ctx context.Context, c deleteClients, inv *inventory.Inventory, ours map[strategy.ObjectRef]bool, ns string) ([]string, error) {
	lists, err := c.Kinds.ServerPreferredNamespacedResources()
	if err != nil && len(lists) == 0 {
		return nil, fmt.Errorf("namespace %s: discover its kinds: %w", ns, err)
	}
	// An object owned by one of these kinds goes with its owner, which is
	// judged here itself; one owned by a cluster-scoped object (or a kind
	// not served) outlives the namespace's objects, so it is foreign.
	namespaced := map[schema.GroupKind]bool{}
	for _, l := range lists {
		if gv, err := schema.ParseGroupVersion(l.GroupVersion); err == nil {
			for _, res := range l.APIResources {
				namespaced[schema.GroupKind{Group: gv.Group, Kind: res.Kind}] = true
			}
		}
	}
	var found []string
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, res := range l.APIResources {
			if strings.Contains(res.Name, "/") || !canList(res.Verbs) || kinds.MadeBySystem(schema.GroupKind{Group: gv.Group, Kind: res.Kind}) {
				continue
			}
			ri := c.Dynamic.Resource(gv.WithResource(res.Name)).Namespace(ns)
			more, done, err := foreignOfKind(ctx, ri, res.Name, 3-len(found), func(o *unstructured.Unstructured) (string, bool) {
				ref := strategy.ObjectRef{Group: gv.Group, Kind: res.Kind, Namespace: ns, Name: o.GetName()}
				mine := inv.Has(ref) || ours[ref] || o.GetDeletionTimestamp() != nil || ownedInNamespace(o.GetOwnerReferences(), namespaced) || everyNamespaceHas(ref)
				return ref.String(), !mine
			})
			if err != nil {
				return nil, fmt.Errorf("namespace %s: %w", ns, err)
			}
			if found = append(found, more...); done {
				return found, nil
			}
		}
	}
	sort.Strings(found)
	return found, nil
}

// foreignOfKind reads the objects of one kind (ri, resource) page by page,
// at most maxForeignListPages pages, and names those foreign says are not
// the installation's, at most want. done says the search ends here: want
// were found, or the kind keeps the namespace without an object to name
// (it may not be listed, or has more objects than are read), said as the
// last name.
func foreignOfKind(ctx context.Context, ri dynamic.ResourceInterface, resource string, want int, foreign func(*unstructured.Unstructured) (string, bool)) (found []string, done bool, err error) {
	opts := metav1.ListOptions{Limit: foreignListPage}
	for range maxForeignListPages {
		ul, err := ri.List(ctx, opts)
		switch {
		case apierrors.IsForbidden(err):
			// What cannot be seen may not be ours: keep the namespace.
			return append(found, "any "+resource+" (not allowed to list them)"), true, nil
		case apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err):
			return found, false, nil
		case err != nil:
			return nil, false, fmt.Errorf("list %s: %w", resource, err)
		}
		for i := range ul.Items {
			if name, ok := foreign(&ul.Items[i]); ok {
				if found = append(found, name); len(found) == want {
					return found, true, nil
				}
			}
		}
		if opts.Continue = ul.GetContinue(); opts.Continue == "" {
			return found, false, nil
		}
	}
	// What was not read may not be ours: keep the namespace.
	return append(found, fmt.Sprintf("more than %d %s (not all checked)", maxForeignListPages*foreignListPage, resource)), true, nil
}

// ownedInNamespace reports whether refs name an owner of a namespaced
// kind: the object goes with that owner (the garbage collector deletes
// it), which foreignObjects judges in the same namespace. A reference to
// a cluster-scoped owner (a Node's mirror pod, a ClusterRole's ConfigMap)
// does not: that owner stays when the namespace goes.
func ownedInNamespace(refs []metav1.OwnerReference, namespaced map[schema.GroupKind]bool) bool {
	for _, r := range refs {
		gv, err := schema.ParseGroupVersion(r.APIVersion)
		if err == nil && namespaced[schema.GroupKind{Group: gv.Group, Kind: r.Kind}] {
			return true
		}
	}
	return false
}

// The bounds of foreignObjects' lists: it reads every page of each kind
// (an object past the first page counts as much as one on it), at most
// maxForeignListPages pages of foreignListPage objects; a kind with more
// objects in the namespace keeps it (what was not read may not be ours).
const (
	foreignListPage     = 500
	maxForeignListPages = 20
)

func canList(verbs []string) bool {
	for _, v := range verbs {
		if v == "list" {
			return true
		}
	}
	return false
}

// everyNamespaceHas reports the objects Kubernetes puts in every
// namespace.
// (kinds.Info.InEveryNamespace).
func everyNamespaceHas(ref strategy.ObjectRef) bool {
	info, _ := kinds.Lookup(ref.GroupKind())
	return info.InEveryNamespace != "" && ref.Name == info.InEveryNamespace
}

// bookkeeping returns the installation's own objects that are not strategy
// objects: its inventory ConfigMap and its CA Secret.
func bookkeeping(owner inventory.Owner, caSecret string) map[strategy.ObjectRef]bool {
	if caSecret == "" {
		caSecret = DefaultCASecret
	}
	return map[strategy.ObjectRef]bool{
		{Group: kinds.ConfigMap.Group, Kind: kinds.ConfigMap.Kind, Namespace: owner.Namespace, Name: inventory.ConfigMapName(owner)}: true,
		{Group: kinds.Secret.Group, Kind: kinds.Secret.Kind, Namespace: owner.Namespace, Name: caSecret}:                             true,
	}
}
