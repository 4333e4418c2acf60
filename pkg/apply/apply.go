package apply

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// AdoptPolicy says what to do with a live object that has the name of a
// strategy object but was not written by this applier.
type AdoptPolicy int

const (
	// AdoptNever reports such an object as a *ConflictError and leaves it
	// alone. It is the zero value.
	AdoptNever AdoptPolicy = iota
	// AdoptAll takes such objects over: they are applied like ours.
	// Options.Adoptable, when set, narrows it to the objects it lists.
	AdoptAll
)

// Options tunes an Applier. Owner is required; the zero value of the rest
// applies for an empty identity with field manager "installstrategy",
// never adopting.
type Options struct {
	// Identity is the target identity written into the annotations.
	Identity strategy.Identity
	// FieldManager is the server-side apply field manager; "" means
	// metakeys.FieldManager.
	FieldManager string
	// Owner is the installation whose labels the applier writes, and the
	// only one whose objects it updates.
	Owner inventory.Owner
	// Adopt says whether objects no installation owns (written by kubectl,
	// Helm or a person) are taken over. Another installation's objects are
	// never adopted, nor is a system object (inventory.SystemObject) that
	// SystemConsent does not name.
	Adopt AdoptPolicy
	// Adoptable, when not nil, is all that AdoptAll takes over: the
	// objects proven to be a Helm release's (helmrelease.Release.Verify).
	// Any other object no installation owns is a conflict.
	Adoptable map[strategy.ObjectRef]bool
	// SystemConsent names the system objects (inventory.SystemObject)
	// that may be adopted. The zero value names none: such objects are
	// conflicts (ConflictError.System says why).
	SystemConsent inventory.SystemConsent
	// DryRun sends every write as a server-side dry run: nothing is
	// persisted, and a recreate is only reported.
	DryRun bool
	// RetryFor bounds how long Apply and Delete retry a transient failure
	// (IsTransient: a webhook whose backend is not up yet, 429, 5xx, a
	// conflict, a broken connection) before returning it; 0 means
	// DefaultRetryFor, a negative value does not retry.
	RetryFor time.Duration
	// LeavePodTemplates leaves pod templates as the strategy has them: no
	// identity annotations are put on them, so taking over running
	// workloads (a Helm release's) restarts no pod. Their pods then carry
	// no identity, which rollover checks look for: use it without waiting.
	// The zero value annotates pod templates (see Prepare).
	LeavePodTemplates bool
	// Released holds objects whose installation labels name an
	// installation that no longer exists (no inventory; see
	// inventory.Store.Holder), by object, with that installation's
	// "namespace/name": while the live object still names it, it is taken
	// over (relabelled in place) instead of being a conflict. Nil takes
	// nothing over.
	Released map[strategy.ObjectRef]string
	// Recreate names objects of kinds that are never recreated
	// (kinds.Info.NeverRecreate) that may be deleted and written anew
	// when an immutable field changes: an override the caller accepted.
	// Nil recreates none of them.
	Recreate map[strategy.ObjectRef]bool
}

// Action is what the applier did (or, on a dry run, would do) to an object.
type Action string

// The actions.
const (
	ActionCreate   Action = "create"
	ActionUpdate   Action = "update"
	ActionRecreate Action = "recreate"
	// ActionRefuse: an immutable field changes on an object that is never
	// recreated (kinds.Info.NeverRecreate); nothing is written.
	ActionRefuse    Action = "refuse"
	ActionUnchanged Action = "unchanged"
	ActionSkip      Action = "skip"
	ActionConflict  Action = "conflict"
	ActionDelete    Action = "delete"
	// ActionMigrate: a CRD's stored custom resources are rewritten at its
	// new storage version before a stored version is dropped.
	ActionMigrate Action = "migrate"
)

// Result says what happened to one object.
type Result struct {
	Ref    strategy.ObjectRef `json:"ref"`
	Action Action             `json:"action"`
	// Reason explains the action: the kind not served, the first field that
	// differs, the immutable field, the owner of a conflicting object.
	Reason string `json:"reason,omitempty"`
	// Changes lists the fields an update changes (empty for create).
	Changes []Change `json:"changes,omitempty"`
	// Fallback is true when server-side apply rejected the object and it
	// was written with create or update instead.
	Fallback bool `json:"fallback,omitempty"`
	// Adopted is true when the object existed, belonged to no installation,
	// and was taken over (Options.Adopt); Reason says from whom.
	Adopted bool `json:"adopted,omitempty"`
	// Shared is true for an existing object of a kind merged into rather
	// than owned (kinds.Info.MergeIntoExisting): written, never deleted.
	Shared bool `json:"shared,omitempty"`
	// Object is the live object after the write, or the live object when
	// nothing was written; nil for skipped objects.
	Object *unstructured.Unstructured `json:"-"`
	// Generation is Object's metadata.generation (0 without Object): what
	// the write left, or what was found when nothing was written. It
	// outlives Object in a run's results (pkg/reconcile), so that changes
	// seen later can be told from the applier's own.
	Generation int64 `json:"generation,omitempty"`
}

// ConflictError reports a live object that is not ours where a strategy
// object should be.
type ConflictError struct {
	Ref strategy.ObjectRef
	// ManagedBy is the live object's managed-by label ("" when absent).
	ManagedBy string
	// Installation names the other installation ("namespace/name") when
	// the object is another installation's; "" otherwise.
	Installation string
	// System says why the object is a system object that adoption may
	// not take without consent naming it (inventory.AdoptionNeedsConsent);
	// "" otherwise.
	System string
}

func (e *ConflictError) Error() string {
	switch {
	case e.Installation != "":
		return fmt.Sprintf("%s belongs to installation %s; not overwritten", e.Ref, e.Installation)
	case e.System != "":
		return fmt.Sprintf("%s is %s; not overwritten", e.Ref, e.System)
	case e.ManagedBy == "":
		return fmt.Sprintf("%s exists and was not applied by installstrategy (no managed-by label); not overwritten (adopt it to take it over)", e.Ref)
	}
	return fmt.Sprintf("%s exists and is managed by someone else (managed-by %q); not overwritten (adopt it to take it over)", e.Ref, e.ManagedBy)
}

func (a *Applier) conflictOf(ref strategy.ObjectRef, live *unstructured.Unstructured, claim inventory.Claim) *ConflictError {
	e := &ConflictError{Ref: ref, ManagedBy: live.GetLabels()[metakeys.ManagedByLabel]}
	switch {
	case claim == inventory.ClaimOther:
		e.Installation = inventory.OtherOwner(live.GetLabels())
	case claim == inventory.ClaimNone && a.adopts(ref):
		e.System = inventory.AdoptionNeedsConsent(ref, live, a.opts.SystemConsent)
	}
	return e
}

// adopts reports whether the options let ref be adopted, system objects
// aside (see adoptable).
func (a *Applier) adopts(ref strategy.ObjectRef) bool {
	return a.opts.Adopt == AdoptAll && (a.opts.Adoptable == nil || a.opts.Adoptable[ref])
}

// adoptable reports whether live, the object of ref that no installation
// owns, is taken over: the options adopt it, and it is not a system object
// (inventory.SystemObject) that SystemConsent does not name.
func (a *Applier) adoptable(ref strategy.ObjectRef, live *unstructured.Unstructured) bool {
	return a.adopts(ref) && inventory.AdoptionNeedsConsent(ref, live, a.opts.SystemConsent) == ""
}

// NotServedError reports a kind the cluster does not serve.
type NotServedError struct {
	Ref strategy.ObjectRef
}

func (e *NotServedError) Error() string {
	return fmt.Sprintf("%s: kind %s is not served by the cluster", e.Ref, e.Ref.GroupKind())
}

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

// Dynamic returns the dynamic client.
func (a *Applier) Dynamic() dynamic.Interface { return a.dyn }

// ResetMapper forgets what discovery said, so kinds served since are found.
func (a *Applier) ResetMapper() {
	a.mapper.Reset()
	a.fresh.Store(true)
}

// Mapping returns the REST mapping of a kind, or a *NotServedError when the
// cluster does not serve it. Discovery is asked again at most once between
// calls of ResetMapper, so many kinds that are not served cost one
// discovery, not one each.
func (a *Applier) Mapping(ref strategy.ObjectRef, version string) (*meta.RESTMapping, error) {
	gk := ref.GroupKind()
	m, err := a.mapper.RESTMapping(gk, version)
	if meta.IsNoMatchError(err) && a.fresh.CompareAndSwap(false, true) {
		// Ask discovery once more; until the next ResetMapper, kinds that
		// are still missing are not served.
		a.mapper.Reset()
		m, err = a.mapper.RESTMapping(gk, version)
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
func (a *Applier) Resource(obj *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	ref := strategy.RefOf(obj)
	m, err := a.Mapping(ref, obj.GroupVersionKind().Version)
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return a.dyn.Resource(m.Resource).Namespace(obj.GetNamespace()), nil
	}
	return a.dyn.Resource(m.Resource), nil
}

// Get returns the live object of a strategy object, nil when it does not
// exist: from the applier's cache when it holds the object, else from the
// API server.
func (a *Applier) Get(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return a.GetAtLeast(ctx, obj, 0)
}

// GetMetadata is Get for a reader of the object's metadata alone (labels,
// annotations): an object the applier's Probe listed with a cache, which
// Get would read from the API server, is answered from the list, holding
// its metadata only.
func (a *Applier) GetMetadata(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if a.listedMeta != nil {
		if m, ok := a.listedMeta.Load(keyOf(obj)); ok {
			return m.(*unstructured.Unstructured).DeepCopy(), nil
		}
	}
	return a.Get(ctx, obj)
}

// GetAtLeast is Get for an object written at generation gen: a cached copy
// of an older generation (the cache has not seen the write yet) is not
// used; the API server is asked instead.
func (a *Applier) GetAtLeast(ctx context.Context, obj *unstructured.Unstructured, gen int64) (*unstructured.Unstructured, error) {
	ri, err := a.Resource(obj)
	if err != nil {
		return nil, err
	}
	return a.live(ctx, ri, obj, gen)
}

// live reads obj's live object through ri, or from the cache when it holds
// a copy at generation gen or later.
func (a *Applier) live(ctx context.Context, ri dynamic.ResourceInterface, obj *unstructured.Unstructured, gen int64) (*unstructured.Unstructured, error) {
	live, _, err := a.liveOrCached(ctx, ri, obj, gen, false)
	return live, err
}

// liveOrCached is live, also saying whether the object came from the
// cache. readOnly says the caller changes nothing of the object: a bulky
// kind's cached object is then the informer's own, not a copy.
func (a *Applier) liveOrCached(ctx context.Context, ri dynamic.ResourceInterface, obj *unstructured.Unstructured, gen int64, readOnly bool) (*unstructured.Unstructured, bool, error) {
	if a.cacheTrusted() {
		// A cache that cannot answer (not started yet, a kind its mapper
		// does not know yet) is passed by: the API server answers.
		read := a.cache.Cached
		if sr, ok := a.cache.(sharedReader); ok && readOnly {
			if info, _ := kinds.Lookup(obj.GroupVersionKind().GroupKind()); len(info.Bulky) > 0 {
				read = sr.CachedShared
			}
		}
		cached, ok, err := read(ctx, obj.GroupVersionKind(), obj.GetNamespace(), obj.GetName())
		if err == nil && !ok {
			a.usable(obj, nil)
		}
		if err == nil && ok && cached.GetGeneration() >= gen && a.usable(obj, cached) {
			return cached, true, nil
		}
	}
	if a.absent != nil {
		if _, ok := a.absent.Load(keyOf(obj)); ok {
			return nil, false, nil
		}
		if live, ok := a.listed.Load(keyOf(obj)); ok {
			return live.(*unstructured.Unstructured).DeepCopy(), false, nil
		}
	}
	live, err := a.direct(ctx, ri, obj)
	if err == nil {
		a.read(obj, live)
	}
	return live, false, err
}

// direct reads obj's live object from the API server; nil when it does not
// exist.
func (a *Applier) direct(ctx context.Context, ri dynamic.ResourceInterface, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	live, err := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if serverTrouble(err) {
		a.DistrustCache(DistrustFor)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", strategy.RefOf(obj), err)
	}
	return live, nil
}

// Prepare returns the object Apply would write for obj given its live
// object (nil when absent): with the owner's labels and identity (see
// Prepare), or, for an existing object that no installation owns of a kind
// the table merges into (kinds.Info.MergeIntoExisting), only the
// strategy's own fields (see PrepareShared).
func (a *Applier) Prepare(obj, live *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	obj = WithLive(obj, live)
	if live != nil && a.shared(obj, live) {
		return PrepareShared(obj), nil
	}
	prepared, err := prepare(obj, a.opts.Identity, a.opts.Owner, !a.opts.LeavePodTemplates)
	if err != nil || live == nil {
		return prepared, err
	}
	return a.keepTemplate(obj, prepared, live)
}

// keepTemplate returns prepared with the live pod template in place of the
// strategy's when a workload is adopted whose live template already holds
// the strategy's: every field the strategy sets, with its value, plus what
// the previous installer and the server added (its own identity
// annotations, its node placement, an appended list entry, defaults; see
// Additions). Writing the strategy's template instead would change the
// template (if only by the identity annotations) and so replace every pod
// of the workload for nothing. metakeys.KeptTemplateAnnotation records the hash of
// the template that was not written: while it still equals the strategy's
// and the live template still holds the strategy's, the template is kept on
// later applies too; a new strategy or identity, or drift that loses a
// strategy field, writes the strategy's template.
func (a *Applier) keepTemplate(obj, prepared, live *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	info, _ := kinds.Lookup(prepared.GroupVersionKind().GroupKind())
	if info.PodTemplate == nil {
		return prepared, nil
	}
	want, _, err := unstructured.NestedMap(prepared.Object, info.PodTemplate...)
	if err != nil {
		return nil, fmt.Errorf("prepare %s: pod template: %w", strategy.RefOf(obj), err)
	}
	h, err := hashOf(&unstructured.Unstructured{Object: want})
	if err != nil {
		return nil, fmt.Errorf("prepare %s: pod template: %w", strategy.RefOf(obj), err)
	}
	claim := ClaimOf(live, a.opts.Owner)
	adopting := claim == inventory.ClaimNone && a.adoptable(strategy.RefOf(obj), live)
	kept := claim == inventory.ClaimOurs && live.GetAnnotations()[metakeys.KeptTemplateAnnotation] == h
	if !adopting && !kept {
		return prepared, nil
	}
	if _, missing := templateHeld(obj, live); missing != "" {
		return prepared, nil
	}
	tmpl, _, _ := unstructured.NestedMap(live.Object, info.PodTemplate...)
	unstructured.RemoveNestedField(tmpl, "metadata", "creationTimestamp")
	out := prepared.DeepCopy()
	if err := unstructured.SetNestedMap(out.Object, tmpl, info.PodTemplate...); err != nil {
		return nil, fmt.Errorf("prepare %s: pod template: %w", strategy.RefOf(obj), err)
	}
	// The applied hash stays the strategy's: it is a property of the
	// strategy, not of what the previous installer left.
	ann := out.GetAnnotations()
	ann[metakeys.KeptTemplateAnnotation] = h
	out.SetAnnotations(ann)
	return out, nil
}

// writesTemplate reports whether a prepared workload's pod template is
// written as the strategy has it (not kept, see keepTemplate).
func writesTemplate(prepared *unstructured.Unstructured) bool {
	info, _ := kinds.Lookup(prepared.GroupVersionKind().GroupKind())
	_, kept := prepared.GetAnnotations()[metakeys.KeptTemplateAnnotation]
	return info.PodTemplate != nil && !kept
}

// templateHeld reports whether live is a workload whose pod template holds
// the one of the strategy object obj (see Additions; without the identity
// annotations Prepare adds, so obj may be prepared already): workload is false for kinds without a pod
// template, missing names the first field of the strategy's template that
// the live one does not hold ("" when it holds them all).
func templateHeld(obj, live *unstructured.Unstructured) (workload bool, missing string) {
	info, _ := kinds.Lookup(obj.GroupVersionKind().GroupKind())
	if info.PodTemplate == nil {
		return false, ""
	}
	want, _, _ := unstructured.NestedMap(strip(obj).Object, info.PodTemplate...)
	if ann, ok, _ := unstructured.NestedStringMap(want, "metadata", "annotations"); ok {
		delete(ann, metakeys.InstallStrategyVersionAnnotation)
		delete(ann, metakeys.InstallStrategyRegistryAnnotation)
		delete(ann, metakeys.InstallStrategyIdentifierAnnotation)
		_ = unstructured.SetNestedStringMap(want, ann, "metadata", "annotations")
	}
	have, found, _ := unstructured.NestedMap(live.Object, info.PodTemplate...)
	if !found {
		return true, strings.Join(info.PodTemplate, ".")
	}
	if ch := Additions(want, have); len(ch) > 0 {
		return true, "." + strings.Join(info.PodTemplate, ".") + ch[0].Path
	}
	return true, ""
}

// shared reports whether a live object is merged into rather than owned:
// no installation owns it, its kind is merged into (Namespaces), and it is
// not adopted — an implicit object (metakeys.ImplicitAnnotation: a namespace the
// strategy's objects live in but that it does not define) never is.
func (a *Applier) shared(obj, live *unstructured.Unstructured) bool {
	info, _ := kinds.Lookup(live.GroupVersionKind().GroupKind())
	implicit := obj.GetAnnotations()[metakeys.ImplicitAnnotation] != ""
	return info.MergeIntoExisting && ClaimOf(live, a.opts.Owner) == inventory.ClaimNone && (!a.adoptable(strategy.RefOf(obj), live) || implicit)
}

// Decide compares a prepared object (see Applier.Prepare) with its live
// object (nil when absent) and says what Apply would do, without writing.
func (a *Applier) Decide(prepared, live *unstructured.Unstructured) Result {
	res := Result{Ref: strategy.RefOf(prepared), Object: live}
	if live == nil {
		res.Action = ActionCreate
		return res
	}
	claim := ClaimOf(live, a.opts.Owner)
	_, owned := prepared.GetAnnotations()[metakeys.AppliedHashAnnotation]
	released := claim == inventory.ClaimOther && a.released(res.Ref, live)
	switch {
	case released:
	case claim == inventory.ClaimOther:
		res.Action = ActionConflict
		res.Reason = a.conflictOf(res.Ref, live, claim).Error()
		return res
	case claim == inventory.ClaimNone && !owned:
		// Prepared by PrepareShared.
		res.Shared = true
	case claim == inventory.ClaimNone && !a.adoptable(res.Ref, live):
		res.Action = ActionConflict
		res.Reason = a.conflictOf(res.Ref, live, claim).Error()
		return res
	case claim == inventory.ClaimNone:
		res.Adopted = true
	}
	changes := Differences(prepared.Object, live.Object)
	if len(changes) == 0 {
		res.Action = ActionUnchanged
		if res.Shared {
			res.Reason = "existing, not an installation's: merged into, never deleted"
		}
		return res
	}
	res.Action = ActionUpdate
	res.Changes = changes
	switch {
	case res.Adopted:
		res.Reason = "adopted" + fromWhom(live)
		if _, kept := prepared.GetAnnotations()[metakeys.KeptTemplateAnnotation]; kept {
			res.Reason += "; pod template kept (it holds the strategy's)"
		} else if workload, missing := templateHeld(prepared, live); workload && missing != "" {
			res.Reason += "; pod template written, replacing the pods: the live one does not hold the strategy's " + missing
		}
	case res.Shared:
		res.Reason = "existing, not an installation's: the strategy's fields merged in, never deleted"
	case released:
		res.Reason = "taken over from installation " + inventory.OtherOwner(live.GetLabels()) + ", which no longer exists"
	case claim == inventory.ClaimLegacy || claim == inventory.ClaimLegacyShared:
		res.Reason = "relabelled for installation " + a.opts.Owner.String() + " (written by an older installstrategy)"
	case live.GetAnnotations()[metakeys.AppliedHashAnnotation] != prepared.GetAnnotations()[metakeys.AppliedHashAnnotation]:
		res.Reason = "strategy changed"
	default:
		res.Reason = "drift at " + changes[0].Path
	}
	return res
}

// released reports whether live, another installation's object, is one
// Options.Released hands over: its labels still name the installation that
// was found gone.
func (a *Applier) released(ref strategy.ObjectRef, live *unstructured.Unstructured) bool {
	gone, ok := a.opts.Released[ref]
	return ok && gone == inventory.OtherOwner(live.GetLabels())
}

// fromWhom says who wrote an adopted object: its managed-by label and its
// field managers.
func fromWhom(live *unstructured.Unstructured) string {
	var parts []string
	if by := live.GetLabels()[metakeys.ManagedByLabel]; by != "" {
		parts = append(parts, "managed-by "+by)
	}
	seen := map[string]bool{}
	var managers []string
	for _, f := range live.GetManagedFields() {
		if !seen[f.Manager] {
			seen[f.Manager] = true
			managers = append(managers, f.Manager)
		}
	}
	if len(managers) > 0 {
		parts = append(parts, "field managers "+strings.Join(managers, ", "))
	}
	if len(parts) == 0 {
		return ""
	}
	return " from " + strings.Join(parts, "; ")
}

// Apply makes the live object match obj (a strategy object): it prepares
// it, skips the write when nothing changed, and otherwise writes it with
// server-side apply, falling back to create/update when server-side apply
// rejects the object and recreating it when an immutable field changes. A
// kind the cluster does not serve gives ActionSkip with the reason and no
// error; an object that is not ours gives ActionConflict and a
// *ConflictError.
func (a *Applier) Apply(ctx context.Context, obj *unstructured.Unstructured) (Result, error) {
	var res Result
	err := a.retry(ctx, func() error {
		var err error
		res, err = a.applyOnce(ctx, obj)
		return err
	})
	if res.Object != nil {
		res.Generation = res.Object.GetGeneration()
	}
	return res, err
}

func (a *Applier) applyOnce(ctx context.Context, obj *unstructured.Unstructured) (Result, error) {
	ref := strategy.RefOf(obj)
	ri, err := a.Resource(obj)
	var notServed *NotServedError
	if errors.As(err, &notServed) {
		return Result{Ref: ref, Action: ActionSkip, Reason: notServed.Error()}, nil
	}
	if err != nil {
		return Result{Ref: ref}, err
	}
	if sh, ok := a.cache.(sharer); ok && !a.opts.DryRun {
		sh.Share(obj)
	}
	// The write's decision only reads live (and Result.Object is read
	// only): a bulky kind's cached object is not copied for it.
	live, cached, err := a.liveOrCached(ctx, ri, obj, 0, true)
	if err != nil {
		return Result{Ref: ref}, err
	}
	if cached && ClaimOf(live, a.opts.Owner) != inventory.ClaimOurs {
		// A cached copy that is not this installation's decides only that
		// nothing is to be written: a conflict, a relabelling or an
		// adoption is decided on the live object (with its field
		// managers), not on a copy that may lag behind.
		prepared, err := a.Prepare(obj, live)
		if err != nil {
			return Result{Ref: ref}, err
		}
		if res := a.Decide(prepared, live); res.Action == ActionUnchanged {
			return res, nil
		}
		if live, err = a.direct(ctx, ri, obj); err != nil {
			return Result{Ref: ref}, err
		}
	}
	// A cached copy of our own object is not behind this applier's writes
	// (see usable): the server-side apply below writes the strategy's
	// fields whatever the live object holds, so a copy that lags behind
	// someone else's write costs at most a write that changes nothing.
	if live != nil && live.GetDeletionTimestamp() != nil && !a.opts.DryRun && IsOurs(live, a.opts.Owner) {
		// Writing to an object being deleted would be lost: wait until it
		// is gone, then create it anew.
		if err := waitGone(ctx, ri, live.GetName(), live.GetUID()); err != nil {
			return Result{Ref: ref}, fmt.Errorf("%s: wait for the deletion in progress: %w", ref, err)
		}
		live = nil
	}
	prepared, err := a.Prepare(obj, live)
	if err != nil {
		return Result{Ref: ref}, err
	}
	res := a.Decide(prepared, live)
	switch res.Action {
	case ActionUnchanged:
		return res, nil
	case ActionConflict:
		return res, a.conflictOf(ref, live, ClaimOf(live, a.opts.Owner))
	}
	if a.absent != nil && !a.opts.DryRun {
		// Whatever the write does, later reads ask the API server.
		a.absent.Delete(keyOf(obj))
		a.listed.Delete(keyOf(obj))
		a.listedMeta.Delete(keyOf(obj))
	}
	if res.Adopted && !a.opts.DryRun && writesTemplate(prepared) {
		// An adopted workload whose pod template is replaced gets the
		// strategy's template, not a mix of it and the previous
		// installer's: its fields become ours before the write, so the
		// write removes those the strategy does not set. A mix is a pod
		// spec nobody wrote: virt-operator's required control-plane
		// affinity beside the strategy's tolerations (an atomic list,
		// replaced) schedules nowhere.
		if live, err = a.takeFields(ctx, ri, live, live.GetLabels()[metakeys.ManagedByLabel]); err != nil {
			return res, fmt.Errorf("adopt %s: %w", ref, err)
		}
	}
	out, fallback, err := a.write(ctx, ri, prepared, live)
	if err != nil && isImmutable(err) && live != nil {
		if info, _ := kinds.Lookup(ref.GroupKind()); info.NeverRecreate && !a.opts.Recreate[ref] {
			res.Action = ActionRefuse
			res.Reason = "immutable field changed; a " + ref.Kind + " is never deleted to change one (what it defines would go with it): " + err.Error()
			if a.opts.DryRun {
				return res, nil
			}
			return res, fmt.Errorf("apply %s: %s", ref, res.Reason)
		}
		res.Action = ActionRecreate
		res.Reason = "immutable field changed: " + err.Error()
		if a.opts.DryRun {
			return res, nil
		}
		out, fallback, err = a.recreate(ctx, ri, prepared, live)
	}
	if err != nil {
		return res, fmt.Errorf("apply %s: %w", ref, err)
	}
	a.Wrote(out)
	res.Object, res.Fallback = out, fallback
	if res.Adopted && !a.opts.DryRun {
		// The object is ours now: fields other appliers set are ours too,
		// so a later strategy that drops one removes it.
		if res.Object, err = a.takeFields(ctx, ri, out, live.GetLabels()[metakeys.ManagedByLabel]); err != nil {
			return res, fmt.Errorf("adopt %s: %w", ref, err)
		}
		a.Wrote(res.Object)
	}
	if fallback {
		if res.Reason != "" {
			res.Reason += "; "
		}
		res.Reason += "server-side apply rejected the object, written with " + map[bool]string{true: "create", false: "update"}[live == nil]
	}
	return res, nil
}

// sharedReader is a Cache that can return its own copy of an object to a
// reader that does not change it (InformerCache.CachedShared).
type sharedReader interface {
	CachedShared(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, bool, error)
}

// sharer is a Cache that holds the strategy's values of bulky fields
// instead of copies (InformerCache.Share).
type sharer interface {
	Share(obj *unstructured.Unstructured)
}

func (a *Applier) dryRun() []string {
	if a.opts.DryRun {
		return []string{metav1.DryRunAll}
	}
	return nil
}

// write applies prepared with server-side apply, or with create/update when
// server-side apply rejects the object itself.
func (a *Applier) write(ctx context.Context, ri dynamic.ResourceInterface, prepared, live *unstructured.Unstructured) (*unstructured.Unstructured, bool, error) {
	force := true
	out, err := ri.Apply(ctx, prepared.GetName(), prepared, metav1.ApplyOptions{FieldManager: a.opts.FieldManager, Force: force, DryRun: a.dryRun()})
	if err == nil || !IsSSARejection(err) {
		return out, false, err
	}
	if live == nil {
		out, err = ri.Create(ctx, prepared, metav1.CreateOptions{FieldManager: a.opts.FieldManager, DryRun: a.dryRun()})
		return out, true, err
	}
	// Update with the full object, carrying the live resourceVersion; the
	// live object may have moved on (status writes), so retry on conflict.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		upd := prepared.DeepCopy()
		upd.SetResourceVersion(live.GetResourceVersion())
		var uerr error
		out, uerr = ri.Update(ctx, upd, metav1.UpdateOptions{FieldManager: a.opts.FieldManager, DryRun: a.dryRun()})
		if apierrors.IsConflict(uerr) {
			cur, gerr := ri.Get(ctx, prepared.GetName(), metav1.GetOptions{})
			if gerr != nil {
				return gerr
			}
			live = cur
		}
		return uerr
	})
	return out, true, err
}

// recreate deletes live, waits until it is gone and writes prepared anew.
func (a *Applier) recreate(ctx context.Context, ri dynamic.ResourceInterface, prepared, live *unstructured.Unstructured) (*unstructured.Unstructured, bool, error) {
	uid := live.GetUID()
	bg := metav1.DeletePropagationBackground
	err := ri.Delete(ctx, live.GetName(), metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return nil, false, fmt.Errorf("delete for recreate: %w", err)
	}
	if err := waitGone(ctx, ri, live.GetName(), uid); err != nil {
		return nil, false, fmt.Errorf("delete for recreate: %w", err)
	}
	return a.write(ctx, ri, prepared, nil)
}

// waitGone polls until the object with the given UID no longer exists.
func waitGone(ctx context.Context, ri dynamic.ResourceInterface, name string, uid types.UID) error {
	return wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		cur, err := ri.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		return cur.GetUID() != uid, nil
	})
}

// Delete deletes a live object (in the background) if it is still the same
// object (same UID). A dry-run applier only asks the server.
func (a *Applier) Delete(ctx context.Context, live *unstructured.Unstructured) error {
	ri, err := a.Resource(live)
	if err != nil {
		return err
	}
	uid := live.GetUID()
	bg := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &bg, DryRun: a.dryRun()}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err = a.retry(ctx, func() error {
		err := ri.Delete(ctx, live.GetName(), opts)
		if apierrors.IsConflict(err) {
			// The UID precondition failed: the object was replaced, and
			// the new one is not the one to delete.
			return nil
		}
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete %s: %w", strategy.RefOf(live), err)
	}
	if a.cache != nil && !a.opts.DryRun {
		a.seen.Store(keyOf(live), "")
	}
	return nil
}

// IsSSARejection reports whether server-side apply refused an object
// because the object itself cannot be converted to its structured form
// (e.g. a list keyed by containerPort holding the same key twice), the case
// in which create/update still works.
func IsSSARejection(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "duplicate entries for key") || strings.Contains(msg, "failed to create typed")
}

// isImmutable reports whether the server refused a change to an immutable
// field.
func isImmutable(err error) bool {
	return apierrors.IsInvalid(err) && (strings.Contains(err.Error(), "immutable") || strings.Contains(err.Error(), "may not change"))
}

// GroupVersionResource returns the resource of a kind as served.
func (a *Applier) GroupVersionResource(gk schema.GroupKind, version string) (schema.GroupVersionResource, bool, error) {
	m, err := a.Mapping(strategy.ObjectRef{Group: gk.Group, Kind: gk.Kind}, version)
	if err != nil {
		return schema.GroupVersionResource{}, false, err
	}
	return m.Resource, m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

// WaitGone waits until a live object (the one with its UID) no longer
// exists.
func (a *Applier) WaitGone(ctx context.Context, live *unstructured.Unstructured) error {
	ri, err := a.Resource(live)
	if err != nil {
		return err
	}
	if err := waitGone(ctx, ri, live.GetName(), live.GetUID()); err != nil {
		return fmt.Errorf("wait for %s to be gone: %w", strategy.RefOf(live), err)
	}
	return nil
}

// takeFields gives the applier's field manager the fields the previous
// installer set on an adopted object — server-side appliers (kubectl apply
// --server-side, Helm 4, Flux), kubectl's and Helm's client-side writes, and
// the client-side writes of the managers named after the object's
// managed-by label before the adoption (previous; KubeVirt's virt-operator
// labels what it writes "virt-operator", and its field manager is its
// binary's name: virt-operator, or virt-operator-v1.9.0 for a binary so
// named) —
// with one JSON patch guarded by the object's resourceVersion. Fields of
// controllers (kube-controller-manager's revision annotation, status) stay
// theirs.
func (a *Applier) takeFields(ctx context.Context, ri dynamic.ResourceInterface, obj *unstructured.Unstructured, previous string) (*unstructured.Unstructured, error) {
	for attempt := 1; ; attempt++ {
		out, err := a.takeFieldsAt(ctx, ri, obj, previous)
		// A failed resourceVersion test is a 422 (or 400, 409): someone
		// wrote the object since (the Deployment controller's status, say).
		// Take the fields again on the latest version.
		if err == nil || attempt == 5 || !(apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsConflict(err)) {
			return out, err
		}
		if obj, err = ri.Get(ctx, obj.GetName(), metav1.GetOptions{}); err != nil {
			return nil, err
		}
	}
}

// takeFieldsAt is takeFields on obj's resourceVersion.
func (a *Applier) takeFieldsAt(ctx context.Context, ri dynamic.ResourceInterface, obj *unstructured.Unstructured, previous string) (*unstructured.Unstructured, error) {
	var keep []metav1.ManagedFieldsEntry
	changed := false
	for _, f := range obj.GetManagedFields() {
		if f.Manager != a.opts.FieldManager && f.Subresource == "" && installerManager(f, previous) {
			changed = true
			f.Manager = a.opts.FieldManager
			f.Operation = metav1.ManagedFieldsOperationApply
		}
		keep = append(keep, f)
	}
	if !changed {
		return obj, nil
	}
	// Entries of one manager and operation must be merged into one: keep
	// the applier's own Apply entry, whose field set the next apply
	// recomputes, and union the others into it.
	merged, err := mergeManagedFields(keep, a.opts.FieldManager)
	if err != nil {
		return nil, err
	}
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/resourceVersion", "value": obj.GetResourceVersion()},
		{"op": "replace", "path": "/metadata/managedFields", "value": merged},
	})
	if err != nil {
		return nil, err
	}
	return ri.Patch(ctx, obj.GetName(), types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: a.opts.FieldManager})
}

// InheritsFields reports whether adopting live gives the applier's field
// manager the fields of entry f (see takeFields): f is an installer's
// (server-side appliers, kubectl, Helm, the manager named by live's
// managed-by label) and not a subresource's.
func InheritsFields(f metav1.ManagedFieldsEntry, live *unstructured.Unstructured) bool {
	return f.Subresource == "" && installerManager(f, live.GetLabels()[metakeys.ManagedByLabel])
}

// installerManager reports field managers of tools that install manifests:
// server-side appliers, kubectl, Helm, and the managers whose name starts
// with the object's managed-by label before the adoption (previous, "" for
// none), case aside.
func installerManager(f metav1.ManagedFieldsEntry, previous string) bool {
	return f.Operation == metav1.ManagedFieldsOperationApply || strings.HasPrefix(f.Manager, "kubectl") || strings.HasPrefix(f.Manager, "helm") ||
		(previous != "" && strings.HasPrefix(strings.ToLower(f.Manager), strings.ToLower(previous)))
}

// mergeManagedFields unions the field sets of entries that share a manager,
// operation and subresource, so the list stays valid after renaming.
func mergeManagedFields(entries []metav1.ManagedFieldsEntry, manager string) ([]metav1.ManagedFieldsEntry, error) {
	type key struct{ manager, op, sub, api string }
	var order []key
	sets := map[key]*fieldpath.Set{}
	first := map[key]metav1.ManagedFieldsEntry{}
	for _, e := range entries {
		k := key{e.Manager, string(e.Operation), e.Subresource, e.APIVersion}
		set := &fieldpath.Set{}
		if e.FieldsV1 != nil {
			if err := set.FromJSON(bytes.NewReader(e.FieldsV1.Raw)); err != nil {
				return nil, fmt.Errorf("managed fields of %s: %w", e.Manager, err)
			}
		}
		if prev, ok := sets[k]; ok {
			sets[k] = prev.Union(set)
			continue
		}
		order = append(order, k)
		sets[k], first[k] = set, e
	}
	out := make([]metav1.ManagedFieldsEntry, 0, len(order))
	for _, k := range order {
		e := first[k]
		raw, err := sets[k].ToJSON()
		if err != nil {
			return nil, fmt.Errorf("managed fields of %s: %w", manager, err)
		}
		e.FieldsV1 = &metav1.FieldsV1{Raw: raw}
		out = append(out, e)
	}
	return out, nil
}
