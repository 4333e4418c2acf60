package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Cache serves live reads of objects from informers instead of the API
// server. It holds only objects that carry the managed-by label
// (metakeys.ManagedByLabel=metakeys.ManagedBy), so a miss does not mean that the
// object does not exist: the applier then asks the API server. A hit may
// lag behind the API server by the watch's delay; the applier only uses it
// to decide whether to write (a server-side apply is right whatever it
// read) and, for objects it wrote, only at the generation it wrote. A
// Cache that also has a method Keep(*unstructured.Unstructured) is handed
// every object the applier reads from the API server or writes
// (InformerCache.Keep); a Cache that wraps another passes it on.
type Cache interface {
	// Cached returns the cached object of a kind, namespace and name;
	// ok is false when the cache does not hold it.
	Cached(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (obj *unstructured.Unstructured, ok bool, err error)
}

// InformerCache is a Cache over controller-runtime's informer cache, with
// every informer filtered by the managed-by label: objects of other
// products and people never enter it, whatever their number. An informer
// starts the first time a kind is read (one list, then a watch). Start
// must run (it is a controller-runtime Runnable) before reads return.
type InformerCache struct {
	cache crcache.Cache
	mu    sync.Mutex
	// bypass holds kinds whose informer did not sync in syncTimeout (no
	// right to list them, say), until when reads of them skip the cache.
	bypass map[schema.GroupVersionKind]time.Time
	// watched holds the kinds whose informer reports the versions it
	// delivers into versions.
	watched map[schema.GroupVersionKind]bool
	// starting holds, for kinds whose informer has not synced yet, when
	// it started.
	starting map[schema.GroupVersionKind]time.Time

	// shared holds the strategy's values of bulky fields (Share).
	shared shared

	vmu sync.Mutex
	// versions holds, by object, the last resourceVersions its informer
	// stored (see Seen).
	versions map[cacheKey]*recentVersions
	// changed is closed at the next change the informers store (see
	// Changed); nil until someone asks.
	changed chan struct{}

	// want holds, by cacheKey, the namespaced objects the informers keep
	// whole; side, the live copies Keep kept of those the informers hold
	// as stubs (stub.go).
	want, side sync.Map
}

// Changed returns a channel closed at the next change stored by the
// informer of a kind read before (an object added, changed or deleted): a
// wait reading the cache checks again then instead of at its next
// interval.
func (c *InformerCache) Changed() <-chan struct{} {
	c.vmu.Lock()
	defer c.vmu.Unlock()
	if c.changed == nil {
		c.changed = make(chan struct{})
	}
	return c.changed
}

// notify closes the channel of Changed; vmu held.
func (c *InformerCache) notify() {
	if c.changed != nil {
		close(c.changed)
		c.changed = nil
	}
}

// recentVersions is a ring of an object's last resourceVersions.
type recentVersions struct {
	rv   [seenVersions]string
	next int
}

// seenVersions is how many of an object's latest versions the cache
// remembers: enough for the status writes of a rolling-out workload that
// can land between an applier's write and its next read.
const seenVersions = 8

// syncTimeout bounds how long a new informer may take to sync; after
// that the kind's reads go to the API server for bypassFor. firstSyncWait
// is how long a read (Cached) waits for the informer it starts: reads of
// a kind whose informer is still syncing after that are not answered (the
// applier asks the API server) rather than held. The watch of a kind
// whose CRD was just established is refused with 429 until the API
// server's watch cache for it is ready, and the informer retries a second
// later: a rollout writing that kind's objects right after its CRD would
// otherwise wait that second.
var (
	syncTimeout   = 10 * time.Second
	bypassFor     = 5 * time.Minute
	firstSyncWait = 300 * time.Millisecond
)

// ErrNotSynced is returned by InformerCache.Cached for a kind whose
// informer has not synced yet: the cache cannot answer, the API server
// can.
var ErrNotSynced = errors.New("informer not synced yet")

// managedSelector selects the objects an installstrategy installation
// wrote.
func managedSelector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{metakeys.ManagedByLabel: metakeys.ManagedBy})
}

// NewInformerCache returns an informer cache of the objects written by any
// installstrategy installation, over the cluster at cfg.
func NewInformerCache(cfg *rest.Config) (*InformerCache, error) {
	// Field managers are half of a typical object's metadata and no cached
	// read needs them (adoption, which does, reads the live object).
	ic := &InformerCache{bypass: map[schema.GroupVersionKind]time.Time{},
		watched: map[schema.GroupVersionKind]bool{}, starting: map[schema.GroupVersionKind]time.Time{},
		versions: map[cacheKey]*recentVersions{}}
	c, err := crcache.New(cfg, crcache.Options{Scheme: runtime.NewScheme(), DefaultLabelSelector: managedSelector(),
		DefaultTransform: ic.transform(crcache.TransformStripManagedFields())})
	if err != nil {
		return nil, fmt.Errorf("informer cache: %w", err)
	}
	ic.cache = c
	return ic, nil
}

// Start runs the informers until ctx ends.
func (c *InformerCache) Start(ctx context.Context) error { return c.cache.Start(ctx) }

// Informers returns the underlying cache, for watches (controller-runtime
// sources) on the same informers.
func (c *InformerCache) Informers() crcache.Cache { return c.cache }

// Warm starts the informers of gvks, several at a time, and returns when
// each has synced or, after syncTimeout, is bypassed (as a first read
// would start it; Cached). Starting them before the first installation
// keeps their lists and watches out of its rollout.
func (c *InformerCache) Warm(ctx context.Context, gvks []schema.GroupVersionKind) error {
	var (
		mu   sync.Mutex
		errs []error
		eg   errgroup.Group
	)
	eg.SetLimit(8)
	for _, gvk := range gvks {
		eg.Go(func() error {
			// Any key: the read starts the informer and waits for it.
			if _, _, err := c.cached(ctx, gvk, "", "", syncTimeout); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
			return nil
		})
	}
	_ = eg.Wait()
	return errors.Join(errs...)
}

// Cached implements Cache. The first read of a kind starts its informer
// and waits for it to sync up to firstSyncWait; until it has synced, reads
// of the kind return ErrNotSynced.
func (c *InformerCache) Cached(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, bool, error) {
	return c.cached(ctx, gvk, namespace, name, firstSyncWait)
}

// CachedShared is Cached without the copy: the object returned is the
// informer's own, which the caller must not change (nor anything it
// holds). The applier reads bulky kinds' objects (kinds.Info.Bulky: CRDs
// with their schemas) this way to decide a write.
func (c *InformerCache) CachedShared(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, bool, error) {
	return c.cached(ctx, gvk, namespace, name, firstSyncWait, &client.GetOptions{UnsafeDisableDeepCopy: ptr.To(true)})
}

// cached reads an object of gvk, waiting for the kind's informer to sync
// up to patience from the informer's start.
func (c *InformerCache) cached(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, patience time.Duration, opts ...client.GetOption) (*unstructured.Unstructured, bool, error) {
	c.mu.Lock()
	until, bypassed := c.bypass[gvk]
	c.mu.Unlock()
	if bypassed && time.Now().Before(until) {
		return nil, false, nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := c.synced(ctx, gvk, u, patience); err != nil {
		return nil, false, err
	}
	err := c.cache.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u, opts...)
	k := cacheKey{gvk, namespace, name}
	switch {
	case apierrors.IsNotFound(err):
		c.side.Delete(k)
		c.watchVersions(ctx, gvk)
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	c.watchVersions(ctx, gvk)
	if isStub(u) {
		kept, ok := c.fromStub(k, u)
		if !ok {
			return nil, false, nil
		}
		if len(opts) == 0 {
			kept = kept.DeepCopy()
		}
		return kept, true, nil
	}
	return u, true, nil
}

// synced starts the informer of gvk (obj: an empty object of the kind) if
// it has not started, and waits until it has synced, up to patience from
// its start: ErrNotSynced after that, and past syncTimeout the kind is
// bypassed for bypassFor.
func (c *InformerCache) synced(ctx context.Context, gvk schema.GroupVersionKind, obj *unstructured.Unstructured, patience time.Duration) error {
	inf, err := c.cache.GetInformer(ctx, obj, crcache.BlockUntilSynced(false))
	if err != nil {
		return err
	}
	if inf.HasSynced() {
		return nil
	}
	now := time.Now()
	c.mu.Lock()
	since, ok := c.starting[gvk]
	if !ok {
		since = now
		c.starting[gvk] = now
	}
	c.mu.Unlock()
	deadline := since.Add(min(patience, syncTimeout))
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !inf.HasSynced() {
		if !time.Now().Before(deadline) {
			if time.Since(since) < syncTimeout {
				return fmt.Errorf("%s: %w", gvk, ErrNotSynced)
			}
			c.mu.Lock()
			c.bypass[gvk] = time.Now().Add(bypassFor)
			delete(c.starting, gvk)
			c.mu.Unlock()
			return fmt.Errorf("informer of %s did not sync in %s", gvk, syncTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	c.mu.Lock()
	delete(c.starting, gvk)
	c.mu.Unlock()
	return nil
}

// Seen reports whether the informer of gvk has stored the object at
// resourceVersion rv, recently: its cached copy is then that version or a
// later one (an informer stores an object's versions in order), even when
// others (the controller writing its status) changed it since. The
// applier asks so that a cached copy is trusted once the cache has caught
// up with the applier's own write, without reading the object again.
func (c *InformerCache) Seen(gvk schema.GroupVersionKind, namespace, name, rv string) bool {
	if rv == "" {
		return false
	}
	c.vmu.Lock()
	defer c.vmu.Unlock()
	r := c.versions[cacheKey{gvk, namespace, name}]
	return r != nil && slices.Contains(r.rv[:], rv)
}

// watchVersions makes the informer of gvk (started and synced by now)
// report the versions it stores, once per kind. Its handlers run after
// the store is updated, so a version reported is in the cache.
func (c *InformerCache) watchVersions(ctx context.Context, gvk schema.GroupVersionKind) {
	c.mu.Lock()
	done := c.watched[gvk]
	c.watched[gvk] = true
	c.mu.Unlock()
	if done {
		return
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	inf, err := c.cache.GetInformer(ctx, u)
	if err == nil {
		_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.stored(gvk, obj) },
			UpdateFunc: func(_, obj any) { c.stored(gvk, obj) },
			DeleteFunc: func(obj any) {
				if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
					obj = d.Obj
				}
				if m, err := meta.Accessor(obj); err == nil {
					c.vmu.Lock()
					delete(c.versions, cacheKey{gvk, m.GetNamespace(), m.GetName()})
					c.notify()
					c.vmu.Unlock()
				}
			},
		})
	}
	if err != nil {
		// Not reported: cached copies of the kind are trusted only at the
		// version the applier wrote, as without this.
		c.mu.Lock()
		delete(c.watched, gvk)
		c.mu.Unlock()
	}
}

// stored records the version of an object the informer of gvk stored.
func (c *InformerCache) stored(gvk schema.GroupVersionKind, obj any) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	k := cacheKey{gvk, m.GetNamespace(), m.GetName()}
	c.vmu.Lock()
	defer c.vmu.Unlock()
	r := c.versions[k]
	if r == nil {
		r = &recentVersions{}
		c.versions[k] = r
	}
	r.rv[r.next] = m.GetResourceVersion()
	r.next = (r.next + 1) % seenVersions
	c.notify()
}
