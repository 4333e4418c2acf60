package architecture_test

import (
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/installstrategy/installstrategy/pkg/kinds"
)

// kindHome is the only package under pkg/ that may spell a kind's name:
// per-kind behaviour is a field of the kind table, and code that builds or
// names an object of a known kind uses the table's GroupKinds
// (kinds.Secret, kinds.Namespace, …).
const kindHome = "pkg/kinds"

// kindExemption allows a kind name literal in one file (literal "" allows
// every one), for a reason.
type kindExemption struct {
	file, literal, reason string
}

// kindExemptions are the files that still spell a kind's name. Each entry
// must match a literal (a stale one fails the test).
var kindExemptions = []kindExemption{
	{"pkg/identity/algorithm.go", "Namespace", "a field name of the identity configuration's canonical form, not a kind"},
}

// kindNames returns the kinds of the table by name.
func kindNames() map[string]bool {
	out := map[string]bool{}
	for _, info := range kinds.All() {
		out[info.GroupKind.Kind] = true
	}
	return out
}

// strayKinds returns "file:line: literal" for every string literal in the
// Go source src (named file) that is the name of a kind in names.
func strayKinds(t *testing.T, fset *token.FileSet, file string, src any, names map[string]bool) []string {
	t.Helper()
	return strayLiterals(t, fset, file, src, func(v string) bool { return names[v] })
}

// TestKindsHaveOneHome fails when the name of a kind of the kind table
// ("DaemonSet", "Secret", …) is spelled in non-test Go code under pkg/
// outside pkg/kinds, except for kindExemptions: per-kind behaviour is a
// field of the table's rows, not a string match elsewhere.
func TestKindsHaveOneHome(t *testing.T) {
	root := "../.."
	names := kindNames()
	if !names["DaemonSet"] || !names["CustomResourceDefinition"] {
		t.Fatalf("the kind table lists %d kinds, not DaemonSet and CustomResourceDefinition", len(names))
	}
	fset := token.NewFileSet()
	used := make([]bool, len(kindExemptions))
	err := filepath.WalkDir(filepath.Join(root, "pkg"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == kindHome || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
	stray:
		for _, s := range strayKinds(t, fset, p, nil, names) {
			lit := s[strings.LastIndex(s, ": ")+2:]
			for i, e := range kindExemptions {
				if e.file == rel && (e.literal == "" || strconv.Quote(e.literal) == lit) {
					used[i] = true
					continue stray
				}
			}
			t.Errorf("%s: a kind name outside pkg/kinds; make the behaviour a field of the kind table (or use its GroupKind, e.g. kinds.Secret.Kind)", strings.TrimPrefix(s, root+"/"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range kindExemptions {
		if !used[i] {
			t.Errorf("exemption %s %q (%s) matches no literal: remove it", e.file, e.literal, e.reason)
		}
	}
}

// TestKindsHaveOneHomeCatchesStrays checks the rule itself on a source
// with kind names spelled and one using the table's GroupKinds.
func TestKindsHaveOneHomeCatchesStrays(t *testing.T) {
	src := `package p
func canary(kind string) bool { return kind == "DaemonSet" }
var ref = ObjectRef{Kind: "Secret", Name: "ca"}
var crd = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}
var fine = kinds.DaemonSet.Kind
const pod = "Pod" // not a kind of the table
const word = "daemonset"
`
	got := strayKinds(t, token.NewFileSet(), "p.go", src, kindNames())
	want := []string{`"DaemonSet"`, `"Secret"`, `"CustomResourceDefinition"`}
	if len(got) != len(want) {
		t.Fatalf("strays = %q, want %q", got, want)
	}
	for i := range want {
		if !strings.HasSuffix(got[i], want[i]) {
			t.Errorf("stray %d = %q, want one ending in %s", i, got[i], want[i])
		}
	}
}
