package plan

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// The interfaces below are what the observation of a plan reads and asks,
// declared here where they are consumed (as controller-runtime's
// client.Reader and client.Writer are): *apply.Applier implements them
// against a cluster, and a test can implement them over a snapshot of live
// objects. Every decision of this package (create, update, skip, prune,
// keep) is made over what they return; none of them writes.

// Getter reads the live object of a strategy object.
type Getter interface {
	// Get returns the live object of a strategy object, nil when it does
	// not exist.
	Get(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error)
}

// Reader reads live objects.
type Reader interface {
	Getter
	// GetRef returns the live object of ref at the version the cluster
	// prefers, nil when it does not exist or its kind is not served.
	GetRef(ctx context.Context, ref strategy.ObjectRef) (*unstructured.Unstructured, error)
	// List returns the objects of a kind (at version) that match a label
	// selector, in every namespace; nil when the kind is not served.
	List(ctx context.Context, gk schema.GroupKind, version, selector string) ([]*unstructured.Unstructured, error)
}

// Discovery tells which kinds the cluster serves.
type Discovery interface {
	// Mapping returns the REST mapping of a kind, or an
	// *apply.NotServedError when the cluster does not serve it.
	Mapping(ref strategy.ObjectRef, version string) (*meta.RESTMapping, error)
}

// Decider says what a write of a strategy object would be, without
// writing: a function of its options and the live object.
type Decider interface {
	// Options returns the options, the installation's identity among them.
	Options() apply.Options
	// Prepare returns the object a write of obj would send, given its live
	// object (nil when absent).
	Prepare(obj, live *unstructured.Unstructured) (*unstructured.Unstructured, error)
	// Decide compares a prepared object with its live object.
	Decide(prepared, live *unstructured.Unstructured) apply.Result
}

// Writer writes a strategy object. Observe is given one whose writes are
// server-side dry runs (apply.Applier.DryRunner), so that the API server
// and its admission webhooks judge the write without it happening.
type Writer interface {
	Apply(ctx context.Context, obj *unstructured.Unstructured) (apply.Result, error)
}

// Cluster is what Observe, Prunable, Removable and LegacyObjects read:
// live objects, served kinds, and the write decision.
type Cluster interface {
	Reader
	Discovery
	Decider
}

// Both halves of the applier implement what this package consumes.
var (
	_ Cluster = (*apply.Applier)(nil)
	_ Writer  = (*apply.Applier)(nil)
)
