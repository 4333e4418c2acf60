package apply

import (
	"fmt"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// Applier writes strategy objects. It is safe for concurrent use.
type Applier struct {
	dyn    dynamic.Interface
	mapper meta.ResettableRESTMapper
	opts   Options
	// fresh is set when the mapper was reset and no kind was missing
	// since: a kind the fresh mapper does not know is not served, without
	// asking discovery again.
	fresh *atomic.Bool
	// cache, when set, serves live reads of the objects it holds, unless
	// noCache is set.
	cache   Cache
	noCache bool
	// seen holds, by cacheKey, the resourceVersion of each object as the
	// applier last wrote it ("" once deleted), shared by the appliers
	// derived from one another. A cached copy at another version may be
	// older than that write (the informer has not seen it yet): it is not
	// used until the cache catches up. Without this, a cached copy of the
	// version before the last write would be taken as "unchanged" when a
	// strategy goes back to it (a downgrade right after an upgrade).
	seen *sync.Map
	// distrust holds the time (Unix nanoseconds), shared like seen, until
	// which reads skip the cache (see DistrustCache).
	distrust *atomic.Int64
	// meta, when set, lists objects' metadata for Probe.
	meta metadata.Interface
	// absent holds, by cacheKey, objects Probe found missing: reads of
	// each answer "absent" without asking until the applier writes it
	// (see Probe).
	absent *sync.Map
	// listed holds, by cacheKey, live objects a Probe without a cache
	// listed, read the same way.
	listed *sync.Map
	// listedMeta holds, by cacheKey, the metadata of objects a Probe with
	// a cache listed (GetMetadata).
	listedMeta *sync.Map
}

// cacheKey names an object in Applier.seen.
type cacheKey struct {
	gvk             schema.GroupVersionKind
	namespace, name string
}

func keyOf(obj *unstructured.Unstructured) cacheKey {
	return cacheKey{obj.GroupVersionKind(), obj.GetNamespace(), obj.GetName()}
}

// Wrote records an object as the API server returned it from a write
// (when a cache is in use: Direct appliers record for the cached ones).
// The applier records its own writes; a caller that writes an object by
// another path (a status update, a patch) records it too, so that a cached
// copy from before that write is not taken for the live object.
func (a *Applier) Wrote(obj *unstructured.Unstructured) {
	if obj != nil && a.cache != nil && !a.opts.DryRun {
		a.seen.Store(keyOf(obj), obj.GetResourceVersion())
	}
}

// read moves the record of an object the applier wrote to the version the
// API server just returned (nil: gone), so that the record does not wait
// for a version others (a controller writing status) have replaced.
func (a *Applier) read(obj, live *unstructured.Unstructured) {
	k := keyOf(obj)
	old, ok := a.seen.Load(k)
	if !ok {
		return
	}
	rv := ""
	if live != nil {
		rv = live.GetResourceVersion()
	}
	// A write meanwhile wins.
	a.seen.CompareAndSwap(k, old, rv)
}

// usable reports whether a cached copy (nil: the cache has none) is at
// least as new as the applier's last write of the object, forgetting the
// write once the cache has caught up with it.
func (a *Applier) usable(obj, cached *unstructured.Unstructured) bool {
	k := keyOf(obj)
	rv, ok := a.seen.Load(k)
	switch {
	case !ok:
		return true
	case cached == nil || cached.GetResourceVersion() == rv || a.cacheSaw(k, rv.(string)):
		a.seen.CompareAndDelete(k, rv)
		return true
	}
	return false
}

// versionsSeen is a Cache that knows which versions of an object it has
// stored (InformerCache.Seen).
type versionsSeen interface {
	Seen(gvk schema.GroupVersionKind, namespace, name, resourceVersion string) bool
}

// cacheSaw reports whether the cache has stored the object at rv (so
// that its copy is that version or a later one); false when the cache
// cannot tell.
func (a *Applier) cacheSaw(k cacheKey, rv string) bool {
	s, ok := a.cache.(versionsSeen)
	return ok && s.Seen(k.gvk, k.namespace, k.name, rv)
}

// New returns an applier over a dynamic client and a REST mapper (which is
// reset once when a kind is not found, so kinds of CRDs applied meanwhile
// become known).
func New(dyn dynamic.Interface, mapper meta.ResettableRESTMapper, opts Options) *Applier {
	if opts.FieldManager == "" {
		opts.FieldManager = metakeys.FieldManager
	}
	return &Applier{dyn: dyn, mapper: mapper, opts: opts, fresh: new(atomic.Bool), seen: new(sync.Map), distrust: new(atomic.Int64)}
}

// NewForConfig returns an applier with clients built from cfg and a REST
// mapper over cached discovery.
func NewForConfig(cfg *rest.Config, opts Options) (*Applier, error) {
	cfg = rest.CopyConfig(cfg)
	// Libraries do not log: the server's warnings (such as a duplicate port
	// definition) are not printed.
	cfg.WarningHandler = rest.NoWarnings{}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("metadata client: %w", err)
	}
	a := New(dyn, restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc)), opts)
	a.meta = meta
	return a, nil
}

// Options returns the applier's options with defaults filled in.
func (a *Applier) Options() Options { return a.opts }

// WithOptions returns an applier sharing clients and mapper with other
// options.
func (a *Applier) WithOptions(opts Options) *Applier {
	out := New(a.dyn, a.mapper, opts)
	out.fresh, out.cache, out.noCache, out.seen, out.distrust, out.meta = a.fresh, a.cache, a.noCache, a.seen, a.distrust, a.meta
	return out
}

// DryRunner returns an applier like a whose writes are server-side dry
// runs, sharing what a's Probe found (a dry run writes nothing, so it does
// not end what the probe knows of an object).
func (a *Applier) DryRunner() *Applier {
	opts := a.opts
	opts.DryRun = true
	out := a.WithOptions(opts)
	out.absent, out.listed, out.listedMeta = a.absent, a.listed, a.listedMeta
	return out
}

// Direct returns an applier sharing clients and mapper that reads every
// live object from the API server: for an apply right after a write by
// another path (a patch), which a cache may not have seen yet.
func (a *Applier) Direct() *Applier {
	out := a.WithOptions(a.opts)
	out.noCache = true
	return out
}

// Cached reports whether the applier reads live objects from a cache
// (WithCache), so that what it reads may lag behind the API server.
func (a *Applier) Cached() bool {
	return a.cache != nil && !a.noCache
}

// changeNotifier is a Cache that tells when it stored a change
// (InformerCache.Changed).
type changeNotifier interface {
	Changed() <-chan struct{}
}

// Changed returns, for an applier whose reads come from a cache that
// tells when it changes, a function returning a channel closed at the
// cache's next change (health.WaitOptions.Changed); nil otherwise, and
// while the cache is distrusted (reads go to the API server, which tells
// nothing).
func (a *Applier) Changed() func() <-chan struct{} {
	n, ok := a.cache.(changeNotifier)
	if !ok || a.noCache {
		return nil
	}
	return func() <-chan struct{} {
		if !a.cacheTrusted() {
			return nil
		}
		return n.Changed()
	}
}

// DistrustFor is how long an applier reads past its cache once it has a
// reason to doubt it (see DistrustCache).
var DistrustFor = 5 * time.Minute

// DistrustCache makes the applier, and every applier derived from the same
// one, read live objects from the API server for d instead of the cache
// (a longer distrust already set is kept). A cache is trusted once it has
// seen the applier's own last write of an object; an informer that stopped
// following the cluster after that (its watch was seen to hang for minutes
// after an etcd restart) would show others' later changes as absent, and
// the object would be judged unchanged. The applier calls it when the API
// server fails a request as it does while etcd or the API server restarts
// (see serverTrouble); a reconcile's wait calls it when it finds a cached
// copy behind the API server's.
func (a *Applier) DistrustCache(d time.Duration) {
	until := time.Now().Add(d).UnixNano()
	for {
		cur := a.distrust.Load()
		if cur >= until || a.distrust.CompareAndSwap(cur, until) {
			return
		}
	}
}

// cacheTrusted reports whether reads may come from the cache now: there is
// one, this applier uses it, and it is not distrusted (DistrustCache).
func (a *Applier) cacheTrusted() bool {
	return a.Cached() && time.Now().UnixNano() >= a.distrust.Load()
}

// WithCache returns an applier sharing clients and mapper that reads live
// objects from c where c holds them (see Cache), and from the API server
// otherwise.
func (a *Applier) WithCache(c Cache) *Applier {
	out := a.WithOptions(a.opts)
	out.cache, out.noCache = c, false
	return out
}
