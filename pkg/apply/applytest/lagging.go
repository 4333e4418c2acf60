package applytest

import (
	"context"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/installstrategy/installstrategy/pkg/apply"
)

// LaggingCache is an apply.Cache over another that stops following
// chosen objects: from a chosen moment on it serves the copy it held
// then, as an informer whose watch is delayed under load still shows an
// object as it was before the writes since. Other objects come from the
// cache below. It is safe for concurrent use.
type LaggingCache struct {
	inner apply.Cache
	mu    sync.Mutex
	held  map[lagKey]*lagRule
}

type lagKey struct {
	gvk             schema.GroupVersionKind
	namespace, name string
}

type lagRule struct {
	when   func(*unstructured.Unstructured) bool
	frozen *unstructured.Unstructured
}

// NewLaggingCache returns a LaggingCache over inner that follows every
// object until told otherwise.
func NewLaggingCache(inner apply.Cache) *LaggingCache {
	return &LaggingCache{inner: inner, held: map[lagKey]*lagRule{}}
}

// FreezeWhen makes the cache stop at the first copy of obj (its kind,
// namespace and name) that the cache below holds and for which when is
// true: that copy is served from then on, whatever is written later.
func (c *LaggingCache) FreezeWhen(obj *unstructured.Unstructured, when func(*unstructured.Unstructured) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held[lagKey{obj.GroupVersionKind(), obj.GetNamespace(), obj.GetName()}] = &lagRule{when: when}
}

// Freeze makes the cache stop now at the copies of objs the cache below
// holds; it fails the test when one is not held.
func (c *LaggingCache) Freeze(ctx context.Context, tb testing.TB, objs ...*unstructured.Unstructured) {
	tb.Helper()
	for _, o := range objs {
		c.FreezeWhen(o, func(*unstructured.Unstructured) bool { return true })
		if _, ok, err := c.Cached(ctx, o.GroupVersionKind(), o.GetNamespace(), o.GetName()); err != nil || !ok {
			tb.Fatalf("freeze %s: ok %v, %v", o.GetName(), ok, err)
		}
	}
}

// Cached implements apply.Cache.
func (c *LaggingCache) Cached(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, bool, error) {
	c.mu.Lock()
	rule := c.held[lagKey{gvk, namespace, name}]
	if rule != nil && rule.frozen != nil {
		defer c.mu.Unlock()
		return rule.frozen.DeepCopy(), true, nil
	}
	c.mu.Unlock()
	u, ok, err := c.inner.Cached(ctx, gvk, namespace, name)
	if err != nil || !ok || rule == nil {
		return u, ok, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if rule.frozen == nil && rule.when(u) {
		rule.frozen = u.DeepCopy()
	}
	if rule.frozen != nil {
		return rule.frozen.DeepCopy(), true, nil
	}
	return u, ok, nil
}

// Frozen reports whether the cache has stopped at a copy of obj.
func (c *LaggingCache) Frozen(obj *unstructured.Unstructured) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	rule := c.held[lagKey{obj.GroupVersionKind(), obj.GetNamespace(), obj.GetName()}]
	return rule != nil && rule.frozen != nil
}

// keeper is a cache that keeps the objects the applier reads or writes
// (apply.InformerCache.Keep).
type keeper interface {
	Keep(live *unstructured.Unstructured)
}

// Keep passes live to the cache below when that one keeps the objects
// the applier reads or writes: without it, an apply.InformerCache below
// holds them as stubs.
func (c *LaggingCache) Keep(live *unstructured.Unstructured) {
	if k, ok := c.inner.(keeper); ok {
		k.Keep(live)
	}
}
