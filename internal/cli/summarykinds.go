package cli

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/strategy"
)

func appendUnique(l []string, s string) []string {
	if slices.Contains(l, s) {
		return l
	}
	return append(l, s)
}

// containerImages lists [container, image] of a workload's pod template.
func containerImages(obj *unstructured.Unstructured, tpl []string) [][2]string {
	var out [][2]string
	for _, field := range []string{"initContainers", "containers"} {
		list, _, _ := unstructured.NestedSlice(obj.Object, append(append(slices.Clone(tpl), "spec"), field)...)
		for _, c := range list {
			if m, ok := c.(map[string]any); ok {
				name, _ := m["name"].(string)
				img, _ := m["image"].(string)
				out = append(out, [2]string{name, img})
			}
		}
	}
	return out
}

func imageChanges(ref strategy.ObjectRef, a, b [][2]string) []ImageChange {
	before := map[string]string{}
	for _, c := range a {
		before[c[0]] = c[1]
	}
	var out []ImageChange
	for _, c := range b {
		if old, ok := before[c[0]]; !ok || old != c[1] {
			out = append(out, ImageChange{Ref: ref, Container: c[0], From: old, To: c[1]})
		}
		delete(before, c[0])
	}
	for _, c := range a {
		if _, gone := before[c[0]]; gone {
			out = append(out, ImageChange{Ref: ref, Container: c[0], From: c[1]})
		}
	}
	return out
}

// permissions lists what a role's rules grant, one "verb resource.group"
// (or "verb /url") per permission.
func permissions(obj *unstructured.Unstructured) map[string]bool {
	out := map[string]bool{}
	rules, _, _ := unstructured.NestedSlice(obj.Object, "rules")
	strs := func(m map[string]any, k string) []string {
		l, _, _ := unstructured.NestedStringSlice(m, k)
		return l
	}
	for _, r := range rules {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		for _, verb := range strs(m, "verbs") {
			for _, url := range strs(m, "nonResourceURLs") {
				out[verb+" "+url] = true
			}
			groups := strs(m, "apiGroups")
			for _, res := range strs(m, "resources") {
				for _, g := range groups {
					name := res
					if g != "" {
						name += "." + g
					}
					out[verb+" "+name] = true
				}
			}
		}
	}
	return out
}

// grantNotes lists the permissions of now that before lacks, one note per
// resource with its verbs ("+ get, list on pods").
func grantNotes(mark string, now, before map[string]bool) []string {
	verbs := map[string][]string{}
	for p := range now {
		if before[p] {
			continue
		}
		verb, res, _ := strings.Cut(p, " ")
		verbs[res] = append(verbs[res], verb)
	}
	var out []string
	for _, res := range slices.Sorted(maps.Keys(verbs)) {
		v := verbs[res]
		sort.Strings(v)
		out = append(out, fmt.Sprintf("%s %s on %s", mark, strings.Join(v, ", "), res))
	}
	return out
}

// bindingText says what a binding grants to whom.
func bindingText(obj *unstructured.Unstructured) string {
	kind, _, _ := unstructured.NestedString(obj.Object, "roleRef", "kind")
	name, _, _ := unstructured.NestedString(obj.Object, "roleRef", "name")
	subjects, _, _ := unstructured.NestedSlice(obj.Object, "subjects")
	var who []string
	for _, s := range subjects {
		m, _ := s.(map[string]any)
		k, _ := m["kind"].(string)
		n, _ := m["name"].(string)
		if ns, _ := m["namespace"].(string); ns != "" {
			n = ns + "/" + n
		}
		who = append(who, k+" "+n)
	}
	sort.Strings(who)
	return fmt.Sprintf("%s %s to %s", kind, name, strings.Join(who, ", "))
}

func crdVersions(obj *unstructured.Unstructured) []string {
	versions, _, _ := unstructured.NestedSlice(obj.Object, "spec", "versions")
	var out []string
	for _, v := range versions {
		if m, ok := v.(map[string]any); ok {
			if n, ok := m["name"].(string); ok {
				out = append(out, n)
			}
		}
	}
	return out
}

// schemaNotes says which versions of a CRD are added or removed, whose
// schema changes (and in how many fields), and which change served,
// storage or deprecated.
func schemaNotes(fields []fieldChange, before, after []string) []string {
	var out []string
	for _, n := range after {
		if !slices.Contains(before, n) {
			out = append(out, "version "+n+" added")
		}
	}
	for _, n := range before {
		if !slices.Contains(after, n) {
			out = append(out, "version "+n+" removed")
		}
	}
	schema := map[string]int{}
	var names []string
	for _, f := range fields {
		rest, ok := strings.CutPrefix(f.Path, ".spec.versions[")
		if !ok {
			continue
		}
		name, sub, _ := strings.Cut(rest, "]")
		if !slices.Contains(before, name) || !slices.Contains(after, name) {
			continue
		}
		switch {
		case strings.HasPrefix(sub, ".schema"):
			if schema[name] == 0 {
				names = append(names, name)
			}
			schema[name]++
		case sub == ".served" || sub == ".storage" || sub == ".deprecated":
			old, now := valuePair(f.Old, f.New)
			out = append(out, fmt.Sprintf("%s %s %s → %s", name, sub[1:], old, now))
		}
	}
	for _, n := range names {
		out = append(out, fmt.Sprintf("%s schema: %d fields", n, schema[n]))
	}
	return out
}
