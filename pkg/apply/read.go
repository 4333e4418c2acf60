package apply

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// GetRef returns the live object of a reference at the version the
// cluster prefers, read from the API server; nil when it does not exist or
// its kind is no longer served.
func (r *Reader) GetRef(ctx context.Context, ref strategy.ObjectRef) (*unstructured.Unstructured, error) {
	gvr, namespaced, err := r.GroupVersionResource(ref.GroupKind(), "")
	var notServed *NotServedError
	if errors.As(err, &notServed) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ri := r.dyn.Resource(gvr)
	var live *unstructured.Unstructured
	if namespaced {
		live, err = ri.Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	} else {
		live, err = ri.Get(ctx, ref.Name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", ref, err)
	}
	return live, nil
}

// List returns the objects of a kind (at version) matching a label
// selector in every namespace, read from the API server, each with its
// kind set; nil when the cluster does not serve the kind.
func (r *Reader) List(ctx context.Context, gk schema.GroupKind, version, selector string) ([]*unstructured.Unstructured, error) {
	gvr, _, err := r.GroupVersionResource(gk, version)
	var notServed *NotServedError
	if errors.As(err, &notServed) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	l, err := r.dyn.Resource(gvr).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", gk, err)
	}
	out := make([]*unstructured.Unstructured, 0, len(l.Items))
	for i := range l.Items {
		o := &l.Items[i]
		o.SetGroupVersionKind(gk.WithVersion(version))
		out = append(out, o)
	}
	return out, nil
}

// Dynamic returns the dynamic client.
func (k *Kinds) Dynamic() dynamic.Interface { return k.dyn }

// ResetMapper forgets what discovery said, so kinds served since are found.
func (k *Kinds) ResetMapper() {
	k.mapper.Reset()
	k.fresh.Store(true)
}

// Mapping returns the REST mapping of a kind, or a *NotServedError when the
// cluster does not serve it. Discovery is asked again at most once between
// calls of ResetMapper, so many kinds that are not served cost one
// discovery, not one each.
func (k *Kinds) Mapping(ref strategy.ObjectRef, version string) (*meta.RESTMapping, error) {
	gk := ref.GroupKind()
	m, err := k.mapper.RESTMapping(gk, version)
	if meta.IsNoMatchError(err) && k.fresh.CompareAndSwap(false, true) {
		// Ask discovery once more; until the next ResetMapper, kinds that
		// are still missing are not served.
		k.mapper.Reset()
		m, err = k.mapper.RESTMapping(gk, version)
	}
	if meta.IsNoMatchError(err) {
		return nil, &NotServedError{Ref: ref}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: rest mapping: %w", ref, err)
	}
	return m, nil
}

// Resource returns the client for an object's resource.
func (k *Kinds) Resource(obj *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	ref := strategy.RefOf(obj)
	m, err := k.Mapping(ref, obj.GroupVersionKind().Version)
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return k.dyn.Resource(m.Resource).Namespace(obj.GetNamespace()), nil
	}
	return k.dyn.Resource(m.Resource), nil
}

// Get returns the live object of a strategy object, nil when it does not
// exist: from the applier's cache when it holds the object, else from the
// API server.
func (r *Reader) Get(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return r.GetAtLeast(ctx, obj, 0)
}

// GetMetadata is Get for a reader of the object's metadata alone (labels,
// annotations): an object the applier's Probe listed with a cache, which
// Get would read from the API server, is answered from the list, holding
// its metadata only.
func (r *Reader) GetMetadata(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if r.listedMeta != nil {
		if m, ok := r.listedMeta.Load(keyOf(obj)); ok {
			return m.(*unstructured.Unstructured).DeepCopy(), nil
		}
	}
	return r.Get(ctx, obj)
}

// GetAtLeast is Get for an object written at generation gen: a cached copy
// of an older generation (the cache has not seen the write yet) is not
// used; the API server is asked instead.
func (r *Reader) GetAtLeast(ctx context.Context, obj *unstructured.Unstructured, gen int64) (*unstructured.Unstructured, error) {
	ri, err := r.Resource(obj)
	if err != nil {
		return nil, err
	}
	return r.live(ctx, ri, obj, gen)
}

// live reads obj's live object through ri, or from the cache when it holds
// a copy at generation gen or later.
func (r *Reader) live(ctx context.Context, ri dynamic.ResourceInterface, obj *unstructured.Unstructured, gen int64) (*unstructured.Unstructured, error) {
	live, _, err := r.liveOrCached(ctx, ri, obj, gen, false)
	return live, err
}

// liveOrCached is live, also saying whether the object came from the
// cache. readOnly says the caller changes nothing of the object: a bulky
// kind's cached object is then the informer's own, not a copy.
func (r *Reader) liveOrCached(ctx context.Context, ri dynamic.ResourceInterface, obj *unstructured.Unstructured, gen int64, readOnly bool) (*unstructured.Unstructured, bool, error) {
	if r.cacheTrusted() {
		// A cache that cannot answer (not started yet, a kind its mapper
		// does not know yet) is passed by: the API server answers.
		read := r.cache.Cached
		if sr, ok := r.cache.(sharedReader); ok && readOnly {
			if info, _ := kinds.Lookup(obj.GroupVersionKind().GroupKind()); len(info.Bulky) > 0 {
				read = sr.CachedShared
			}
		}
		cached, ok, err := read(ctx, obj.GroupVersionKind(), obj.GetNamespace(), obj.GetName())
		if err == nil && !ok {
			r.usable(obj, nil)
		}
		if err == nil && ok && cached.GetGeneration() >= gen && r.usable(obj, cached) {
			return cached, true, nil
		}
	}
	if r.absent != nil {
		if _, ok := r.absent.Load(keyOf(obj)); ok {
			return nil, false, nil
		}
		if live, ok := r.listed.Load(keyOf(obj)); ok {
			return live.(*unstructured.Unstructured).DeepCopy(), false, nil
		}
	}
	live, err := r.direct(ctx, ri, obj)
	if err == nil {
		r.read(obj, live)
		r.keep(live)
	}
	return live, false, err
}

// direct reads obj's live object from the API server; nil when it does not
// exist.
func (r *Reader) direct(ctx context.Context, ri dynamic.ResourceInterface, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	live, err := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if serverTrouble(err) {
		r.DistrustCache(DistrustFor)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", strategy.RefOf(obj), err)
	}
	return live, nil
}

// GroupVersionResource returns the resource of a kind as served.
func (k *Kinds) GroupVersionResource(gk schema.GroupKind, version string) (schema.GroupVersionResource, bool, error) {
	m, err := k.Mapping(strategy.ObjectRef{Group: gk.Group, Kind: gk.Kind}, version)
	if err != nil {
		return schema.GroupVersionResource{}, false, err
	}
	return m.Resource, m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}
