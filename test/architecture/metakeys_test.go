package architecture_test

import (
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// keyLiteral is a string literal that is a label, annotation or finalizer
// key of installstrategy or KubeVirt (or a prefix of one): a domain of
// theirs, a slash, and a name. An apiVersion ("cli.installstrategy.io/v1")
// is not a key.
var (
	keyLiteral = regexp.MustCompile(`^([a-z0-9-]+\.)*(installstrategy|kubevirt)\.io/[A-Za-z0-9._-]*$`)
	apiVersion = regexp.MustCompile(`/v[0-9]+((alpha|beta)[0-9]+)?$`)
)

// keyHomes are the only places that may spell such a key: the vocabulary
// package, and the API package (its finalizer and kubebuilder markers).
var keyHomes = []string{"pkg/metakeys", "api/v1alpha1"}

// strayKeys returns "file:line: literal" for every key literal in the Go
// source src (named file) that is outside keyHomes.
func strayKeys(t *testing.T, fset *token.FileSet, file string, src any) []string {
	t.Helper()
	return strayLiterals(t, fset, file, src, func(v string) bool {
		return keyLiteral.MatchString(v) && !apiVersion.MatchString(v)
	})
}

// TestKeysHaveOneHome fails when a label or annotation key of
// installstrategy or KubeVirt is spelled outside pkg/metakeys (test files
// and api/v1alpha1 aside): every package names it through metakeys, so a
// key is declared once.
func TestKeysHaveOneHome(t *testing.T) {
	root := "../.."
	fset := token.NewFileSet()
	var stray []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if rel != "." {
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir // another module
				}
			}
			for _, h := range keyHomes {
				if rel == h {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		stray = append(stray, strayKeys(t, fset, p, nil)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stray {
		t.Errorf("%s: a label/annotation key outside pkg/metakeys; declare it there and use the constant", s)
	}
}

// TestKeysHaveOneHomeCatchesStrays checks the rule itself on sources with
// and without stray keys.
func TestKeysHaveOneHomeCatchesStrays(t *testing.T) {
	src := `package p
const a = "installstrategy.io/new-key"
var b = map[string]string{"kubevirt.io/other": "x", "revisions.installstrategy.io/": "y"}
const apiVersion = "cli.installstrategy.io/v1"
const group = "installstrategy.io"
const domain = "installstrategy.io/identity/v1\n"
const unrelated = "app.example.com/key"
`
	got := strayKeys(t, token.NewFileSet(), "p.go", src)
	want := []string{`"installstrategy.io/new-key"`, `"kubevirt.io/other"`, `"revisions.installstrategy.io/"`}
	if len(got) != len(want) {
		t.Fatalf("strays = %q, want %q", got, want)
	}
	for i := range want {
		if !strings.HasSuffix(got[i], want[i]) {
			t.Errorf("stray %d = %q, want one ending in %s", i, got[i], want[i])
		}
	}
}
