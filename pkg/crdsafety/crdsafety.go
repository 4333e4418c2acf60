// Package crdsafety decides, before anything is written, whether replacing
// a live CustomResourceDefinition with a strategy's loses or invalidates
// what custom resources already hold. Compare lists every change a rule
// flags (the rules OLM v1's CRD upgrade-safety preflight checks, and some
// it does not); the findings that stored objects decide are then judged
// against those objects (Finding.Affects, Judge), which the caller lists
// and passes in as values: the rules read no cluster.
package crdsafety

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// Rule names one kind of unsafe change. The names are what an override
// (Allow) gives.
type Rule string

// The rules.
const (
	// RuleScope: spec.scope changes. The API server refuses it; the only
	// way is to delete the CRD, and every custom resource with it.
	RuleScope Rule = "scope"
	// RuleStoredVersionRemoved: a version in status.storedVersions leaves
	// the CRD and its objects cannot be shown to survive the migration to
	// the new storage version (a conversion webhook, or a version that is
	// not served and so cannot be read).
	RuleStoredVersionRemoved Rule = "storedVersionRemoved"
	// RuleServedVersionRemoved: a version in status.storedVersions stays
	// in the CRD but is no longer served, while objects of the CRD exist:
	// nothing migrates them. (A stored version removed altogether is
	// migrated: RuleStoredVersionRemoved and the field rules judge it.)
	RuleServedVersionRemoved Rule = "servedVersionRemoved"
	// RuleFieldRemoved: a field the schema defined (or kept as an unknown
	// field) is no longer in it: the API server prunes the values.
	RuleFieldRemoved Rule = "fieldRemoved"
	// RuleTypeChanged: a field's type changes.
	RuleTypeChanged Rule = "typeChanged"
	// RuleEnumTightened: an enum loses a value, or a field gets an enum.
	RuleEnumTightened Rule = "enumTightened"
	// RuleBoundTightened: minimum, maximum, exclusiveness, minLength,
	// maxLength, minItems, maxItems, minProperties, maxProperties or
	// pattern is added or made tighter (a pattern: changed at all).
	RuleBoundTightened Rule = "boundTightened"
	// RuleRequiredAdded: a field becomes required.
	RuleRequiredAdded Rule = "requiredAdded"
	// RuleDefaultChanged: a field's default is added, changed or removed.
	RuleDefaultChanged Rule = "defaultChanged"
)

// Rules lists every rule, in the order findings are reported.
var Rules = []Rule{RuleScope, RuleStoredVersionRemoved, RuleServedVersionRemoved, RuleFieldRemoved, RuleTypeChanged,
	RuleEnumTightened, RuleBoundTightened, RuleRequiredAdded, RuleDefaultChanged}

// known reports whether r is one of Rules.
func known(r Rule) bool { return slices.Contains(Rules, r) }

// Allow accepts the findings of one rule on one CRD (by its name).
type Allow struct {
	CRD  string `json:"crd"`
	Rule Rule   `json:"rule"`
}

// String returns CRD=RULE, the plugin flag's form.
func (a Allow) String() string { return a.CRD + "=" + string(a.Rule) }

// ParseAllow reads CRD=RULE.
func ParseAllow(s string) (Allow, error) {
	crd, rule, ok := strings.Cut(s, "=")
	if !ok || crd == "" || rule == "" {
		return Allow{}, fmt.Errorf("crd safety override %q: want CRD=RULE", s)
	}
	a := Allow{CRD: crd, Rule: Rule(rule)}
	if !known(a.Rule) {
		return Allow{}, fmt.Errorf("crd safety override %q: unknown rule %q (one of %s)", s, rule, ruleList())
	}
	return a, nil
}

func ruleList() string {
	out := make([]string, len(Rules))
	for i, r := range Rules {
		out[i] = string(r)
	}
	return strings.Join(out, ", ")
}

// Judgement says what decides a finding.
type Judgement int

const (
	// Always: the change is unsafe whatever is stored.
	Always Judgement = iota
	// AnyObject: unsafe when the CRD has any object.
	AnyObject
	// ObjectValues: unsafe when an object's value at Path is affected
	// (Finding.Affects).
	ObjectValues
)

// Finding is one flagged change of one CRD.
type Finding struct {
	CRD string `json:"crd"`
	// Version is the version whose schema changes ("" for the scope).
	Version string `json:"version,omitempty"`
	// Path is the field, e.g. .spec.color, .spec.items[*].size,
	// .spec.labels{*} ("" when the rule is not about a field).
	Path   string `json:"path,omitempty"`
	Rule   Rule   `json:"rule"`
	Detail string `json:"detail"`
	// Judge says what decides it; ReadAt is the version whose objects
	// are judged (Version, or the stored version a migration reads).
	Judge  Judgement `json:"-"`
	ReadAt string    `json:"-"`
	// Objects counts the stored objects affected; Examples names a few
	// (namespace/name). Truncated says not every object was read.
	Objects   int      `json:"objects,omitempty"`
	Examples  []string `json:"examples,omitempty"`
	Truncated bool     `json:"truncated,omitempty"`
	// Allowed is set when an override accepts the finding.
	Allowed bool `json:"allowed,omitempty"`

	// check decides one value for ObjectValues findings.
	check  func(v any, present bool) bool
	parent bool // check also the parent's presence (required, default)
	segs   []string
}

// String describes the finding in one line.
func (f Finding) String() string {
	var b strings.Builder
	b.WriteString(f.CRD)
	if f.Version != "" {
		b.WriteString(" " + f.Version)
	}
	if f.Path != "" {
		b.WriteString(" " + f.Path)
	}
	fmt.Fprintf(&b, ": %s (%s)", f.Rule, f.Detail)
	switch {
	case f.Objects > 0:
		fmt.Fprintf(&b, "; %d stored objects affected", f.Objects)
		if len(f.Examples) > 0 {
			fmt.Fprintf(&b, ", e.g. %s", strings.Join(f.Examples, ", "))
		}
	case f.Truncated:
		b.WriteString("; not every stored object could be read")
	}
	if f.Allowed {
		b.WriteString(" [allowed by override]")
	}
	return b.String()
}

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

// Permit marks the findings an override accepts.
func Permit(findings []Finding, allow []Allow) {
	for i := range findings {
		findings[i].Allowed = slices.Contains(allow, Allow{CRD: findings[i].CRD, Rule: findings[i].Rule})
	}
}

// Refused returns the findings no override accepts.
func Refused(findings []Finding) []Finding {
	var out []Finding
	for _, f := range findings {
		if !f.Allowed {
			out = append(out, f)
		}
	}
	return out
}

// UnsafeError refuses an upgrade: the findings no override accepts.
type UnsafeError struct {
	Findings []Finding
}

func (e *UnsafeError) Error() string {
	lines := make([]string, len(e.Findings))
	for i, f := range e.Findings {
		lines[i] = f.String()
	}
	return fmt.Sprintf("unsafe CRD change refused before any write: %s (an override per CRD and rule accepts one: spec.crdSafety.allow, --allow-crd-change CRD=RULE)", strings.Join(lines, "; "))
}

// FromUnstructured converts a CRD.
func FromUnstructured(u *unstructured.Unstructured) (*apiextv1.CustomResourceDefinition, error) {
	crd := &apiextv1.CustomResourceDefinition{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, crd); err != nil {
		return nil, fmt.Errorf("crd %s: %w", u.GetName(), err)
	}
	return crd, nil
}

// Compare returns what replacing live (the CRD in the cluster) with
// desired would change that a rule flags, sorted by version, path and
// rule. Nothing is judged yet: findings judged by objects are unsafe only
// when Judge finds an object they affect.
func Compare(live, desired *apiextv1.CustomResourceDefinition) []Finding {
	name := desired.Name
	var out []Finding
	if live.Spec.Scope != desired.Spec.Scope {
		out = append(out, Finding{CRD: name, Rule: RuleScope, Judge: Always,
			Detail: fmt.Sprintf("%s -> %s: the API server refuses it, and deleting the CRD to recreate it deletes every custom resource of it", live.Spec.Scope, desired.Spec.Scope)})
	}
	want := map[string]*apiextv1.CustomResourceDefinitionVersion{}
	storage := ""
	for i := range desired.Spec.Versions {
		v := &desired.Spec.Versions[i]
		want[v.Name] = v
		if v.Storage {
			storage = v.Name
		}
	}
	webhook := desired.Spec.Conversion != nil && desired.Spec.Conversion.Strategy == apiextv1.WebhookConverter ||
		live.Spec.Conversion != nil && live.Spec.Conversion.Strategy == apiextv1.WebhookConverter
	for i := range live.Spec.Versions {
		lv := &live.Spec.Versions[i]
		dv := want[lv.Name]
		stored := slices.Contains(live.Status.StoredVersions, lv.Name)
		if lv.Served && stored && dv != nil && !dv.Served {
			// Kept but no longer served: objects stay stored at it and
			// are not migrated (a version the definition drops is; see
			// below).
			out = append(out, Finding{CRD: name, Version: lv.Name, Rule: RuleServedVersionRemoved, Judge: AnyObject, ReadAt: lv.Name,
				Detail: "a stored version no longer served: objects stored at it are not migrated, and clients reading it break"})
		}
		switch {
		case dv != nil:
			out = append(out, compareSchemas(name, lv.Name, lv.Name, schemaOf(lv), schemaOf(dv), "")...)
		case stored && (webhook || storage == ""):
			why := "the new definition has no storage version"
			if webhook {
				why = "objects are migrated through a conversion webhook, whose losses cannot be checked"
			}
			out = append(out, Finding{CRD: name, Version: lv.Name, Rule: RuleStoredVersionRemoved, Judge: AnyObject, ReadAt: storageOf(live),
				Detail: "stored version removed: " + why})
		case stored && lv.Served:
			// The stored objects are rewritten at the new storage version
			// before the version goes (pkg/engine): what that
			// version's schema lacks of this one's is lost.
			out = append(out, compareSchemas(name, lv.Name, lv.Name, schemaOf(lv), schemaOf(want[storage]),
				fmt.Sprintf("stored version %s migrated to %s: ", lv.Name, storage))...)
		case stored:
			// Not served (an interrupted migration leaves it so): its
			// objects cannot be read at it, so any object counts.
			for _, f := range compareSchemas(name, lv.Name, storageOf(live), schemaOf(lv), schemaOf(want[storage]),
				fmt.Sprintf("stored version %s (not served, so not readable) migrated to %s: ", lv.Name, storage)) {
				f.Judge = AnyObject
				out = append(out, f)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Version != out[j].Version {
			return out[i].Version < out[j].Version
		}
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return slices.Index(Rules, out[i].Rule) < slices.Index(Rules, out[j].Rule)
	})
	return out
}

func storageOf(crd *apiextv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

func schemaOf(v *apiextv1.CustomResourceDefinitionVersion) *apiextv1.JSONSchemaProps {
	if v == nil || v.Schema == nil {
		return nil
	}
	return v.Schema.OpenAPIV3Schema
}

// compareSchemas compares the schema of version (live) with its new one
// (desired); readAt is the version whose objects judge the findings.
func compareSchemas(crd, version, readAt string, live, desired *apiextv1.JSONSchemaProps, prefix string) []Finding {
	c := &comparer{crd: crd, version: version, readAt: readAt, prefix: prefix}
	if live == nil {
		return nil
	}
	if desired == nil {
		// No schema at all: nothing is pruned or validated.
		return nil
	}
	c.node(nil, live, desired)
	return c.out
}

type comparer struct {
	crd, version, readAt, prefix string
	out                          []Finding
}

func pathOf(segs []string) string {
	var b strings.Builder
	for _, s := range segs {
		if s == "[*]" || s == "{*}" {
			b.WriteString(s)
			continue
		}
		b.WriteString("." + s)
	}
	if b.Len() == 0 {
		return "."
	}
	return b.String()
}

func (c *comparer) add(segs []string, rule Rule, detail string, parent bool, check func(any, bool) bool) {
	f := Finding{CRD: c.crd, Version: c.version, Path: pathOf(segs), Rule: rule, Detail: c.prefix + detail,
		Judge: ObjectValues, ReadAt: c.readAt, check: check, parent: parent, segs: slices.Clone(segs)}
	c.out = append(c.out, f)
}

func present(_ any, ok bool) bool { return ok }

// preserves reports whether s keeps fields its properties do not name.
func preserves(s *apiextv1.JSONSchemaProps) bool {
	if s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields {
		return true
	}
	return s.AdditionalProperties != nil && (s.AdditionalProperties.Allows && s.AdditionalProperties.Schema == nil)
}

// node compares one schema node at segs.
func (c *comparer) node(segs []string, live, desired *apiextv1.JSONSchemaProps) {
	if preserves(desired) && len(desired.Properties) == 0 && desired.Items == nil && (desired.AdditionalProperties == nil || desired.AdditionalProperties.Schema == nil) && desired.Type == "" {
		// Everything below is kept as it is.
		return
	}
	if live.Type != desired.Type && live.Type != "" && desired.Type != "" {
		lt, dt := live.Type, desired.Type
		c.add(segs, RuleTypeChanged, fmt.Sprintf("type %s -> %s", lt, dt), false, func(v any, _ bool) bool { return !hasType(v, dt) })
		return
	}
	c.values(segs, live, desired)
	// Properties.
	names := make([]string, 0, len(live.Properties))
	for k := range live.Properties {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		lp := live.Properties[k]
		child := append(slices.Clone(segs), k)
		dp, ok := desired.Properties[k]
		if !ok {
			if preserves(desired) {
				continue
			}
			if desired.AdditionalProperties != nil && desired.AdditionalProperties.Schema != nil {
				// Kept as a map value: its schema compared.
				c.node(child, &lp, desired.AdditionalProperties.Schema)
				continue
			}
			c.add(child, RuleFieldRemoved, "field removed from the schema: the API server prunes its values", false, present)
			continue
		}
		c.node(child, &lp, &dp)
	}
	if preserves(live) && !preserves(desired) && len(desired.Properties) > 0 || preserves(live) && !preserves(desired) && desired.AdditionalProperties == nil && len(desired.Properties) == 0 && live.Type == "object" {
		known := make([]string, 0, len(desired.Properties))
		for k := range desired.Properties {
			known = append(known, k)
		}
		sort.Strings(known)
		c.add(append(slices.Clone(segs), "*", strings.Join(known, "\x00")), RuleFieldRemoved,
			"unknown fields were kept (x-kubernetes-preserve-unknown-fields), now pruned", false, present)
		c.out[len(c.out)-1].Path = pathOf(segs) + ".*"
	}
	if live.AdditionalProperties != nil && live.AdditionalProperties.Schema != nil {
		child := append(slices.Clone(segs), "{*}")
		switch {
		case desired.AdditionalProperties != nil && desired.AdditionalProperties.Schema != nil:
			c.node(child, live.AdditionalProperties.Schema, desired.AdditionalProperties.Schema)
		case !preserves(desired):
			known := make([]string, 0, len(desired.Properties))
			for k := range desired.Properties {
				known = append(known, k)
			}
			c.add(append(slices.Clone(segs), "*", strings.Join(known, "\x00")), RuleFieldRemoved,
				"map values (additionalProperties) no longer allowed: pruned", false, present)
			c.out[len(c.out)-1].Path = pathOf(segs) + ".*"
		}
	}
	if live.Items != nil && live.Items.Schema != nil {
		child := append(slices.Clone(segs), "[*]")
		if desired.Items != nil && desired.Items.Schema != nil {
			c.node(child, live.Items.Schema, desired.Items.Schema)
		}
	}
	// Required: judged where the parent exists.
	for _, r := range desired.Required {
		if slices.Contains(live.Required, r) {
			continue
		}
		c.add(append(slices.Clone(segs), r), RuleRequiredAdded, "field newly required", true, func(_ any, ok bool) bool { return !ok })
	}
}

// values compares the validations and the default of one node.
func (c *comparer) values(segs []string, live, desired *apiextv1.JSONSchemaProps) {
	if len(desired.Enum) > 0 {
		var removed []string
		if len(live.Enum) == 0 {
			removed = []string{"(any value): an enum is added"}
		}
		for _, lv := range live.Enum {
			if !slices.ContainsFunc(desired.Enum, func(dv apiextv1.JSON) bool { return string(dv.Raw) == string(lv.Raw) }) {
				removed = append(removed, string(lv.Raw))
			}
		}
		if len(removed) > 0 {
			allowed := enumValues(desired.Enum)
			c.add(segs, RuleEnumTightened, "enum values removed: "+strings.Join(removed, ", "), false, func(v any, _ bool) bool {
				return !slices.ContainsFunc(allowed, func(a any) bool { return equality.Semantic.DeepEqual(normalize(a), normalize(v)) })
			})
		}
	}
	num := func(name string, l, d *float64, lower bool, lex, dex bool) {
		if d == nil {
			return
		}
		tighter := l == nil || (lower && (*d > *l || *d == *l && dex && !lex)) || (!lower && (*d < *l || *d == *l && dex && !lex))
		if !tighter {
			return
		}
		bound, excl := *d, dex
		c.add(segs, RuleBoundTightened, fmt.Sprintf("%s %s -> %v", name, fmtFloat(l), bound), false, func(v any, _ bool) bool {
			f, ok := toFloat(v)
			if !ok {
				return false
			}
			if lower {
				return f < bound || excl && f == bound
			}
			return f > bound || excl && f == bound
		})
	}
	num("minimum", live.Minimum, desired.Minimum, true, live.ExclusiveMinimum, desired.ExclusiveMinimum)
	num("maximum", live.Maximum, desired.Maximum, false, live.ExclusiveMaximum, desired.ExclusiveMaximum)
	count := func(name string, l, d *int64, lower bool, size func(any) (int64, bool)) {
		if d == nil || l != nil && (lower && *d <= *l || !lower && *d >= *l) {
			return
		}
		bound := *d
		c.add(segs, RuleBoundTightened, fmt.Sprintf("%s %s -> %d", name, fmtInt(l), bound), false, func(v any, _ bool) bool {
			n, ok := size(v)
			return ok && (lower && n < bound || !lower && n > bound)
		})
	}
	count("minLength", live.MinLength, desired.MinLength, true, strLen)
	count("maxLength", live.MaxLength, desired.MaxLength, false, strLen)
	count("minItems", live.MinItems, desired.MinItems, true, listLen)
	count("maxItems", live.MaxItems, desired.MaxItems, false, listLen)
	count("minProperties", live.MinProperties, desired.MinProperties, true, mapLen)
	count("maxProperties", live.MaxProperties, desired.MaxProperties, false, mapLen)
	if desired.Pattern != "" && desired.Pattern != live.Pattern {
		re, err := regexp.Compile(desired.Pattern)
		c.add(segs, RuleBoundTightened, fmt.Sprintf("pattern %q -> %q", live.Pattern, desired.Pattern), false, func(v any, _ bool) bool {
			s, ok := v.(string)
			if !ok {
				return false
			}
			// A pattern Go cannot compile cannot be checked: every
			// value counts.
			return err != nil || !re.MatchString(s)
		})
	}
	ld, dd := rawOf(live.Default), rawOf(desired.Default)
	if ld != dd {
		c.add(segs, RuleDefaultChanged, fmt.Sprintf("default %s -> %s", orNone(ld), orNone(dd)), true, func(_ any, ok bool) bool { return !ok })
	}
}

func rawOf(j *apiextv1.JSON) string {
	if j == nil {
		return ""
	}
	return string(j.Raw)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func fmtFloat(f *float64) string {
	if f == nil {
		return "none"
	}
	return fmt.Sprint(*f)
}

func fmtInt(i *int64) string {
	if i == nil {
		return "none"
	}
	return fmt.Sprint(*i)
}

func enumValues(e []apiextv1.JSON) []any {
	out := make([]any, 0, len(e))
	for _, j := range e {
		var v any
		if err := jsonUnmarshal(j.Raw, &v); err == nil {
			out = append(out, v)
		}
	}
	return out
}

// normalize makes numbers comparable across int64 and float64.
func normalize(v any) any {
	if f, ok := toFloat(v); ok {
		return f
	}
	return v
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case float64:
		return n, true
	case float32:
		return float64(n), true
	}
	return 0, false
}

func strLen(v any) (int64, bool) {
	s, ok := v.(string)
	return int64(len([]rune(s))), ok
}

func listLen(v any) (int64, bool) {
	l, ok := v.([]any)
	return int64(len(l)), ok
}

func mapLen(v any) (int64, bool) {
	m, ok := v.(map[string]any)
	return int64(len(m)), ok
}

// hasType reports whether v is of the JSON schema type t.
func hasType(v any, t string) bool {
	switch t {
	case "string":
		_, ok := v.(string)
		return ok
	case "integer":
		switch n := v.(type) {
		case int64, int, int32:
			return true
		case float64:
			return n == float64(int64(n))
		}
		return false
	case "number":
		_, ok := toFloat(v)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	}
	return false
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
