package apply

import (
	"context"
	"sync"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// ProbeMin is the number of objects of one resource and namespace, none of
// them in the cache, from which Probe lists that resource instead of
// letting each apply read its object: one request instead of one each.
const ProbeMin = 2

// probePage is the most objects one probe list reads: a resource and
// namespace holding more (other products' objects) is not listed, since a
// second page would cost what the reads it saves do.
const probePage = 500

// Probe returns an applier for applying objs, sharing everything with a,
// that already knows which of them do not exist. A cache holds only
// installations' objects, so an object it lacks may still exist (someone
// else's, refused as a conflict) and is read from the API server before
// its write; on a first install that is one read per object. Probe lists,
// metadata only, each resource and namespace where at least ProbeMin of
// objs are not in the cache, and the returned applier's reads of an
// object the list did not hold answer "absent" without a request until
// its first write of it (which creates it; reads after that write,
// whether it succeeded or not, ask the API server). Objects the list
// holds are read as usual. A list that fails, is refused or would take more
// than one page is dropped: those objects are read one by one, as without
// Probe. An object created between the list and the write is merged into
// as it would be between a read and the write. Without a metadata client
// (see New) or for a dry run, Probe returns a.
func (a *Applier) Probe(ctx context.Context, objs []*unstructured.Unstructured) *Applier {
	if a.meta == nil || a.opts.DryRun {
		return a
	}
	type group struct {
		gvr       schema.GroupVersionResource
		namespace string
	}
	groups := map[group][]*unstructured.Unstructured{}
	for _, obj := range objs {
		m, err := a.Mapping(strategy.RefOf(obj), obj.GroupVersionKind().Version)
		if err != nil {
			continue
		}
		if a.cache != nil && !a.noCache {
			cached, ok, err := a.cache.Cached(ctx, obj.GroupVersionKind(), obj.GetNamespace(), obj.GetName())
			if err == nil && ok && a.usable(obj, cached) {
				continue
			}
		}
		g := group{gvr: m.Resource}
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			g.namespace = obj.GetNamespace()
		}
		groups[g] = append(groups[g], obj)
	}
	absent := new(sync.Map)
	var eg errgroup.Group
	eg.SetLimit(8)
	for g, members := range groups {
		if len(members) < ProbeMin {
			continue
		}
		eg.Go(func() error {
			list, err := a.meta.Resource(g.gvr).Namespace(g.namespace).List(ctx, metav1.ListOptions{Limit: probePage})
			if err != nil || list.Continue != "" {
				return nil
			}
			present := make(map[string]bool, len(list.Items))
			for _, it := range list.Items {
				present[it.Name] = true
			}
			for _, obj := range members {
				if !present[obj.GetName()] {
					absent.Store(keyOf(obj), struct{}{})
				}
			}
			return nil
		})
	}
	_ = eg.Wait()
	out := a.WithOptions(a.opts)
	out.noCache, out.absent = a.noCache, absent
	return out
}
