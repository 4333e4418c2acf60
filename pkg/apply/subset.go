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

// differences lists the fields of desired whose value live does not hold,
// ignoring what the server adds (defaults, status, metadata it owns). Lists
// must have the same length and each element of desired must be held by the
// element of live at the same index; a list that differs is one Change. A
// null, empty map, empty list, false, 0 or "" in desired matches an absent
// field. Numbers
// compare by value whatever their Go type.
func differences(desired, live any) []Change {
	var out []Change
	diff(desired, live, "", false, &out)
	return out
}

// additions lists the fields of desired that live does not hold when live
// may also add to lists: like Differences, except that a list holds
// desired's list when desired's elements are held, in order, by elements
// of it (other elements may come before, between and after them). It says
// whether live is desired plus what someone else added: fields, list
// entries (a toleration, an argument, a volume), server defaults.
func additions(desired, live any) []Change {
	var out []Change
	diff(desired, live, "", true, &out)
	return out
}

// subset reports whether live holds every field of desired (no
// Differences).
func subset(desired, live any) bool {
	return len(differences(desired, live)) == 0
}

func diff(d, l any, path string, additions bool, out *[]Change) {
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
			diff(dv[k], lv[k], path+"."+k, additions, out)
		}
	case []any:
		if len(dv) == 0 && l == nil {
			return
		}
		lv, ok := l.([]any)
		if ok && additions && len(lv) > len(dv) {
			if !subsequence(dv, lv) {
				*out = append(*out, Change{Path: orRoot(path), Live: l, Desired: d})
			}
			return
		}
		if !ok || len(lv) != len(dv) {
			*out = append(*out, Change{Path: orRoot(path), Live: l, Desired: d})
			return
		}
		for i := range dv {
			var sub []Change
			diff(dv[i], lv[i], fmt.Sprintf("%s[%d]", path, i), additions, &sub)
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

// subsequence reports whether the elements of d are held (Additions), in
// order, by elements of l. Matching each element of d to the first element
// of l left that holds it never rules out a match that exists.
func subsequence(d, l []any) bool {
	j := 0
	for _, dv := range d {
		for ; j < len(l); j++ {
			var sub []Change
			if diff(dv, l[j], "", true, &sub); len(sub) == 0 {
				break
			}
		}
		if j == len(l) {
			return false
		}
		j++
	}
	return true
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
