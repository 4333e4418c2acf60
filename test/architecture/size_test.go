package architecture_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The size limits of issue 41: a newcomer reads a function on one screen
// and a file in one sitting. A function counts its lines from func to
// the closing brace, less the lines its multi-line string literals span
// beyond their first (cobra help text and fixtures are read as text, not
// as code); a file counts all its lines.
const (
	maxFuncLines = 80
	maxFileLines = 600
)

// sizeRoots are the directories of the root module whose Go files are
// held to the limits (tests, generated files, testdata and other modules
// excepted).
var sizeRoots = []string{"pkg", "internal", "cmd", "api"}

// sizeExemptions are the functions (path:Func, path:Type.Method) and files
// (path) over the limits, each with why. An entry that is no longer over
// its limit fails the test, so the list only shrinks.
var sizeExemptions = map[string]string{
	"api/v1alpha1/installation_types.go": "API types: most lines are the field documentation the CRD schema is generated from",
}

// oversize is one function or file over its limit.
type oversize struct {
	key   string // path:Func or path
	lines int
	max   int
}

// measureFile returns the functions and the file of src (named path)
// over the limits.
func measureFile(path string, src []byte) ([]oversize, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	if ast.IsGenerated(f) {
		return nil, nil
	}
	var out []oversize
	if n := fset.File(f.Pos()).LineCount(); n > maxFileLines {
		out = append(out, oversize{key: path, lines: n, max: maxFileLines})
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		if n := funcLines(fset, fd); n > maxFuncLines {
			out = append(out, oversize{key: path + ":" + funcName(fd), lines: n, max: maxFuncLines})
		}
	}
	return out, nil
}

// funcLines counts fd's lines, less the continuation lines of its string
// literals.
func funcLines(fset *token.FileSet, fd *ast.FuncDecl) int {
	n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
	ast.Inspect(fd, func(x ast.Node) bool {
		if b, ok := x.(*ast.BasicLit); ok && b.Kind == token.STRING {
			n -= fset.Position(b.End()).Line - fset.Position(b.Pos()).Line
		}
		return true
	})
	return n
}

// funcName is Func, or Type.Method for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr: // generic receiver T[P]
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// measureModule measures every non-test Go file under sizeRoots of the
// module at root.
func measureModule(root string) ([]oversize, error) {
	var out []oversize
	for _, top := range sizeRoots {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" {
					return filepath.SkipDir
				}
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != root {
					return filepath.SkipDir // another module
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			over, err := measureFile(filepath.ToSlash(rel), src)
			out = append(out, over...)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// checkSizes returns a complaint for each oversize not exempted and for
// each exemption no longer needed.
func checkSizes(over []oversize, exempt map[string]string) []string {
	var bad []string
	seen := map[string]bool{}
	for _, o := range over {
		seen[o.key] = true
		if _, ok := exempt[o.key]; ok {
			continue
		}
		bad = append(bad, fmt.Sprintf("%s: %d lines, over the limit of %d: split it by concern (flags, decisions, I/O; help text as constants)", o.key, o.lines, o.max))
	}
	for key := range exempt {
		if !seen[key] {
			bad = append(bad, fmt.Sprintf("%s: exempted, but within the limits now (or gone): delete its entry in sizeExemptions", key))
		}
	}
	slices.Sort(bad)
	return bad
}

func TestSizeLimits(t *testing.T) {
	over, err := measureModule("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range checkSizes(over, sizeExemptions) {
		t.Error(b)
	}
}

// TestSizeLimitsCatchOversize checks the check on synthesised sources: a
// function of 81 code lines is caught, one whose length is a help text
// literal is not, a long file is, an exemption lets one through, and a
// stale exemption is reported.
func TestSizeLimitsCatchOversize(t *testing.T) {
	body := func(n int) string {
		return strings.Repeat("\tx++\n", n)
	}
	long := "package p\n\nfunc Long() {\n\tx := 0\n" + body(maxFuncLines-2) + "}\n" // 81 lines
	fits := "package p\n\nfunc Fits() {\n\tx := 0\n" + body(maxFuncLines-3) + "}\n" // 80 lines
	help := "package p\n\nfunc Help() string {\n\treturn `" + strings.Repeat("help text\n", 200) + "`\n}\n"
	method := "package p\n\ntype T struct{}\n\nfunc (t *T) M() {\n\tx := 0\n" + body(maxFuncLines) + "}\n"
	file := "package p\n" + strings.Repeat("\n// filler\n", maxFileLines/2)

	var over []oversize
	for name, src := range map[string]string{"long.go": long, "fits.go": fits, "help.go": help, "method.go": method, "file.go": file} {
		o, err := measureFile(name, []byte(src))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		over = append(over, o...)
	}
	var keys []string
	for _, o := range over {
		keys = append(keys, o.key)
	}
	slices.Sort(keys)
	if want := []string{"file.go", "long.go:Long", "method.go:T.M"}; !slices.Equal(keys, want) {
		t.Fatalf("oversize = %q, want %q", keys, want)
	}
	bad := checkSizes(over, map[string]string{"method.go:T.M": "test", "gone.go:F": "test"})
	if len(bad) != 3 || !strings.HasPrefix(bad[0], "file.go:") || !strings.HasPrefix(bad[1], "gone.go:F: exempted") || !strings.HasPrefix(bad[2], "long.go:Long:") {
		t.Fatalf("complaints = %q, want file.go, the stale gone.go:F and long.go:Long", bad)
	}
	gen := "// Code generated by x. DO NOT EDIT.\n\n" + long
	if o, err := measureFile("gen.go", []byte(gen)); err != nil || len(o) != 0 {
		t.Fatalf("generated file: %v, %v; want it skipped", o, err)
	}
}
