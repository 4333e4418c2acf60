package apply

import (
	"context"
	"errors"
	"sync"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// probeMin is the number of objects of one resource and namespace, none of
// them in the cache, from which Probe lists that resource instead of
// letting each apply read its object: one request instead of one each.
const probeMin = 2

// probePage is the page size of a probe list.
const probePage = 500

// Probe returns an applier for applying objs, sharing everything with a,
// that already knows which of them exist. A cache holds only
// installations' objects, so an object it lacks may still exist (someone
// else's, refused as a conflict) and is read from the API server before
// its write; on a first install that is one read per object, and without
// a cache (the plugin) one per object on every apply. Probe lists each
// resource and namespace where at least probeMin of objs are not in the
// cache: metadata only with a cache, the objects themselves without one.
// Until the returned applier's first write of an object, its reads of one
// the list did not hold answer "absent", and without a cache its reads of
// one the list held answer the listed copy, without a request; reads after
// that write (whether it succeeded or not) ask as usual; GetMetadata of one
// a metadata list held answers that metadata. A list that
// fails, is refused, or runs long past the objects probed (a namespace
// full of others' objects; see listGroup) is dropped: those objects are
// read one by one, as without Probe. An object created or changed between
// the list and the write is treated as it would be between a read and the
// write. Without a metadata client (see New) or for a dry run, Probe
// returns a.
func (a *Applier) Probe(ctx context.Context, objs []*unstructured.Unstructured) *Applier {
	if a.meta == nil || a.opts.DryRun {
		return a
	}
	type group struct {
		gvr       schema.GroupVersionResource
		namespace string
	}
	trusted := a.cacheTrusted()
	if trusted {
		a.warm(ctx, objs)
	}
	groups := map[group][]*unstructured.Unstructured{}
	for _, obj := range objs {
		m, err := a.Mapping(strategy.RefOf(obj), obj.GroupVersionKind().Version)
		if err != nil {
			continue
		}
		if trusted {
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
	absent, listed, listedMeta := new(sync.Map), new(sync.Map), new(sync.Map)
	// Without a cache (or with one distrusted), the list carries the live
	// objects themselves.
	full := !trusted
	var eg errgroup.Group
	eg.SetLimit(8)
	for g, members := range groups {
		if len(members) < probeMin {
			continue
		}
		eg.Go(func() error {
			// A list running long past the probed objects (mostly
			// others') is dropped: reading ours one by one costs less.
			present, err := a.list(ctx, g.gvr, g.namespace, 2*len(members)+probePage, full)
			if err != nil {
				return nil
			}
			for _, obj := range members {
				live, ok := present[obj.GetName()]
				switch {
				case !ok:
					absent.Store(keyOf(obj), struct{}{})
				case full:
					listed.Store(keyOf(obj), live)
				default:
					listedMeta.Store(keyOf(obj), live)
				}
			}
			return nil
		})
	}
	_ = eg.Wait()
	out := a.WithOptions(a.opts)
	out.noCache, out.absent, out.listed, out.listedMeta = a.noCache, absent, listed, listedMeta
	return out
}

// warm reads one object of each kind of objs from the cache, side by side:
// the first read of a kind starts its informer and waits for it to sync,
// which one kind after the other would add up. Kinds the cluster does not
// serve are left out: their objects are skipped, and an informer's start
// would ask discovery for their group every time.
func (r *Reader) warm(ctx context.Context, objs []*unstructured.Unstructured) {
	first := map[schema.GroupVersionKind]*unstructured.Unstructured{}
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		if _, ok := first[gvk]; ok {
			continue
		}
		if _, err := r.Mapping(strategy.RefOf(obj), gvk.Version); err == nil {
			first[gvk] = obj
		}
	}
	var eg errgroup.Group
	eg.SetLimit(8)
	for gvk, obj := range first {
		eg.Go(func() error {
			_, _, _ = r.cache.Cached(ctx, gvk, obj.GetNamespace(), obj.GetName())
			return nil
		})
	}
	_ = eg.Wait()
}

// errListTooLong stops a list that runs past its bound.
var errListTooLong = errors.New("list runs past its bound")

// ListMetadata returns every object of a resource in a namespace (""
// cluster-wide), by name, from a metadata-only list: each holds its
// metadata only (name, labels, annotations and the rest). It needs a
// metadata client (NewForConfig).
func (r *Reader) ListMetadata(ctx context.Context, gvr schema.GroupVersionResource, namespace string) (map[string]*unstructured.Unstructured, error) {
	if r.meta == nil {
		return nil, errors.New("list metadata: the applier has no metadata client")
	}
	return r.list(ctx, gvr, namespace, 0, false)
}

// list lists a resource in a namespace ("": cluster-wide), every page:
// the live objects by name when full, else their metadata only. It stops
// with errListTooLong past max objects (0: no bound).
func (r *Reader) list(ctx context.Context, gvr schema.GroupVersionResource, namespace string, max int, full bool) (map[string]*unstructured.Unstructured, error) {
	present := map[string]*unstructured.Unstructured{}
	opts := metav1.ListOptions{Limit: probePage}
	for {
		var cont string
		if full {
			list, err := r.dyn.Resource(gvr).Namespace(namespace).List(ctx, opts)
			if err != nil {
				return nil, err
			}
			for i := range list.Items {
				present[list.Items[i].GetName()] = &list.Items[i]
			}
			cont = list.GetContinue()
		} else {
			list, err := r.meta.Resource(gvr).Namespace(namespace).List(ctx, opts)
			if err != nil {
				return nil, err
			}
			for i := range list.Items {
				m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&list.Items[i].ObjectMeta)
				if err != nil {
					return nil, err
				}
				present[list.Items[i].Name] = &unstructured.Unstructured{Object: map[string]any{"metadata": m}}
			}
			cont = list.Continue
		}
		if cont == "" {
			return present, nil
		}
		if max > 0 && len(present) > max {
			return nil, errListTooLong
		}
		opts.Continue = cont
	}
}
