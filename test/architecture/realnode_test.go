package architecture

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// realNodeTests reads REAL_NODE_TESTS of hack/test.sh: the regexp that
// picks the tests of test/e2e make test runs on the cluster with the real
// node (the others run, with -skip, on one without it).
func realNodeTests(t *testing.T) *regexp.Regexp {
	t.Helper()
	b, err := os.ReadFile("../../hack/test.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^REAL_NODE_TESTS='([^']+)'$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("hack/test.sh has no line REAL_NODE_TESTS='...'")
	}
	return regexp.MustCompile(string(m[1]))
}

// misnamedRealNodeTests returns the tests of files (one package) whose
// name and use of the real node disagree: a test that calls RealNode
// (testenv's, directly or through the package's own functions and
// methods, matched by name) must match re, and a test that matches re
// must call it.
func misnamedRealNodeTests(files []*ast.File, re *regexp.Regexp) []string {
	calls := map[string][]string{} // function or method name -> names it calls
	var tests []string
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			name := fn.Name.Name
			if fn.Recv == nil && strings.HasPrefix(name, "Test") {
				tests = append(tests, name)
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if c, ok := n.(*ast.CallExpr); ok {
					switch f := c.Fun.(type) {
					case *ast.Ident:
						calls[name] = append(calls[name], f.Name)
					case *ast.SelectorExpr:
						calls[name] = append(calls[name], f.Sel.Name)
					}
				}
				return true
			})
		}
	}
	memo := map[string]bool{}
	var reaches func(string) bool
	reaches = func(name string) bool {
		if v, ok := memo[name]; ok {
			return v
		}
		memo[name] = false // a cycle adds nothing
		for _, c := range calls[name] {
			if c == "RealNode" || reaches(c) {
				memo[name] = true
				break
			}
		}
		return memo[name]
	}
	var bad []string
	for _, name := range tests {
		switch uses, named := reaches(name), re.MatchString(name); {
		case uses && !named:
			bad = append(bad, name+" uses the real node but REAL_NODE_TESTS of hack/test.sh does not match it (make test would run it on a cluster without one): name it TestReal... or ...OnRealNode")
		case named && !uses:
			bad = append(bad, name+" matches REAL_NODE_TESTS of hack/test.sh but does not use the real node: rename it")
		}
	}
	slices.Sort(bad)
	return bad
}

func parseDir(t *testing.T, dir string) []*ast.File {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, p := range paths { // every file, whatever its build tags
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// TestRealNodeTestsAreNamed: make test splits test/e2e by name between
// the cluster with the real node and one without (hack/test.sh). A test
// that uses the real node under another name would fail under CI=true; one
// named so that does not use it only lengthens the real-node shard.
func TestRealNodeTestsAreNamed(t *testing.T) {
	re := realNodeTests(t)
	files := parseDir(t, "../e2e")
	if len(files) < 10 {
		t.Fatalf("found %d test files in test/e2e", len(files))
	}
	for _, b := range misnamedRealNodeTests(files, re) {
		t.Error(b)
	}
}

// TestRealNodeTestsAreNamedCatchesMisnamed checks the rule itself.
func TestRealNodeTestsAreNamedCatchesMisnamed(t *testing.T) {
	src := `package e2e
func TestRealGood(t *testing.T) { setup(t) }
func TestInstallOnRealNode(t *testing.T) { e := env(); e.RealNode(t) }
func TestSneaky(t *testing.T) { run(func() { setup(t) }) }
func TestRealButNot(t *testing.T) { other(t) }
func TestPlain(t *testing.T) { other(t) }
func setup(t *testing.T) { (&helper{}).node(t) }
func (h *helper) node(t *testing.T) { h.env.RealNode(t); setup(t) }
`
	f, err := parser.ParseFile(token.NewFileSet(), "p_test.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := misnamedRealNodeTests([]*ast.File{f}, realNodeTests(t))
	if len(got) != 2 || !strings.HasPrefix(got[0], "TestRealButNot ") || !strings.HasPrefix(got[1], "TestSneaky ") {
		t.Fatalf("misnamed = %q, want TestRealButNot and TestSneaky", got)
	}
}
