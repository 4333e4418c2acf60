package render

import (
	"fmt"

	"helm.sh/helm/v4/pkg/engine"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/installstrategy/installstrategy/pkg/render/helmspec"
)

// lookupObjects is the engine.ClientProvider of a render with
// HelmOptions.Lookup: Helm's own lookup function (engine's
// newLookupFunction, as helm install and helm upgrade run it) asks it for
// a kind's client, and it answers with an in-memory client (client-go's
// fake dynamic client) that holds the given objects and nothing else. So
// lookup answers exactly as against a cluster that holds only those
// objects: found, not found, or a list, and a write a template could not
// make anyway changes nothing real.
type lookupObjects struct {
	client *dynamicfake.FakeDynamicClient
	// stored maps a kind to the resource its objects are held under (at
	// the version they were read at): a lookup names a kind at any
	// version.
	stored map[schema.GroupKind]schema.GroupVersionResource
}

// newLookupObjects holds the objects of l, each of which must be
// namespaced in namespace.
func newLookupObjects(l *helmspec.Lookup, namespace string) (*lookupObjects, error) {
	p := &lookupObjects{stored: map[schema.GroupKind]schema.GroupVersionResource{}}
	listKinds := map[schema.GroupVersionResource]string{}
	objs := make([]runtime.Object, 0, len(l.Objects))
	for _, o := range l.Objects {
		if o == nil {
			continue
		}
		gvk := o.GroupVersionKind()
		what := fmt.Sprintf("%s %s/%s", gvk.Kind, o.GetNamespace(), o.GetName())
		if gvk.Kind == "" || gvk.Version == "" || o.GetName() == "" {
			return nil, fmt.Errorf("lookup object %s: no apiVersion, kind or name", what)
		}
		if o.GetNamespace() != namespace {
			return nil, fmt.Errorf("lookup object %s: not in the release namespace %s", what, namespace)
		}
		if gvr, ok := p.stored[gvk.GroupKind()]; ok && gvr.Version != gvk.Version {
			return nil, fmt.Errorf("lookup object %s: read at %s, another of its kind at %s", what, gvk.Version, gvr.Version)
		}
		gvr, _ := meta.UnsafeGuessKindToResource(gvk)
		p.stored[gvk.GroupKind()] = gvr
		listKinds[gvr] = gvk.Kind + "List"
		objs = append(objs, o.DeepCopy())
	}
	p.client = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, objs...)
	return p, nil
}

// GetClientFor is engine.ClientProvider's: the client of a kind, which
// holds the given objects of that kind. Every kind is answered as
// namespaced; a cluster-scoped object is never among the objects, so a
// lookup of one finds nothing, as a lookup of a kind the given objects do
// not have.
func (p *lookupObjects) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	gvk := schema.FromAPIVersionAndKind(apiVersion, kind)
	if gvr, ok := p.stored[gvk.GroupKind()]; ok {
		return p.client.Resource(gvr), true, nil
	}
	gvr, _ := meta.UnsafeGuessKindToResource(gvk)
	empty := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: kind + "List"})
	return empty.Resource(gvr), true, nil
}

var _ engine.ClientProvider = (*lookupObjects)(nil)
