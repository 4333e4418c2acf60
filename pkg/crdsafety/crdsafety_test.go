package crdsafety_test

import (
	"fmt"
	"strings"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/installstrategy/installstrategy/pkg/crdsafety"
)

// crd builds things.example.com with one version v1 of the given spec
// schema (YAML of the properties of .spec), plus extra YAML of the CRD's
// spec (scope...).
func crd(t *testing.T, scope, specSchema string) *apiextv1.CustomResourceDefinition {
	t.Helper()
	text := fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: things.example.com}
spec:
  group: example.com
  scope: %s
  names: {plural: things, kind: Thing}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
%s
status: {storedVersions: [v1]}
`, scope, indent(specSchema, "            "))
	out := &apiextv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict([]byte(text), out); err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	return out
}

func indent(s, by string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := range lines {
		lines[i] = by + lines[i]
	}
	return strings.Join(lines, "\n")
}

// findingAt returns the finding of rule at path; the test fails without.
func findingAt(t *testing.T, found []crdsafety.Finding, rule crdsafety.Rule, path string) *crdsafety.Finding {
	t.Helper()
	for i := range found {
		if found[i].Rule == rule && found[i].Path == path {
			return &found[i]
		}
	}
	t.Fatalf("no %s finding at %q; found %v", rule, path, found)
	return nil
}

func thing(spec string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(`{apiVersion: example.com/v1, kind: Thing, metadata: {name: a, namespace: ns}, spec: `+spec+`}`), &o.Object); err != nil {
		panic(err)
	}
	return o
}

// TestRules: every rule, each with an unsafe variant (a stored object
// affected) and a safe one (the same change, no stored object affected),
// plus changes that are safe whatever is stored.
func TestRules(t *testing.T) {
	base := `type: object
properties:
  color: {type: string, enum: [red, green, blue]}
  size: {type: integer, minimum: 0, maximum: 10}
  name: {type: string, maxLength: 20, pattern: "^[a-z]+$"}
  tags: {type: array, items: {type: string}, maxItems: 5}
  mode: {type: string, default: fast}
  labels: {type: object, additionalProperties: {type: string, maxLength: 10}}`
	tests := []struct {
		name   string
		scope  string
		schema string
		stored string
		rule   crdsafety.Rule
		path   string
		unsafe bool
	}{
		{"scope changed", "Cluster", base, `{}`, crdsafety.RuleScope, "", true},
		{"field removed, used", "Namespaced", strings.Replace(base, "  size: {type: integer, minimum: 0, maximum: 10}\n", "", 1), `{size: 3}`, crdsafety.RuleFieldRemoved, ".spec.size", true},
		{"field removed, unused", "Namespaced", strings.Replace(base, "  size: {type: integer, minimum: 0, maximum: 10}\n", "", 1), `{color: red}`, crdsafety.RuleFieldRemoved, ".spec.size", false},
		{"type changed, used", "Namespaced", strings.Replace(base, "size: {type: integer, minimum: 0, maximum: 10}", "size: {type: string}", 1), `{size: 3}`, crdsafety.RuleTypeChanged, ".spec.size", true},
		{"type changed, unused", "Namespaced", strings.Replace(base, "size: {type: integer, minimum: 0, maximum: 10}", "size: {type: string}", 1), `{color: red}`, crdsafety.RuleTypeChanged, ".spec.size", false},
		{"enum value removed, used", "Namespaced", strings.Replace(base, "[red, green, blue]", "[red, green]", 1), `{color: blue}`, crdsafety.RuleEnumTightened, ".spec.color", true},
		{"enum value removed, unused", "Namespaced", strings.Replace(base, "[red, green, blue]", "[red, green]", 1), `{color: red}`, crdsafety.RuleEnumTightened, ".spec.color", false},
		{"enum added, value outside", "Namespaced", strings.Replace(base, "mode: {type: string, default: fast}", "mode: {type: string, default: fast, enum: [fast]}", 1), `{mode: slow}`, crdsafety.RuleEnumTightened, ".spec.mode", true},
		{"minimum raised, below", "Namespaced", strings.Replace(base, "minimum: 0", "minimum: 5", 1), `{size: 3}`, crdsafety.RuleBoundTightened, ".spec.size", true},
		{"minimum raised, above", "Namespaced", strings.Replace(base, "minimum: 0", "minimum: 5", 1), `{size: 7}`, crdsafety.RuleBoundTightened, ".spec.size", false},
		{"maximum lowered, above", "Namespaced", strings.Replace(base, "maximum: 10", "maximum: 5", 1), `{size: 7}`, crdsafety.RuleBoundTightened, ".spec.size", true},
		{"exclusive maximum at the bound", "Namespaced", strings.Replace(base, "maximum: 10", "maximum: 10, exclusiveMaximum: true", 1), `{size: 10}`, crdsafety.RuleBoundTightened, ".spec.size", true},
		{"maxLength lowered, longer", "Namespaced", strings.Replace(base, "maxLength: 20", "maxLength: 3", 1), `{name: abcdef}`, crdsafety.RuleBoundTightened, ".spec.name", true},
		{"maxLength lowered, shorter", "Namespaced", strings.Replace(base, "maxLength: 20", "maxLength: 3", 1), `{name: ab}`, crdsafety.RuleBoundTightened, ".spec.name", false},
		{"minLength added, shorter", "Namespaced", strings.Replace(base, "maxLength: 20", "maxLength: 20, minLength: 3", 1), `{name: ab}`, crdsafety.RuleBoundTightened, ".spec.name", true},
		{"pattern changed, no match", "Namespaced", strings.Replace(base, `"^[a-z]+$"`, `"^[a-c]+$"`, 1), `{name: xyz}`, crdsafety.RuleBoundTightened, ".spec.name", true},
		{"pattern changed, matches", "Namespaced", strings.Replace(base, `"^[a-z]+$"`, `"^[a-c]+$"`, 1), `{name: abc}`, crdsafety.RuleBoundTightened, ".spec.name", false},
		{"maxItems lowered, more", "Namespaced", strings.Replace(base, "maxItems: 5", "maxItems: 1", 1), `{tags: [a, b]}`, crdsafety.RuleBoundTightened, ".spec.tags", true},
		{"minItems added, fewer", "Namespaced", strings.Replace(base, "maxItems: 5", "maxItems: 5, minItems: 2", 1), `{tags: [a]}`, crdsafety.RuleBoundTightened, ".spec.tags", true},
		{"map value bound, longer", "Namespaced", strings.Replace(base, "maxLength: 10}}", "maxLength: 2}}", 1), `{labels: {a: abcdef}}`, crdsafety.RuleBoundTightened, ".spec.labels{*}", true},
		{"map value bound, shorter", "Namespaced", strings.Replace(base, "maxLength: 10}}", "maxLength: 2}}", 1), `{labels: {a: ab}}`, crdsafety.RuleBoundTightened, ".spec.labels{*}", false},
		{"required added, missing", "Namespaced", base + "\nrequired: [size]", `{color: red}`, crdsafety.RuleRequiredAdded, ".spec.size", true},
		{"required added, all have it", "Namespaced", base + "\nrequired: [size]", `{size: 1}`, crdsafety.RuleRequiredAdded, ".spec.size", false},
		{"default changed, objects without it", "Namespaced", strings.Replace(base, "default: fast", "default: slow", 1), `{color: red}`, crdsafety.RuleDefaultChanged, ".spec.mode", true},
		{"default changed, every object sets it", "Namespaced", strings.Replace(base, "default: fast", "default: slow", 1), `{mode: fast}`, crdsafety.RuleDefaultChanged, ".spec.mode", false},
		{"default removed, objects without it", "Namespaced", strings.Replace(base, ", default: fast", "", 1), `{}`, crdsafety.RuleDefaultChanged, ".spec.mode", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := crd(t, "Namespaced", base)
			desired := crd(t, tt.scope, tt.schema)
			found := crdsafety.Compare(live, desired)
			match := findingAt(t, found, tt.rule, tt.path)
			if match.CRD != "things.example.com" || (tt.rule != crdsafety.RuleScope && match.Version != "v1") {
				t.Errorf("finding names crd %q version %q", match.CRD, match.Version)
			}
			refused := crdsafety.Judge(found, map[string][]*unstructured.Unstructured{"v1": {thing(tt.stored)}}, nil)
			got := false
			for _, f := range refused {
				if f.Rule == tt.rule && f.Path == tt.path {
					got = true
					if f.Judge != crdsafety.Always && (f.Objects != 1 || f.Examples[0] != "ns/a") {
						t.Errorf("affected %d %v, want 1 ns/a", f.Objects, f.Examples)
					}
					if !strings.Contains(f.String(), string(tt.rule)) || !strings.Contains(f.String(), "things.example.com") {
						t.Errorf("description %q", f.String())
					}
				}
			}
			if got != tt.unsafe {
				t.Errorf("unsafe = %v, want %v (refused: %v)", got, tt.unsafe, refused)
			}
			// The override of the rule on the CRD accepts it, one of
			// another rule or CRD does not.
			crdsafety.Permit(refused, []crdsafety.Allow{{CRD: "other.example.com", Rule: tt.rule}, {CRD: "things.example.com", Rule: "none"}})
			if len(crdsafety.Refused(refused)) != len(refused) {
				t.Error("an override of another CRD or rule accepted a finding")
			}
			crdsafety.Permit(refused, []crdsafety.Allow{{CRD: "things.example.com", Rule: tt.rule}})
			for _, f := range crdsafety.Refused(refused) {
				if f.Rule == tt.rule {
					t.Errorf("override did not accept %v", f)
				}
			}
		})
	}
}

// TestSafeChanges: widening changes are not flagged at all.
func TestSafeChanges(t *testing.T) {
	base := `type: object
properties:
  color: {type: string, enum: [red, green]}
  size: {type: integer, minimum: 5, maximum: 10}
required: [color]`
	wider := `type: object
properties:
  color: {type: string, enum: [red, green, blue]}
  size: {type: integer, minimum: 0, maximum: 20}
  extra: {type: string}`
	if found := crdsafety.Compare(crd(t, "Namespaced", base), crd(t, "Namespaced", wider)); len(found) != 0 {
		t.Errorf("widening flagged: %v", found)
	}
	if found := crdsafety.Compare(crd(t, "Namespaced", base), crd(t, "Namespaced", base)); len(found) != 0 {
		t.Errorf("no change flagged: %v", found)
	}
}

// TestVersions: a served version dropped while objects exist; a stored
// version dropped whose migration target lacks a field objects use (and
// not when none does); a stored version behind a conversion webhook.
func TestVersions(t *testing.T) {
	two := func(v1alpha1Schema, v1Schema string, webhook bool) *apiextv1.CustomResourceDefinition {
		c := crd(t, "Namespaced", v1Schema)
		old := *c.Spec.Versions[0].DeepCopy()
		old.Name, old.Storage = "v1alpha1", false
		s := crd(t, "Namespaced", v1alpha1Schema)
		old.Schema = s.Spec.Versions[0].Schema
		c.Spec.Versions = append([]apiextv1.CustomResourceDefinitionVersion{old}, c.Spec.Versions...)
		c.Status.StoredVersions = []string{"v1alpha1", "v1"}
		if webhook {
			c.Spec.Conversion = &apiextv1.CustomResourceConversion{Strategy: apiextv1.WebhookConverter}
		}
		return c
	}
	withField := "type: object\nproperties:\n  size: {type: integer}\n  old: {type: string}"
	without := "type: object\nproperties:\n  size: {type: integer}"
	live := two(withField, without, false)
	desired := crd(t, "Namespaced", without)
	found := crdsafety.Compare(live, desired)
	rules := map[crdsafety.Rule]string{}
	for _, f := range found {
		rules[f.Rule] = f.Path
	}
	if len(found) != 1 || rules[crdsafety.RuleFieldRemoved] != ".spec.old" || found[0].Version != "v1alpha1" || !strings.Contains(found[0].Detail, "migrated to v1") {
		t.Fatalf("findings %v, want .spec.old lost by the migration of v1alpha1 to v1", found)
	}
	objs := map[string][]*unstructured.Unstructured{"v1alpha1": {thing(`{old: x}`)}}
	if got := crdsafety.Judge(found, objs, nil); len(got) != 1 {
		t.Errorf("with an object using .spec.old: refused %v, want the field", got)
	}
	if got := crdsafety.Judge(found, nil, nil); len(got) != 0 {
		t.Errorf("no object: refused %v", got)
	}
	// Not every object read: what none of those read affects stays.
	if got := crdsafety.Judge(found, map[string][]*unstructured.Unstructured{"v1alpha1": {thing(`{size: 1}`)}}, map[string]bool{"v1alpha1": true}); len(got) != 1 || !got[0].Truncated {
		t.Errorf("truncated: refused %v", got)
	}
	// A stored version kept but no longer served: refused while objects
	// exist.
	unserved := two(without, without, false)
	unserved.Spec.Versions[0].Served = false
	kept := live.DeepCopy()
	kept.Spec.Versions[0].Schema = unserved.Spec.Versions[0].Schema
	stopped := crdsafety.Compare(kept, unserved)
	if got := crdsafety.Judge(stopped, map[string][]*unstructured.Unstructured{"v1alpha1": {thing(`{}`)}}, nil); !hasRule(got, crdsafety.RuleServedVersionRemoved) {
		t.Errorf("stored version no longer served, objects: refused %v", got)
	}
	if got := crdsafety.Judge(stopped, nil, nil); len(got) != 0 {
		t.Errorf("stored version no longer served, no object: refused %v", got)
	}
	hooked := crdsafety.Compare(two(without, without, true), desired)
	if got := crdsafety.Judge(hooked, map[string][]*unstructured.Unstructured{"v1": {thing(`{}`)}}, nil); !hasRule(got, crdsafety.RuleStoredVersionRemoved) {
		t.Errorf("stored version behind a webhook: refused %v", got)
	}
	if got := crdsafety.Judge(hooked, nil, nil); len(got) != 0 {
		t.Errorf("stored version behind a webhook, no object: refused %v", got)
	}
}

func hasRule(fs []crdsafety.Finding, r crdsafety.Rule) bool {
	for _, f := range fs {
		if f.Rule == r {
			return true
		}
	}
	return false
}

func TestPreserveUnknownFieldsDropped(t *testing.T) {
	live := crd(t, "Namespaced", "type: object\nx-kubernetes-preserve-unknown-fields: true\nproperties:\n  size: {type: integer}")
	desired := crd(t, "Namespaced", "type: object\nproperties:\n  size: {type: integer}")
	found := crdsafety.Compare(live, desired)
	if got := crdsafety.Judge(found, map[string][]*unstructured.Unstructured{"v1": {thing(`{size: 1, free: x}`)}}, nil); !hasRule(got, crdsafety.RuleFieldRemoved) {
		t.Errorf("unknown field in use: refused %v", got)
	}
	if got := crdsafety.Judge(found, map[string][]*unstructured.Unstructured{"v1": {thing(`{size: 1}`)}}, nil); len(got) != 0 {
		t.Errorf("no unknown field in use: refused %v", got)
	}
}

func TestParseAllow(t *testing.T) {
	a, err := crdsafety.ParseAllow("things.example.com=scope")
	if err != nil || a != (crdsafety.Allow{CRD: "things.example.com", Rule: crdsafety.RuleScope}) {
		t.Errorf("%v %v", a, err)
	}
	for _, bad := range []string{"things", "=scope", "things=", "things=everything"} {
		if _, err := crdsafety.ParseAllow(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
