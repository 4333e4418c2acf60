package crdsafety

import (
	"bytes"
	"slices"
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// maxExamples is how many affected objects a finding names.
const maxExamples = 5

// affects reports whether obj (a custom resource, read at f.ReadAt) is
// affected by f; always false for findings not judged by values.
func (f *Finding) affects(obj map[string]any) bool {
	if f.Judge != ObjectValues || f.check == nil {
		return f.Judge == AnyObject
	}
	return walk(obj, f.segs, f.parent, f.check)
}

// walk visits every value at segs below v ("[*]" an element of a list,
// "{*}" a value of a map); with parent, it calls check for the last
// segment also where the value is absent but its parent exists.
func walk(v any, segs []string, parent bool, check func(any, bool) bool) bool {
	if len(segs) == 0 {
		return check(v, true)
	}
	switch seg := segs[0]; seg {
	case "[*]":
		l, _ := v.([]any)
		for _, e := range l {
			if walk(e, segs[1:], parent, check) {
				return true
			}
		}
		return false
	case "{*}":
		m, _ := v.(map[string]any)
		for _, e := range m {
			if walk(e, segs[1:], parent, check) {
				return true
			}
		}
		return false
	case "*":
		// Every key of v not in the schema's properties: segs[1] holds
		// them joined by NUL.
		m, _ := v.(map[string]any)
		known := strings.Split(segs[1], "\x00")
		for k := range m {
			if !slices.Contains(known, k) {
				return true
			}
		}
		return false
	default:
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		e, present := m[seg]
		if !present {
			if parent && len(segs) == 1 {
				return check(nil, false)
			}
			return false
		}
		return walk(e, segs[1:], parent, check)
	}
}

// Judge fills the object counts of findings from the objects stored at
// each version (by version: the objects as read at it) and returns the
// findings that are unsafe: those judged Always, and the others affected
// by at least one object. truncated names the versions of which not every
// object was given: a finding of those that no given object affects is
// kept (unsafe unless shown otherwise).
func Judge(findings []Finding, objects map[string][]*unstructured.Unstructured, truncated map[string]bool) []Finding {
	var out []Finding
	for _, f := range findings {
		if f.Judge != Always {
			for _, o := range objects[f.ReadAt] {
				f.Observe(o)
			}
			if f.Objects == 0 {
				if !truncated[f.ReadAt] {
					continue
				}
				f.Truncated = true
			}
		}
		out = append(out, f)
	}
	return out
}

// Observe counts o (read at f.ReadAt) when it affects f: a stored object
// the upgrade neither rewrites nor deletes (ObserveStored with only
// Object).
func (f *Finding) Observe(o *unstructured.Unstructured) {
	f.ObserveStored(Stored{Object: o})
}

// Stored is a custom resource as the upgrade finds it, and what the
// upgrade does to it: that decides whether its values are users' data a
// finding counts.
type Stored struct {
	// Object is the custom resource as stored, read at the finding's
	// ReadAt.
	Object *unstructured.Unstructured
	// Desired is the target strategy's own version of the same object
	// (same group, kind, namespace and name), nil when the target does
	// not hold it. The upgrade writes it with server-side apply: what
	// the writer owns of Object (Ours) is replaced by Desired, and only
	// the fields of Object that other field managers own outlive the
	// write. So the object is judged by Desired (the strategy's own
	// values: a strategy whose object breaks its own new schema is
	// refused before the first write, rather than failing half-way),
	// plus those fields of Object, which are users' data. A changed
	// default never counts against Desired: the author wrote the object
	// and the default together. Give Desired only where Object's fields
	// read the same as Desired's (SameFields).
	Desired *unstructured.Unstructured
	// Ours reports whether a field manager entry of Object is the
	// writer's: its own manager, or one whose fields an adoption hands
	// to it. Nil counts every entry as another's: every value of Object
	// outlives the write.
	Ours func(metav1.ManagedFieldsEntry) bool
	// Pruned says the current installation holds the object, the target
	// strategy does not, and the run deletes it once the upgrade has
	// rolled over (its prune): the object is not counted, as its values
	// go with it whatever the schema says.
	Pruned bool
}

// ObserveStored counts st when it affects f.
func (f *Finding) ObserveStored(st Stored) {
	if !f.affectsStored(st) {
		return
	}
	o := st.Object
	f.Objects++
	if len(f.Examples) < maxExamples {
		name := o.GetName()
		if ns := o.GetNamespace(); ns != "" {
			name = ns + "/" + name
		}
		f.Examples = append(f.Examples, name)
	}
}

func (f *Finding) affectsStored(st Stored) bool {
	switch {
	case st.Pruned:
		return false
	case st.Desired == nil || f.Judge != ObjectValues:
		return f.affects(st.Object.Object)
	case f.Rule != RuleDefaultChanged && f.affects(st.Desired.Object):
		return true
	}
	return f.affects(st.Object.Object) && othersOwn(st.Object, f.segs, st.Ours)
}

// othersOwn reports whether a field manager entry that is not ours owns
// the value of o at segs (the field, something below it, or an atomic
// field above it). An object whose field managers cannot be read (none
// recorded, or a set that does not parse) counts as owned by others.
func othersOwn(o *unstructured.Unstructured, segs []string, ours func(metav1.ManagedFieldsEntry) bool) bool {
	entries := o.GetManagedFields()
	if len(entries) == 0 {
		return true
	}
	for _, e := range entries {
		if ours != nil && ours(e) || e.FieldsV1 == nil {
			continue
		}
		set := &fieldpath.Set{}
		if err := set.FromJSON(bytes.NewReader(e.FieldsV1.Raw)); err != nil {
			return true
		}
		for p := range set.Leaves().All() {
			if covers(p, segs) {
				return true
			}
		}
	}
	return false
}

// covers reports whether the owned leaf p is the field at segs, below it,
// or an atomic field (a leaf) above it.
func covers(p fieldpath.Path, segs []string) bool {
	for i, seg := range segs {
		if i == len(p) {
			// p is a leaf above the field: owned whole.
			return true
		}
		name := p[i].FieldName
		switch seg {
		case "[*]":
			if name != nil {
				return false
			}
		case "{*}":
			if name == nil {
				return false
			}
		case "*":
			// Any field the schema does not name (segs[i+1]).
			return name != nil && !slices.Contains(strings.Split(segs[i+1], "\x00"), *name)
		default:
			if name == nil || *name != seg {
				return false
			}
		}
	}
	return true
}

// SameFields reports whether a custom resource written at apiVersion (its
// group's version part) holds the same fields when read at version:
// the same version, or a CRD that converts by changing apiVersion only (no
// conversion webhook).
func SameFields(crd *apiextv1.CustomResourceDefinition, apiVersion, version string) bool {
	_, v, ok := strings.Cut(apiVersion, "/")
	if !ok {
		v = apiVersion
	}
	return v == version || crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != apiextv1.WebhookConverter
}
