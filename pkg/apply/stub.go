package apply

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/metakeys"
)

// The informers select objects by the managed-by label, which anyone who
// may write an object can set: a tenant who labels ConfigMaps of a
// megabyte in their namespace would have the operator hold them whole.
// So the informers keep whole only the namespaced objects the applier has
// read or written (wanted); every other namespaced object is kept as a
// stub of its metadata (stubOf), enough for the watches (name, version,
// generation, our labels). A read of a stub goes to the API server once;
// the applier hands the live object back (Keep), which is kept beside the
// informer and served while the informer's stub is at its
// resourceVersion, and from the object's next change the informer keeps
// it whole. Cluster-scoped objects are kept whole: creating one takes
// cluster-wide rights.

// stubMarker is the top-level key that marks an informer's object as a
// stub: no Kubernetes object has it (it is no valid field name), and it
// never leaves the process.
const stubMarker = "(stub)"

// stubLabels are the labels a stub keeps: those that say which
// installation wrote an object (inventory.ByAnInstallation, the drift
// watch), each of bounded size.
var stubLabels = []string{metakeys.ManagedByLabel, metakeys.InstallationLabel, metakeys.InstallationNamespaceLabel}

// stubOf returns the stub of u: its kind, name, namespace, uid,
// resourceVersion, generation, deletion timestamp and stubLabels.
func stubOf(u *unstructured.Unstructured) *unstructured.Unstructured {
	s := &unstructured.Unstructured{Object: map[string]any{stubMarker: true}}
	s.SetAPIVersion(u.GetAPIVersion())
	s.SetKind(u.GetKind())
	s.SetName(u.GetName())
	s.SetNamespace(u.GetNamespace())
	s.SetUID(u.GetUID())
	s.SetResourceVersion(u.GetResourceVersion())
	s.SetGeneration(u.GetGeneration())
	s.SetDeletionTimestamp(u.GetDeletionTimestamp())
	var labels map[string]string
	all := u.GetLabels()
	for _, k := range stubLabels {
		if v, ok := all[k]; ok {
			if labels == nil {
				labels = map[string]string{}
			}
			labels[k] = v
		}
	}
	s.SetLabels(labels)
	return s
}

// isStub reports whether u is an informer's stub.
func isStub(u *unstructured.Unstructured) bool {
	_, ok := u.Object[stubMarker]
	return ok
}

// wanted reports whether the informers keep the object of k whole.
func (c *InformerCache) wanted(k cacheKey) bool {
	if k.namespace == "" {
		return true
	}
	_, ok := c.want.Load(k)
	return ok
}

// Keep records live, an object the applier read from the API server or
// wrote, as one the informers keep whole from its next change on, and,
// until then, keeps it beside the informer's stub of it (served while the
// stub is at its resourceVersion). The cache keeps its own copy.
func (c *InformerCache) Keep(live *unstructured.Unstructured) {
	if live == nil || live.GetNamespace() == "" {
		return
	}
	k := keyOf(live)
	if _, had := c.want.LoadOrStore(k, struct{}{}); had {
		// Wanted before: the informer holds it whole since its last change
		// (which dropped the copy), unless a kept copy still stands in for
		// a stub. Another copy would only sit beside the whole one.
		if _, ok := c.side.Load(k); !ok {
			return
		}
	}
	// Only an object the informers select can be a stub there.
	if live.GetLabels()[metakeys.ManagedByLabel] == metakeys.ManagedBy {
		kept := live.DeepCopy()
		// As the informers hold it (NewInformerCache's transform).
		kept.SetManagedFields(nil)
		c.side.Store(k, kept)
	}
}

// fromStub returns what the cache holds for an object whose informer
// holds the stub s: the copy Keep kept when it is at s's version, which
// the caller must not change.
func (c *InformerCache) fromStub(k cacheKey, s *unstructured.Unstructured) (*unstructured.Unstructured, bool) {
	v, ok := c.side.Load(k)
	if !ok {
		return nil, false
	}
	kept := v.(*unstructured.Unstructured)
	if kept.GetResourceVersion() != s.GetResourceVersion() {
		return nil, false
	}
	return kept, true
}
