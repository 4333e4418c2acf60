package apply

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
)

// Change is one field where a desired object and the live one differ.
type Change struct {
	// Path names the field, e.g. ".spec.template.spec.containers[0].image".
	Path string `json:"path"`
	// Live is the live value, nil when the field is absent.
	Live any `json:"live,omitempty"`
	// Desired is the value that would be applied.
	Desired any `json:"desired,omitempty"`
}

// Differences lists the fields of desired whose value live does not hold,
// ignoring what the server adds (defaults, status, metadata it owns). Lists
// must have the same length and each element of desired must be held by the
// element of live at the same index; a list that differs is one Change. A
// null, empty map, empty list, false, 0 or "" in desired matches an absent
// field. Numbers
// compare by value whatever their Go type.
func Differences(desired, live any) []Change {
	var out []Change
	diff(desired, live, "", &out)
	return out
}

// Subset reports whether live holds every field of desired (no
// Differences).
func Subset(desired, live any) bool {
	return len(Differences(desired, live)) == 0
}

func diff(d, l any, path string, out *[]Change) {
	switch dv := d.(type) {
	case nil:
		return
	case map[string]any:
		if len(dv) == 0 && l == nil {
			return
		}
		lv, ok := l.(map[string]any)
		if !ok {
			*out = append(*out, Change{Path: orRoot(path), Live: l, Desired: d})
			return
		}
		for _, k := range sortedKeys(dv) {
			diff(dv[k], lv[k], path+"."+k, out)
		}
	case []any:
		if len(dv) == 0 && l == nil {
			return
		}
		lv, ok := l.([]any)
		if !ok || len(lv) != len(dv) {
			*out = append(*out, Change{Path: orRoot(path), Live: l, Desired: d})
			return
		}
		for i := range dv {
			var sub []Change
			diff(dv[i], lv[i], fmt.Sprintf("%s[%d]", path, i), &sub)
			*out = append(*out, sub...)
		}
	default:
		if l == nil && isZero(d) {
			// The server omits false, 0 and "" of omitempty fields.
			return
		}
		if !scalarEqual(d, l) {
			*out = append(*out, Change{Path: orRoot(path), Live: l, Desired: d})
		}
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func isZero(v any) bool {
	if f, ok := number(v); ok {
		return f == 0
	}
	return v == false || v == ""
}

func orRoot(path string) string {
	if path == "" {
		return "."
	}
	return path
}

// scalarEqual compares scalars, treating numbers of any Go type as equal
// when their values are.
func scalarEqual(a, b any) bool {
	fa, oka := number(a)
	fb, okb := number(b)
	if oka && okb {
		return fa == fb
	}
	return reflect.DeepEqual(a, b)
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case float32:
		return float64(n), true
	case float64:
		return n, !math.IsNaN(n)
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}
