package cli

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// fieldChange is one leaf that differs between two versions of an object.
type fieldChange struct {
	Path     string
	Old, New any // nil: absent
}

// fieldChanges lists the leaves that differ between a and b, by path:
// maps by key, lists of named items (containers, env, ports, versions) by
// name, other lists by index.
func fieldChanges(a, b map[string]any) []fieldChange {
	fa, fb := map[string]any{}, map[string]any{}
	flatten("", a, fa)
	flatten("", b, fb)
	var out []fieldChange
	for _, p := range slices.Sorted(maps.Keys(fa)) {
		if vb, ok := fb[p]; !ok || fmt.Sprint(vb) != fmt.Sprint(fa[p]) {
			out = append(out, fieldChange{Path: p, Old: fa[p], New: fb[p]})
		}
	}
	for _, p := range slices.Sorted(maps.Keys(fb)) {
		if _, ok := fa[p]; !ok {
			out = append(out, fieldChange{Path: p, New: fb[p]})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func flatten(prefix string, v any, out map[string]any) {
	switch t := v.(type) {
	case map[string]any:
		if len(t) == 0 {
			out[prefix] = t
		}
		for k, x := range t {
			if strings.ContainsAny(k, "./") {
				flatten(prefix+"["+k+"]", x, out) // a label or annotation key
				continue
			}
			flatten(prefix+"."+k, x, out)
		}
	case []any:
		if len(t) == 0 {
			out[prefix] = t
		}
		named := namedItems(t)
		for i, x := range t {
			key := fmt.Sprint(i)
			if named {
				key = x.(map[string]any)["name"].(string)
			}
			flatten(prefix+"["+key+"]", x, out)
		}
	default:
		out[prefix] = v
	}
}

// namedItems says whether every item of a list is a map with a distinct
// string name.
func namedItems(l []any) bool {
	seen := map[string]bool{}
	for _, x := range l {
		m, ok := x.(map[string]any)
		if !ok {
			return false
		}
		n, ok := m["name"].(string)
		if !ok || seen[n] {
			return false
		}
		seen[n] = true
	}
	return true
}

func pathString(p []string) string { return "." + strings.Join(p, ".") }

// shortPath cuts a path after its fourth segment, for lists of what
// changed (".spec.containers[virt-api].securityContext").
func shortPath(p string) string {
	n := 0
	for i, r := range p {
		if r == '.' && i > 0 {
			n++
			if n == 4 {
				return p[:i]
			}
		}
	}
	return p
}

// valuePair renders the two sides of a change: shortly when the short
// forms differ, else in full (compact JSON), so that a change is never
// printed as two identical values.
func valuePair(old, now any) (string, string) {
	if a, b := shortValue(old), shortValue(now); a != b {
		return a, b
	}
	a, b := fullValue(old), fullValue(now)
	if a == b {
		// Equal JSON, different values: the types differ (1 and "1").
		a, b = fmt.Sprintf("%s (%T)", a, old), fmt.Sprintf("%s (%T)", b, now)
	}
	return a, b
}

// fullValue is v as compact JSON (Go syntax when it is not JSON).
func fullValue(v any) string {
	if v == nil {
		return "(none)"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}

// maxShortValue bounds the short form of a value.
const maxShortValue = 160

// shortValue renders a value for a line of the summary: strings and
// scalars as they are, lists with their items and maps with their keys
// and values (RBAC subjects as KIND:NAMESPACE/NAME, rules as VERBS on
// RESOURCES), cut at maxShortValue.
func shortValue(v any) string {
	switch t := v.(type) {
	case nil:
		return "(none)"
	case map[string]any, []any:
		s := compactValue(t)
		if len(s) > maxShortValue {
			s = s[:maxShortValue-3] + "..."
		}
		return s
	case string:
		if len(t) > 60 {
			return t[:57] + "..."
		}
		if t == "" {
			return `""`
		}
		return t
	}
	return fmt.Sprint(v)
}

// compactValue renders a list or map with everything in it.
func compactValue(v any) string {
	switch t := v.(type) {
	case nil:
		return "(none)"
	case []any:
		items := make([]string, len(t))
		for i, x := range t {
			items[i] = compactValue(x)
		}
		return "[" + strings.Join(items, ", ") + "]"
	case map[string]any:
		if s, ok := subjectText(t); ok {
			return s
		}
		if s, ok := ruleText(t); ok {
			return s
		}
		items := make([]string, 0, len(t))
		for _, k := range slices.Sorted(maps.Keys(t)) {
			items = append(items, k+": "+compactValue(t[k]))
		}
		return "{" + strings.Join(items, ", ") + "}"
	case string:
		if t == "" {
			return `""`
		}
		return t
	}
	return fmt.Sprint(v)
}

// subjectText renders an RBAC subject (kind, name, optional apiGroup and
// namespace, nothing else) as KIND:NAMESPACE/NAME.
func subjectText(m map[string]any) (string, bool) {
	kind, k := m["kind"].(string)
	name, n := m["name"].(string)
	if !k || !n {
		return "", false
	}
	for key := range m {
		if key != "kind" && key != "name" && key != "namespace" && key != "apiGroup" {
			return "", false
		}
	}
	if ns, _ := m["namespace"].(string); ns != "" {
		name = ns + "/" + name
	}
	return kind + ":" + name, true
}

// ruleText renders an RBAC policy rule as VERBS on RESOURCES: "get,list
// on pods,services.apps names a,b" or "get on /healthz".
func ruleText(m map[string]any) (string, bool) {
	verbs, ok, _ := unstructured.NestedStringSlice(m, "verbs")
	if !ok {
		return "", false
	}
	strs := func(k string) []string {
		l, _, _ := unstructured.NestedStringSlice(m, k)
		return l
	}
	for key := range m {
		switch key {
		case "verbs", "apiGroups", "resources", "resourceNames", "nonResourceURLs":
		default:
			return "", false
		}
	}
	var on []string
	for _, r := range strs("resources") {
		for _, g := range strs("apiGroups") {
			if g != "" {
				on = append(on, r+"."+g)
			} else {
				on = append(on, r)
			}
		}
	}
	on = append(on, strs("nonResourceURLs")...)
	s := strings.Join(verbs, ",") + " on " + strings.Join(on, ",")
	if names := strs("resourceNames"); len(names) > 0 {
		s += " names " + strings.Join(names, ",")
	}
	return s, true
}
