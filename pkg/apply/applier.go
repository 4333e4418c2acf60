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

// Applier writes strategy objects: it prepares each against its live
// object, decides whether a write is needed (Decide), and applies,
// recreates or deletes. It reads live objects through its Reader and
// resolves kinds through its Kinds, both embedded, so an Applier is also
// each of them; what it adds is the write side and the appliers derived
// from it (WithOptions, DryRunner, Direct, WithCache, Probe). It is safe
// for concurrent use.
type Applier struct {
	Reader
	opts Options
}

// Kinds resolves kinds to the resources the cluster serves, through
// discovery and a REST mapper, and gives their dynamic clients. It is
// shared by every applier derived from one another. It is safe for
// concurrent use.
type Kinds struct {
	dyn    dynamic.Interface
	mapper meta.ResettableRESTMapper
	// fresh is set when the mapper was reset and no kind was missing
	// since: a kind the fresh mapper does not know is not served, without
	// asking discovery again.
	fresh *atomic.Bool
}

// Reader reads live objects: from a cache where the cache holds them and
// is trusted (see WithCache, DistrustCache), else from the API server,
// and from what a Probe listed. It is the read side of an Applier, which
// records its own writes in it, so that a cached copy older than the
// applier's last write is not taken for the live object. It is safe for
// concurrent use.
type Reader struct {
	*Kinds
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

// cacheKey names an object in Reader.seen.
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
		a.keep(obj)
	}
}

// keeper is a Cache that keeps whole the objects the applier read from
// the API server or wrote, and holds others' less (InformerCache.Keep).
type keeper interface {
	Keep(live *unstructured.Unstructured)
}

// keep hands live, read from the API server or returned by a write, to a
// cache that keeps such objects.
func (r *Reader) keep(live *unstructured.Unstructured) {
	if k, ok := r.cache.(keeper); ok && live != nil {
		k.Keep(live)
	}
}

// read moves the record of an object the applier wrote to the version the
// API server just returned (nil: gone), so that the record does not wait
// for a version others (a controller writing status) have replaced.
func (r *Reader) read(obj, live *unstructured.Unstructured) {
	k := keyOf(obj)
	old, ok := r.seen.Load(k)
	if !ok {
		return
	}
	rv := ""
	if live != nil {
		rv = live.GetResourceVersion()
	}
	// A write meanwhile wins.
	r.seen.CompareAndSwap(k, old, rv)
}

// usable reports whether a cached copy (nil: the cache has none) is at
// least as new as the applier's last write of the object, forgetting the
// write once the cache has caught up with it.
func (r *Reader) usable(obj, cached *unstructured.Unstructured) bool {
	k := keyOf(obj)
	rv, ok := r.seen.Load(k)
	switch {
	case !ok:
		return true
	case cached == nil || cached.GetResourceVersion() == rv || r.cacheSaw(k, rv.(string)):
		r.seen.CompareAndDelete(k, rv)
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
func (r *Reader) cacheSaw(k cacheKey, rv string) bool {
	s, ok := r.cache.(versionsSeen)
	return ok && s.Seen(k.gvk, k.namespace, k.name, rv)
}

// New returns an applier over a dynamic client and a REST mapper (which is
// reset once when a kind is not found, so kinds of CRDs applied meanwhile
// become known).
func New(dyn dynamic.Interface, mapper meta.ResettableRESTMapper, opts Options) *Applier {
	if opts.FieldManager == "" {
		opts.FieldManager = metakeys.FieldManager
	}
	kinds := &Kinds{dyn: dyn, mapper: mapper, fresh: new(atomic.Bool)}
	return &Applier{Reader: Reader{Kinds: kinds, seen: new(sync.Map), distrust: new(atomic.Int64)}, opts: opts}
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
	if opts.FieldManager == "" {
		opts.FieldManager = metakeys.FieldManager
	}
	out := &Applier{Reader: a.Reader, opts: opts}
	// What a Probe found holds for the applier it returned only.
	out.absent, out.listed, out.listedMeta = nil, nil, nil
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
func (r *Reader) Cached() bool {
	return r.cache != nil && !r.noCache
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
func (r *Reader) Changed() func() <-chan struct{} {
	n, ok := r.cache.(changeNotifier)
	if !ok || r.noCache {
		return nil
	}
	return func() <-chan struct{} {
		if !r.cacheTrusted() {
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
func (r *Reader) DistrustCache(d time.Duration) {
	until := time.Now().Add(d).UnixNano()
	for {
		cur := r.distrust.Load()
		if cur >= until || r.distrust.CompareAndSwap(cur, until) {
			return
		}
	}
}

// cacheTrusted reports whether reads may come from the cache now: there is
// one, this applier uses it, and it is not distrusted (DistrustCache).
func (r *Reader) cacheTrusted() bool {
	return r.Cached() && time.Now().UnixNano() >= r.distrust.Load()
}

// WithCache returns an applier sharing clients and mapper that reads live
// objects from c where c holds them (see Cache), and from the API server
// otherwise.
func (a *Applier) WithCache(c Cache) *Applier {
	out := a.WithOptions(a.opts)
	out.cache, out.noCache = c, false
	return out
}
