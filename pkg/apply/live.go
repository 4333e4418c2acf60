package apply

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/kinds"
)

// withLive returns the object to apply given the live one (nil when
// absent): the object itself, except where the kind table says the server
// keeps something a strategy may drop (kinds.Info.KeepStoredVersions: CRD
// versions still listed in status.storedVersions are kept as the live CRD
// has them, served when it served them, but no longer the storage
// version). obj is not modified.
//
// A kept version stays served until the objects stored at it are
// rewritten at the new storage version (pkg/engine migrates them, then
// trims status.storedVersions, and the next apply drops the version): so
// clients reading it do not break meanwhile, and a run interrupted before
// the migration leaves a CRD whose stored objects can still be read at
// the version they were written at, which the next run's CRD preflight
// judges them by (pkg/crdsafety) instead of refusing for every object.
func withLive(obj, live *unstructured.Unstructured) *unstructured.Unstructured {
	if live == nil {
		return obj
	}
	info, _ := kinds.Lookup(obj.GroupVersionKind().GroupKind())
	if !info.KeepStoredVersions {
		return obj
	}
	stored, _, _ := unstructured.NestedStringSlice(live.Object, "status", "storedVersions")
	// Read in place (the versions hold the schemas; NestedSlice would copy
	// them all for each decision): nothing below is changed but copies.
	desired := versionsOf(obj)
	liveVersions := versionsOf(live)
	have := map[string]bool{}
	for _, v := range desired {
		m, _ := v.(map[string]any)
		name, _ := m["name"].(string)
		have[name] = true
	}
	var keep []any
	for _, name := range stored {
		if have[name] {
			continue
		}
		for _, v := range liveVersions {
			m, _ := v.(map[string]any)
			if m["name"] == name {
				m = runtimeDeepCopy(m)
				m["storage"] = false
				keep = append(keep, m)
				have[name] = true
			}
		}
	}
	if len(keep) == 0 {
		return obj
	}
	out := obj.DeepCopy()
	_ = unstructured.SetNestedField(out.Object, append(versionsOf(out), keep...), "spec", "versions")
	return out
}

// versionsOf is a CRD's spec.versions, not copied.
func versionsOf(crd *unstructured.Unstructured) []any {
	v, _, _ := unstructured.NestedFieldNoCopy(crd.Object, "spec", "versions")
	list, _ := v.([]any)
	return list
}

func runtimeDeepCopy(m map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: m}).DeepCopy().Object
}
