package apply

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/kinds"
)

// WithLive returns the object to apply given the live one (nil when
// absent): the object itself, except where the kind table says the server
// keeps something a strategy may drop (kinds.Info.KeepStoredVersions: CRD
// versions still listed in status.storedVersions are kept, neither served
// nor stored). obj is not modified.
func WithLive(obj, live *unstructured.Unstructured) *unstructured.Unstructured {
	if live == nil {
		return obj
	}
	info, _ := kinds.Lookup(obj.GroupVersionKind().GroupKind())
	if !info.KeepStoredVersions {
		return obj
	}
	stored, _, _ := unstructured.NestedStringSlice(live.Object, "status", "storedVersions")
	desired, _, _ := unstructured.NestedSlice(obj.Object, "spec", "versions")
	liveVersions, _, _ := unstructured.NestedSlice(live.Object, "spec", "versions")
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
				m["served"], m["storage"] = false, false
				keep = append(keep, m)
				have[name] = true
			}
		}
	}
	if len(keep) == 0 {
		return obj
	}
	out := obj.DeepCopy()
	_ = unstructured.SetNestedSlice(out.Object, append(desired, keep...), "spec", "versions")
	return out
}

func runtimeDeepCopy(m map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: m}).DeepCopy().Object
}
