package apply

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// DefaultNamespaces returns s with metadata.namespace set to ns on the
// namespaced objects that have none (what `kubectl apply -n NS` does) and
// removed from cluster-scoped objects. Whether a kind is namespaced comes
// from discovery, or, for a kind a CRD of s defines and the cluster does not
// serve yet, from that CRD's scope. Objects of kinds neither served nor
// defined are left as they are (they are skipped later as not served).
// s is not modified; unchanged objects are shared with it.
func (k *Kinds) DefaultNamespaces(s *strategy.Strategy, ns string) (*strategy.Strategy, error) {
	crdScope := map[schema.GroupKind]bool{}
	for _, o := range s.Objects {
		gk, ok := strategy.DefinedKind(o)
		if !ok {
			continue
		}
		scope, _, _ := unstructured.NestedString(o.Object, "spec", "scope")
		crdScope[gk] = scope == "Namespaced"
	}
	out := &strategy.Strategy{Identity: s.Identity, Objects: make([]*unstructured.Unstructured, len(s.Objects))}
	namespaced := map[schema.GroupVersionKind]bool{}
	for i, o := range s.Objects {
		out.Objects[i] = o
		gvk := o.GroupVersionKind()
		isNS, known := namespaced[gvk]
		if !known {
			m, err := k.Mapping(strategy.RefOf(o), gvk.Version)
			var notServed *NotServedError
			switch {
			case errors.As(err, &notServed):
				scope, defined := crdScope[gvk.GroupKind()]
				if !defined {
					continue
				}
				isNS = scope
			case err != nil:
				return nil, fmt.Errorf("namespace of %s: %w", strategy.RefOf(o), err)
			default:
				isNS = m.Scope.Name() == meta.RESTScopeNameNamespace
			}
			namespaced[gvk] = isNS
		}
		switch {
		case isNS && o.GetNamespace() == "" && ns != "":
			c := o.DeepCopy()
			c.SetNamespace(ns)
			out.Objects[i] = c
		case !isNS && o.GetNamespace() != "":
			c := o.DeepCopy()
			c.SetNamespace("")
			out.Objects[i] = c
		}
	}
	return out, nil
}
