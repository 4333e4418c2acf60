package strategy

import (
	"bytes"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/installstrategy/installstrategy/pkg/jsonshare"
	"github.com/installstrategy/installstrategy/pkg/kinds"
)

// assemble checks objects across documents (duplicates, unknown kinds) and
// sorts them.
func assemble(docs []Document, warnings []Warning) (*Strategy, []Warning, error) {
	// Kinds defined by CRDs of this strategy are not unknown.
	crdKinds := map[schema.GroupKind]bool{}
	for _, d := range docs {
		if gk, ok := DefinedKind(d.Object); ok {
			crdKinds[gk] = true
		}
	}
	s := &Strategy{Objects: make([]*unstructured.Unstructured, 0, len(docs))}
	seen := map[ObjectRef]int{} // index into s.Objects
	firstDoc := map[ObjectRef]int{}
	for _, d := range docs {
		ref := RefOf(d.Object)
		gk := ref.GroupKind()
		if _, known := kinds.Lookup(gk); !known && !crdKinds[gk] && applied(d.Object) {
			// (A Requirements or Notes document is installstrategy's own,
			// never applied: not unknown.)
			warnings = append(warnings, Warning{Code: WarnUnknownKind, Document: d.Index, Line: d.Line, Object: ref,
				Message: "kind is not in the kind table nor defined by a CRD of this strategy; kept, placed after the known kinds"})
		}
		if at, dup := seen[ref]; dup {
			msg := fmt.Sprintf("also written in document %d; identical, this copy dropped", firstDoc[ref])
			if !equalObjects(s.Objects[at], d.Object) {
				msg = fmt.Sprintf("also written in document %d with different content; this later copy wins, as it would when KubeVirt applies both in order", firstDoc[ref])
				s.Objects[at] = d.Object
			}
			warnings = append(warnings, Warning{Code: WarnDuplicateObject, Document: d.Index, Line: d.Line, Object: ref, Message: msg})
			continue
		}
		seen[ref] = len(s.Objects)
		firstDoc[ref] = d.Index
		s.Objects = append(s.Objects, d.Object)
	}
	shareBulky(s.Objects)
	s.Sort()
	return s, warnings, nil
}

// shareBulky holds one copy of each equal map and list in the objects'
// bulky fields (kinds.Info.Bulky: CRDs' version schemas), which nothing
// changes once parsed: most KubeVirt CRDs have the same schema at each
// version, and its CRDs share subschemas (jsonshare.Trees).
func shareBulky(objs []*unstructured.Unstructured) {
	var t jsonshare.Trees
	for _, o := range objs {
		info, _ := kinds.Lookup(o.GroupVersionKind().GroupKind())
		info.EachBulky(o.Object, func(_ string, parent map[string]any, key string, v any) {
			parent[key] = t.Share(v)
		})
	}
}

func equalObjects(a, b *unstructured.Unstructured) bool {
	ja, errA := json.Marshal(a.Object)
	jb, errB := json.Marshal(b.Object)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// checkObject validates the identifying fields (present, and as the API
// server would accept them: validateNames) and applies the repairs of the
// kind table.
func checkObject(u *unstructured.Unstructured) ([]Warning, error) {
	if err := requireString(u.Object, "apiVersion"); err != nil {
		return nil, err
	}
	if err := requireString(u.Object, "kind"); err != nil {
		return nil, err
	}
	gv, err := schema.ParseGroupVersion(u.GetAPIVersion())
	if err != nil {
		return nil, fmt.Errorf("%s: invalid apiVersion %q: %w", u.GetKind(), u.GetAPIVersion(), err)
	}
	md, ok := u.Object["metadata"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s has no metadata", u.GetKind())
	}
	if name, _ := md["name"].(string); name == "" {
		return nil, fmt.Errorf("%s has no metadata.name", u.GetKind())
	}
	if ns, ok := md["namespace"]; ok {
		if _, isString := ns.(string); !isString {
			return nil, fmt.Errorf("%s %s: metadata.namespace is not a string", u.GetKind(), u.GetName())
		}
	}
	var warnings []Warning
	if info, repair := kinds.RepairCoreAPIVersion(gv.WithKind(u.GetKind())); repair {
		before := u.GetAPIVersion()
		u.SetAPIVersion(info.APIVersion())
		warnings = append(warnings, Warning{Code: WarnAPIVersionRepaired, Object: RefOf(u),
			Message: fmt.Sprintf("apiVersion %q does not serve %s; repaired to %q", before, u.GetKind(), info.APIVersion())})
	}
	if err := validateNames(u); err != nil {
		return nil, err
	}
	return warnings, nil
}

func requireString(m map[string]any, field string) error {
	v, ok := m[field]
	if !ok || v == nil {
		return fmt.Errorf("no %s", field)
	}
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("%s is not a string but %s", field, describe(v))
	}
	if s == "" {
		return fmt.Errorf("empty %s", field)
	}
	return nil
}
