// Package strategy owns the install strategy model: an ordered set of
// Kubernetes objects plus the identity (version, registry, identifier) of the
// configuration that produced them. It parses the manifests text that
// KubeVirt-style operators store in their strategy ConfigMaps, repairing the
// quirks KubeVirt's own loader tolerates (and reporting each repair), and it
// serialises a strategy back in KubeVirt's kind order and form, byte for byte
// deterministic.
package strategy

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/installstrategy/installstrategy/pkg/kinds"
)

// Identity names the configuration a strategy was generated for.
type Identity struct {
	// Version is the product version, e.g. "v1.9.0".
	Version string `json:"version,omitempty"`
	// Registry is the image registry, e.g. "quay.io/kubevirt".
	Registry string `json:"registry,omitempty"`
	// Identifier is the deployment ID: a hash of the whole deployment
	// configuration. Empty for legacy strategies.
	Identifier string `json:"identifier,omitempty"`
}

// Strategy is an install strategy: its identity and its objects in
// serialisation order.
type Strategy struct {
	Identity Identity
	// Objects holds every object once. Parse leaves them in serialisation
	// order; code that appends should call Sort.
	Objects []*unstructured.Unstructured
}

// ObjectRef identifies an object within a strategy.
type ObjectRef struct {
	Group     string `json:"group,omitempty"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// Object is what RefOf reads: a strategy object (*unstructured.Unstructured)
// or any other Kubernetes object that carries its kind.
type Object interface {
	GetObjectKind() schema.ObjectKind
	GetNamespace() string
	GetName() string
}

// RefOf returns the reference of an object.
func RefOf(o Object) ObjectRef {
	gvk := o.GetObjectKind().GroupVersionKind()
	return ObjectRef{Group: gvk.Group, Kind: gvk.Kind, Namespace: o.GetNamespace(), Name: o.GetName()}
}

// GroupKind returns the reference's group and kind.
func (r ObjectRef) GroupKind() schema.GroupKind {
	return schema.GroupKind{Group: r.Group, Kind: r.Kind}
}

// String renders the reference as kubectl would name it: Kind.group/name
// with the namespace prefixed when there is one.
func (r ObjectRef) String() string {
	kind := r.Kind
	if r.Group != "" {
		kind += "." + r.Group
	}
	if r.Namespace == "" {
		return kind + "/" + r.Name
	}
	return kind + "/" + r.Namespace + "/" + r.Name
}

// Less orders references by kind order, then namespace, then name.
func (r ObjectRef) Less(o ObjectRef) bool {
	if r.GroupKind() != o.GroupKind() {
		return kinds.Less(r.GroupKind(), o.GroupKind())
	}
	if r.Namespace != o.Namespace {
		return r.Namespace < o.Namespace
	}
	return r.Name < o.Name
}

// Sort puts the objects in serialisation order: by the kind table, keeping
// the existing order among objects of one kind.
func (s *Strategy) Sort() {
	sort.SliceStable(s.Objects, func(i, j int) bool {
		a, b := s.Objects[i].GroupVersionKind().GroupKind(), s.Objects[j].GroupVersionKind().GroupKind()
		return a != b && kinds.Less(a, b)
	})
}

// Index returns the objects keyed by reference.
func (s *Strategy) Index() map[ObjectRef]*unstructured.Unstructured {
	out := make(map[ObjectRef]*unstructured.Unstructured, len(s.Objects))
	for _, o := range s.Objects {
		out[RefOf(o)] = o
	}
	return out
}

// KindCount is the number of objects of one kind.
type KindCount struct {
	Group string `json:"group,omitempty"`
	Kind  string `json:"kind"`
	Count int    `json:"count"`
	// Known is false for kinds that are not in the kind table.
	Known bool `json:"known"`
}

// CountByKind counts objects per kind, in serialisation order.
func (s *Strategy) CountByKind() []KindCount {
	counts := map[schema.GroupKind]int{}
	var order []schema.GroupKind
	for _, o := range s.Objects {
		gk := o.GroupVersionKind().GroupKind()
		if counts[gk] == 0 {
			order = append(order, gk)
		}
		counts[gk]++
	}
	sort.SliceStable(order, func(i, j int) bool { return kinds.Less(order[i], order[j]) })
	out := make([]KindCount, 0, len(order))
	for _, gk := range order {
		_, known := kinds.Lookup(gk)
		out = append(out, KindCount{Group: gk.Group, Kind: gk.Kind, Count: counts[gk], Known: known})
	}
	return out
}

// Images returns the container images of a workload object (init containers
// first, then containers), or nil for kinds that run no pods.
func Images(u *unstructured.Unstructured) []string {
	info, _ := kinds.Lookup(u.GroupVersionKind().GroupKind())
	if info.PodTemplate == nil {
		return nil
	}
	path := append(append([]string{}, info.PodTemplate...), "spec")
	var out []string
	for _, field := range []string{"initContainers", "containers"} {
		list, _, _ := unstructured.NestedSlice(u.Object, append(path, field)...)
		for _, c := range list {
			if m, ok := c.(map[string]any); ok {
				if img, ok := m["image"].(string); ok {
					out = append(out, img)
				}
			}
		}
	}
	return out
}

// WarningCode classifies a warning.
type WarningCode string

// Warning codes reported by Parse.
const (
	// WarnAPIVersionRepaired: an object was written with a core apiVersion
	// for a kind of another group, and was moved to that group.
	WarnAPIVersionRepaired WarningCode = "APIVersionRepaired"
	// WarnDuplicateObject: the same object appeared more than once.
	WarnDuplicateObject WarningCode = "DuplicateObject"
	// WarnUnknownKind: the kind is neither in the kind table nor defined by
	// a CRD in the same strategy.
	WarnUnknownKind WarningCode = "UnknownKind"
	// WarnListExpanded: a List document was replaced by its items.
	WarnListExpanded WarningCode = "ListExpanded"
)

// Warning reports something Parse accepted but repaired or wants a person to
// know.
type Warning struct {
	Code     WarningCode `json:"code"`
	Document int         `json:"document"`
	Line     int         `json:"line"`
	Object   ObjectRef   `json:"object"`
	Message  string      `json:"message"`
}

// String renders the warning on one line.
func (w Warning) String() string {
	return fmt.Sprintf("document %d (line %d): %s: %s: %s", w.Document, w.Line, w.Code, w.Object, w.Message)
}

// DefinedKind returns the kind a CustomResourceDefinition defines
// (spec.group, spec.names.kind); ok is false for an object of a kind that
// defines none (kinds.Info.DefinesKinds).
func DefinedKind(obj *unstructured.Unstructured) (gk schema.GroupKind, ok bool) {
	if info, _ := kinds.Lookup(obj.GroupVersionKind().GroupKind()); !info.DefinesKinds {
		return schema.GroupKind{}, false
	}
	gk.Group, _, _ = unstructured.NestedString(obj.Object, "spec", "group")
	gk.Kind, _, _ = unstructured.NestedString(obj.Object, "spec", "names", "kind")
	return gk, true
}

// DefinedResource returns the resource through which a
// CustomResourceDefinition serves its custom resources (spec.group,
// spec.names.plural) at the served storage version, else the first served
// one; ok is false for any other object and for a CRD that serves none.
func DefinedResource(obj *unstructured.Unstructured) (gvr schema.GroupVersionResource, ok bool) {
	if _, isCRD := DefinedKind(obj); !isCRD {
		return schema.GroupVersionResource{}, false
	}
	versions, _, _ := unstructured.NestedSlice(obj.Object, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if served, _ := m["served"].(bool); !served {
			continue
		}
		name, _ := m["name"].(string)
		if storage, _ := m["storage"].(bool); storage || gvr.Version == "" {
			gvr.Version = name
		}
		if storage, _ := m["storage"].(bool); storage {
			break
		}
	}
	gvr.Group, _, _ = unstructured.NestedString(obj.Object, "spec", "group")
	gvr.Resource, _, _ = unstructured.NestedString(obj.Object, "spec", "names", "plural")
	return gvr, gvr.Version != "" && gvr.Resource != ""
}
