package engine

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/plan"
)

// The interfaces below are what the engine's parts use of a cluster,
// declared here where they are consumed, as pkg/plan declares what an
// observation reads (plan.Getter, plan.Reader, plan.Discovery,
// plan.Decider, plan.Writer, plan.Cluster), which the engine reuses. A
// Reconciler holds the one *apply.Applier and derives from it what a call
// needs (its options, a probe of a step's objects, a dry runner, a direct
// reader); the parts it hands them to (the delete path of prune and
// uninstall, hook phases, the claim check) take only these interfaces, so
// a test can give them fakes that need no cluster (*_fake_test.go).

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
func newDeleteClients(a *apply.Applier, kube kubernetes.Interface) deleteClients {
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

// The applier and the discovery client implement what the engine's parts
// consume; a rename on either side fails here, not silently at run time.
var (
	_ deleter         = (*apply.Applier)(nil)
	_ hookClient      = (*apply.Applier)(nil)
	_ plan.Cluster    = (*apply.Applier)(nil)
	_ metadataReader  = (*apply.Applier)(nil)
	_ namespacedKinds = (discovery.DiscoveryInterface)(nil)
	_ holders         = (*inventory.Store)(nil)
)
