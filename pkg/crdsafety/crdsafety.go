// Package crdsafety decides, before anything is written, whether replacing
// a live CustomResourceDefinition with a strategy's loses or invalidates
// what custom resources already hold. Compare lists every change a rule
// flags (the rules OLM v1's CRD upgrade-safety preflight checks, and some
// it does not); the findings that stored objects decide are then judged
// against those objects (Finding.Affects, Judge), which the caller lists
// and passes in as values: the rules read no cluster. Pruned is the
// finding of a CRD the run deletes outright (its prune), judged the same
// way by the objects it still stores.
package crdsafety

import (
	"fmt"
	"slices"
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
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
	// RuleCRDPruned: a CRD the run deletes (its prune, with PruneCRDs:
	// the target strategy lacks it) still stores objects; deleting a CRD
	// deletes every custom resource of it. Judged by any object
	// (AnyObject, Pruned); a pruned CRD that stores none is safe. An
	// uninstall is not judged by it: deleting the CRDs is what an
	// uninstall without KeepCRDs is asked to do.
	RuleCRDPruned Rule = "crdPruned"
)

// Rules lists every rule, in the order findings are reported.
var Rules = []Rule{RuleScope, RuleStoredVersionRemoved, RuleServedVersionRemoved, RuleFieldRemoved, RuleTypeChanged,
	RuleEnumTightened, RuleBoundTightened, RuleRequiredAdded, RuleDefaultChanged, RuleCRDPruned}

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
		if f.Truncated {
			b.WriteString(" (more were not read)")
		}
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
