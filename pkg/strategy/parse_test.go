package strategy

import (
	"errors"
	"strings"
	"testing"
)

func TestSplitDocuments(t *testing.T) {
	cases := []struct {
		name  string
		text  string
		lines []int // start line of each document
	}{
		{"leading separator", "---\na: 1\n---\nb: 2\n", []int{2, 4}},
		{"no separator", "a: 1\n", []int{1}},
		{"empty and comment documents dropped", "---\n---\n# only a comment\n---\na: 1\n", []int{5}},
		{"dashes inside a block scalar stay", "---\nk: |\n  ---\n  x\n---\nb: 1\n", []int{2, 6}},
		{"dashes inside a value stay", "---\nk: a---b\nl: '--- x'\n", []int{2}},
		{"separator with comment", "--- # first\na: 1\n", []int{2}},
		{"separator with content", "--- {a: 1}\n", []int{1}},
		{"document end marker", "a: 1\n...\nb: 2\n", []int{1, 3}},
		{"CRLF", "---\r\na: 1\r\n---\r\nb: 2\r\n", []int{2, 4}},
		{"four dashes are content", "a: |\n ----\n", []int{1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			docs := splitDocuments([]byte(c.text))
			var lines []int
			for _, d := range docs {
				lines = append(lines, d.Line)
			}
			if len(lines) != len(c.lines) {
				t.Fatalf("got documents at lines %v, want %v", lines, c.lines)
			}
			for i := range lines {
				if lines[i] != c.lines[i] {
					t.Fatalf("got documents at lines %v, want %v", lines, c.lines)
				}
			}
		})
	}
}

func TestParseValues(t *testing.T) {
	text := `---
apiVersion: v1
kind: ConfigMap
metadata:
  name: c
  namespace: n
data:
  dashes: |
    ---
    not a separator
  quoted: "a --- b"
  when: 2024-01-02
  anchor: &x shared
  alias: *x
spec:
  int: 42
  big: 0x10
  float: 1.5
  bool: true
  yes: yes
  nothing: null
---
{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "n"}, "n": 7, "f": 0.5}
`
	s, warnings, err := Parse([]byte(text), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 0 {
		t.Fatalf("warnings: %v", warnings)
	}
	if len(s.Objects) != 2 {
		t.Fatalf("objects: %d", len(s.Objects))
	}
	cm := s.Objects[1].Object // Secret sorts before ConfigMap
	data := cm["data"].(map[string]any)
	if data["dashes"] != "---\nnot a separator\n" || data["quoted"] != "a --- b" || data["when"] != "2024-01-02" || data["alias"] != "shared" {
		t.Errorf("data = %#v", data)
	}
	spec := cm["spec"].(map[string]any)
	if spec["int"] != int64(42) || spec["big"] != int64(16) || spec["float"] != 1.5 || spec["bool"] != true || spec["yes"] != "yes" || spec["nothing"] != nil {
		t.Errorf("spec = %#v", spec)
	}
	secret := s.Objects[0].Object
	if secret["n"] != int64(7) || secret["f"] != 0.5 {
		t.Errorf("json numbers = %#v %#v", secret["n"], secret["f"])
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name string
		text string
		want []string
	}{
		{"invalid yaml", "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: [\n", []string{"document 2 (line 8, byte offset 56): not valid YAML"}},
		{"no kind", "apiVersion: v1\nmetadata: {name: a}\n", []string{"document 1 (line 1, byte offset 0): no kind"}},
		{"no apiVersion", "kind: Secret\nmetadata: {name: a}\n", []string{"no apiVersion"}},
		{"no name", "apiVersion: v1\nkind: Secret\nmetadata: {}\n", []string{"Secret has no metadata.name"}},
		{"not an object", "- a\n- b\n", []string{"not an object but a list"}},
		{"kind not a string", "apiVersion: v1\nkind: 3\nmetadata: {name: a}\n", []string{"kind is not a string but a number"}},
		{"duplicate key", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: a\n  name: b\n", []string{"line 5: key \"name\" is given twice"}},
		{"infinity", "apiVersion: v1\nkind: Secret\nmetadata: {name: a}\nx: .inf\n", []string{"cannot be represented in JSON"}},
		{"alias bomb", "apiVersion: v1\nkind: Secret\nmetadata: {name: a}\na: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n", []string{"too many values"}},
		{"all bad documents reported", "---\nkind: A\n---\nkind: B\n", []string{"document 1 (line 2", "document 2 (line 4"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := Parse([]byte(c.text), ParseOptions{})
			if err == nil {
				t.Fatal("no error")
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("%v is not a *ParseError", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestRepairsAndWarnings(t *testing.T) {
	text := `---
apiVersion: v1
kind: ValidatingAdmissionPolicy
metadata: {name: p}
---
apiVersion: v1
kind: Pod
metadata: {name: pod, namespace: n}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec: {group: example.com, names: {kind: Gadget}}
---
apiVersion: example.com/v1
kind: Gadget
metadata: {name: g}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c, namespace: n}
data: {v: "1"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c, namespace: n}
data: {v: "2"}
`
	s, warnings, err := Parse([]byte(text), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[WarningCode][]string{}
	for _, w := range warnings {
		got[w.Code] = append(got[w.Code], w.Object.Kind)
	}
	if strings.Join(got[WarnAPIVersionRepaired], ",") != "ValidatingAdmissionPolicy" {
		t.Errorf("repairs: %v", got)
	}
	// Pod is core and unknown to the table: reported, never repaired.
	if strings.Join(got[WarnUnknownKind], ",") != "Pod,Widget" {
		t.Errorf("unknown kinds: %v (Gadget has its CRD in the strategy)", got[WarnUnknownKind])
	}
	if len(got[WarnDuplicateObject]) != 1 {
		t.Errorf("duplicates: %v", got)
	}
	var order []string
	for _, o := range s.Objects {
		order = append(order, o.GetKind())
		if o.GetKind() == "ConfigMap" && o.Object["data"].(map[string]any)["v"] != "2" {
			t.Error("the later, different duplicate must win")
		}
		if o.GetKind() == "ValidatingAdmissionPolicy" && o.GetAPIVersion() != "admissionregistration.k8s.io/v1" {
			t.Errorf("not repaired: %s", o.GetAPIVersion())
		}
	}
	if strings.Join(order, ",") != "CustomResourceDefinition,ValidatingAdmissionPolicy,ConfigMap,Pod,Gadget,Widget" {
		t.Errorf("order %v: known kinds first in table order, unknown after by group then kind", order)
	}
}

// kubectl accepts List and typed lists (ConfigMapList, RoleList, …); their
// items are the objects, and each expansion is reported.
func TestListDocumentsAreExpanded(t *testing.T) {
	text := `apiVersion: v1
kind: ConfigMapList
items:
- metadata: {name: a, namespace: ns}
  data: {k: v}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: b, namespace: ns}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleList
metadata: {resourceVersion: ""}
items:
- metadata: {name: reader, namespace: ns}
  rules: []
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ServiceAccount
  metadata: {name: sa, namespace: ns}
`
	s, warnings, err := Parse([]byte(text), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range s.Objects {
		got = append(got, o.GetAPIVersion()+" "+RefOf(o).String())
	}
	want := []string{"v1 ServiceAccount/ns/sa", "rbac.authorization.k8s.io/v1 Role.rbac.authorization.k8s.io/ns/reader", "v1 ConfigMap/ns/a", "v1 ConfigMap/ns/b"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("objects:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	expanded := map[string]int{}
	for _, w := range warnings {
		if w.Code == WarnListExpanded {
			expanded[w.Object.Kind] = w.Document
		}
	}
	if expanded["ConfigMapList"] != 1 || expanded["RoleList"] != 2 || expanded["List"] != 3 {
		t.Errorf("expansion warnings %v", warnings)
	}
}

func TestListItemErrorNamesTheItem(t *testing.T) {
	text := "---\napiVersion: v1\nkind: ConfigMapList\nitems:\n- metadata: {name: a}\n- metadata: {}\n"
	_, _, err := Parse([]byte(text), ParseOptions{})
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Document != 1 || pe.Line != 2 || !strings.Contains(err.Error(), "ConfigMapList item 2: ConfigMap has no metadata.name") {
		t.Fatalf("error %v", err)
	}
}

// An object whose kind merely ends in "List" is an object, not a list.
func TestKindEndingInListWithANameIsAnObject(t *testing.T) {
	text := "apiVersion: example.com/v1\nkind: AllowList\nmetadata: {name: x}\nitems: [a]\n"
	s, _, err := Parse([]byte(text), ParseOptions{})
	if err != nil || len(s.Objects) != 1 || s.Objects[0].GetKind() != "AllowList" {
		t.Fatalf("parse: %v %v", s, err)
	}
}

// DefinedResource: a CRD's custom resources at its served storage version,
// else its first served one; nothing for a CRD serving no version or for
// another kind.
func TestDefinedResource(t *testing.T) {
	crd := func(versions string) string {
		return "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: gizmos.example.com\nspec:\n  group: example.com\n  names:\n    kind: Gizmo\n    plural: gizmos\n  versions:\n" + versions
	}
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"storage", crd("  - {name: v1alpha1, served: true, storage: false}\n  - {name: v1, served: true, storage: true}\n  - {name: v2, served: true, storage: false}\n"), "example.com/v1, Resource=gizmos"},
		{"storage not served", crd("  - {name: v1, served: false, storage: true}\n  - {name: v2, served: true, storage: false}\n  - {name: v3, served: true, storage: false}\n"), "example.com/v2, Resource=gizmos"},
		{"none served", crd("  - {name: v1, served: false, storage: true}\n"), ""},
		{"not a CRD", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: gizmos\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, err := Parse([]byte(tc.doc), ParseOptions{})
			if err != nil {
				t.Fatal(err)
			}
			gvr, ok := DefinedResource(s.Objects[0])
			if got := gvr.String(); ok != (tc.want != "") || (ok && got != tc.want) {
				t.Errorf("DefinedResource = %q, %v; want %q", got, ok, tc.want)
			}
		})
	}
}
