package engine

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// The interfaces below are what the engine's parts use of a cluster,
// declared here where they are consumed, as pkg/plan declares what an
// observation reads (plan.Getter, plan.Reader, plan.Discovery,
// plan.Decider, plan.Writer, plan.Cluster), which the engine reuses. A
// Reconciler and its runs hold an applier (the interface below), not the
// concrete *apply.Applier: what a run decides (its steps, waits, canary,
// certificates, storage-version migration, CRD preflight, prune) reads and
// writes through it, so a test can run them over fakes that need no
// cluster (*_fake_test.go). The parts that need less (the delete path of
// prune and uninstall, hook phases, the claim check) take narrower
// interfaces still.

// deleter deletes live objects.
type deleter interface {
	// Delete deletes a live object if it is still the same object (its
	// UID).
	Delete(ctx context.Context, live *unstructured.Unstructured) error
	// WaitGone waits until a deleted object is gone.
	WaitGone(ctx context.Context, live *unstructured.Unstructured) error
}

// metadataReader reads the labels and annotations of live objects.
type metadataReader interface {
	// GetMetadata returns the live object of a strategy object, with its
	// metadata at least; nil when it does not exist.
	GetMetadata(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error)
}

// holders finds the installation whose labels an object carries
// (inventory.Store implements it).
type holders interface {
	// Holder returns the installation the labels name and whether its
	// inventory still exists.
	Holder(ctx context.Context, labels map[string]string) (owner inventory.Owner, alive bool, err error)
}

// namespacedKinds tells which namespaced kinds the cluster serves
// (client-go's discovery client implements it).
type namespacedKinds interface {
	ServerPreferredNamespacedResources() ([]*metav1.APIResourceList, error)
}

// deleteClients is what the delete path of prune and uninstall uses
// (deleteItems): a deleter for the items, and, for what no strategy names
// (the other objects of a namespace, the custom resources of a CRD), the
// served kinds and a dynamic client to list them.
type deleteClients struct {
	Deleter deleter
	Kinds   namespacedKinds
	Dynamic dynamic.Interface
}

// newDeleteClients returns the delete path's clients over an applier and
// a typed client.
func newDeleteClients(a applier, kube kubernetes.Interface) deleteClients {
	c := deleteClients{Deleter: a, Dynamic: a.Dynamic()}
	if kube != nil {
		c.Kinds = kube.Discovery()
	}
	return c
}

// hookClient is what a hook phase uses (hookRunner): it reads, writes and
// deletes the hook objects.
type hookClient interface {
	plan.Getter
	plan.Writer
	deleter
}

// liveReader reads live objects: what plan.Reader reads, their metadata,
// and an object at the generation a write returned.
type liveReader interface {
	plan.Reader
	metadataReader
	// GetAtLeast is Get for an object written at generation gen: a cached
	// copy of an older generation is not taken.
	GetAtLeast(ctx context.Context, obj *unstructured.Unstructured, gen int64) (*unstructured.Unstructured, error)
}

// cacheView tells how far what a liveReader reads may lag behind the API
// server (apply.Applier.WithCache), for the waits.
type cacheView interface {
	// Cached reports whether live objects are read from a cache.
	Cached() bool
	// Changed returns a function whose channel closes at the cache's next
	// change (health.WaitOptions.Changed); nil without such a cache.
	Changed() func() <-chan struct{}
	// DistrustCache reads past the cache for d.
	DistrustCache(d time.Duration)
}

// rawWriter writes by other paths than Apply (a status update, the
// rewrite of stored custom resources, a CA bundle published ahead of its
// step), with the applier's retry of transient failures, and records
// those writes for the cache.
type rawWriter interface {
	// Resource returns the client of an object's resource.
	Resource(obj *unstructured.Unstructured) (dynamic.ResourceInterface, error)
	// Dynamic returns the dynamic client (for kinds no strategy object
	// names: custom resources at a version).
	Dynamic() dynamic.Interface
	// Retry runs f until it succeeds, fails for good, or the applier's
	// RetryFor runs out.
	Retry(ctx context.Context, f func() error) error
	// Wrote records an object as a write by another path returned it.
	Wrote(obj *unstructured.Unstructured)
}

// kindMapper resolves kinds: what plan.Discovery says, forgetting it
// (kinds served or removed since are seen), and the namespaces of a
// strategy's objects by their kinds' scope.
type kindMapper interface {
	plan.Discovery
	// ResetMapper forgets what discovery said.
	ResetMapper()
	// DefaultNamespaces returns s with the namespace of namespaced
	// objects that have none set to ns (apply.Applier.DefaultNamespaces).
	DefaultNamespaces(s *strategy.Strategy, ns string) (*strategy.Strategy, error)
}

// clusterCalls is every call a run makes of its applier but those that
// derive another applier: reads, decisions, writes, deletes.
// *apply.Applier implements it.
type clusterCalls interface {
	plan.Cluster
	plan.Writer
	deleter
	liveReader
	cacheView
	rawWriter
	kindMapper
}

// applier is what a Reconciler and its runs hold: the calls of
// clusterCalls, and the appliers a call derives from it (its options, a
// probe of a step's objects, a dry runner, a reader past the cache, a
// cache). Go has no covariant results, so *apply.Applier, whose
// derivations return *apply.Applier, implements it through applierOf.
type applier interface {
	clusterCalls
	// WithOptions returns an applier with other options (the run's, the
	// objects released or recreated by its preflight).
	WithOptions(opts apply.Options) applier
	// Probe returns an applier for applying objs that already knows which
	// of them exist (apply.Applier.Probe).
	Probe(ctx context.Context, objs []*unstructured.Unstructured) applier
	// DryRunner returns an applier whose writes are server-side dry runs.
	DryRunner() applier
	// Direct returns an applier that reads every live object from the API
	// server.
	Direct() applier
	// WithCache returns an applier reading live objects from c where c
	// holds them.
	WithCache(c apply.Cache) applier
}

// applierOf is an *apply.Applier as an applier: its derivations return
// applierOf.
type applierOf struct{ *apply.Applier }

func (a applierOf) WithOptions(opts apply.Options) applier {
	return applierOf{a.Applier.WithOptions(opts)}
}

func (a applierOf) Probe(ctx context.Context, objs []*unstructured.Unstructured) applier {
	return applierOf{a.Applier.Probe(ctx, objs)}
}

func (a applierOf) DryRunner() applier { return applierOf{a.Applier.DryRunner()} }

func (a applierOf) Direct() applier { return applierOf{a.Applier.Direct()} }

func (a applierOf) WithCache(c apply.Cache) applier { return applierOf{a.Applier.WithCache(c)} }

// The applier and the discovery client implement what the engine's parts
// consume; a rename on either side fails here, not silently at run time.
var (
	_ clusterCalls   = (*apply.Applier)(nil)
	_ applier        = applierOf{}
	_ deleter        = (*apply.Applier)(nil)
	_ hookClient     = (*apply.Applier)(nil)
	_ plan.Cluster   = (*apply.Applier)(nil)
	_ metadataReader = (*apply.Applier)(nil)
	// The applier's parts each serve the reads or the kind mapping alone.
	_ liveReader      = (*apply.Reader)(nil)
	_ cacheView       = (*apply.Reader)(nil)
	_ kindMapper      = (*apply.Kinds)(nil)
	_ namespacedKinds = (discovery.DiscoveryInterface)(nil)
	_ holders         = (*inventory.Store)(nil)
)
