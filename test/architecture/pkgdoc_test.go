package architecture_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// undocumented walks root and returns every directory holding a Go package
// (non-test files) none of whose files carries a package comment beginning
// "Package <name> ", so that `go doc` of each package says in its first
// sentence what the package is for.
func undocumented(t *testing.T, root string) []string {
	t.Helper()
	type pkg struct {
		name       string
		documented bool
	}
	dirs := map[string]*pkg{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		p := dirs[dir]
		if p == nil {
			p = &pkg{name: f.Name.Name}
			dirs[dir] = p
		}
		if f.Doc != nil && strings.HasPrefix(f.Doc.Text(), "Package "+f.Name.Name+" ") {
			p.documented = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for dir, p := range dirs {
		if !p.documented {
			missing = append(missing, dir)
		}
	}
	sort.Strings(missing)
	return missing
}

// TestPackagesSayWhatTheyAreFor fails when a package under pkg/ has no
// package comment "Package <name> ...": the public API is read through
// `go doc`, whose first sentence must tell an author what the package is for.
func TestPackagesSayWhatTheyAreFor(t *testing.T) {
	if missing := undocumented(t, "../../pkg"); len(missing) > 0 {
		t.Errorf("packages without a \"Package <name> ...\" doc comment: %s", strings.Join(missing, ", "))
	}
}

func TestPackagesSayWhatTheyAreForCatchesMissing(t *testing.T) {
	root := t.TempDir()
	write := func(rel, text string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("good/doc.go", "// Package good does one thing.\npackage good\n")
	write("good/more.go", "package good\n")
	write("bare/bare.go", "package bare\n")
	write("wrong/wrong.go", "// Does things.\npackage wrong\n")
	write("testonly/x_test.go", "// Package testonly is only a test.\npackage testonly\n")
	write("testonly/x.go", "package testonly\n")
	got := undocumented(t, root)
	var rel []string
	for _, d := range got {
		r, _ := filepath.Rel(root, d)
		rel = append(rel, r)
	}
	if want := "bare,testonly,wrong"; strings.Join(rel, ",") != want {
		t.Errorf("undocumented = %v, want %s", rel, want)
	}
}
