package architecture_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testingParam returns the name of ft's *testing.T, *testing.B,
// *testing.F or testing.TB parameter; "" when it has none.
func testingParam(ft *ast.FuncType) string {
	if ft.Params == nil {
		return ""
	}
	for _, f := range ft.Params.List {
		t := f.Type
		if s, ok := t.(*ast.StarExpr); ok {
			t = s.X
		}
		sel, ok := t.(*ast.SelectorExpr)
		if !ok {
			continue
		}
		if id, ok := sel.X.(*ast.Ident); !ok || id.Name != "testing" {
			continue
		}
		switch sel.Sel.Name {
		case "T", "B", "F", "TB":
			if len(f.Names) == 1 && f.Names[0].Name != "_" {
				return f.Names[0].Name
			}
		}
	}
	return ""
}

// backgroundContexts returns the places in a test file where a function
// that has a test's T (or B, F, TB) in scope makes a context of its own
// (context.Background or TODO) instead of using the test's (t.Context(),
// cancelled when the test ends, so nothing it started outlives it). A
// Cleanup callback is exempt: the test's context is cancelled before it
// runs.
func backgroundContexts(path string, src []byte) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, 0)
	if err != nil {
		return nil, err
	}
	cleanups := map[*ast.FuncLit]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			if sel, ok := c.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Cleanup" {
				for _, a := range c.Args {
					if fl, ok := a.(*ast.FuncLit); ok {
						cleanups[fl] = true
					}
				}
			}
		}
		return true
	})
	var out []string
	// walk visits n with the test variable in scope ("" for none).
	var walk func(n ast.Node, tv string)
	walk = func(n ast.Node, tv string) {
		ast.Inspect(n, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncLit:
				inner := testingParam(n.Type)
				switch {
				case inner != "":
				case cleanups[n]:
					inner = ""
				default:
					inner = tv
				}
				walk(n.Body, inner)
				return false
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok || len(n.Args) != 0 || tv == "" {
					return true
				}
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "context" && (sel.Sel.Name == "Background" || sel.Sel.Name == "TODO") {
					out = append(out, fmt.Sprintf("%s: context.%s() where %s.Context() is in scope", fset.Position(n.Pos()), sel.Sel.Name, tv))
				}
			}
			return true
		})
	}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
			walk(fd.Body, testingParam(fd.Type))
		}
	}
	return out, nil
}

// TestTestsUseTheirContext fails where a test makes a context of its own
// while its T is in scope (issue 41: t.Context() throughout).
func TestTestsUseTheirContext(t *testing.T) {
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "../.." && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || d.Name() == "_output") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		bad, err := backgroundContexts(path, src)
		for _, b := range bad {
			t.Error(b)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestBackgroundContextsFindsThem(t *testing.T) {
	src := `package x
func TestA(t *testing.T) {
	ctx := context.Background()
	t.Cleanup(func() { _ = context.Background() })
	t.Run("s", func(st *testing.T) { _ = context.TODO() })
	go func() { _ = context.Background() }()
}
func helper() { _ = context.Background() }
func Example() { _ = context.Background() }
`
	got, err := backgroundContexts("x_test.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"x_test.go:3:9: context.Background() where t.Context() is in scope",
		"x_test.go:5:39: context.TODO() where st.Context() is in scope",
		"x_test.go:6:18: context.Background() where t.Context() is in scope",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
