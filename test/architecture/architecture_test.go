// Package architecture_test holds the layout to the rules of
// docs/ARCHITECTURE.md: TestImportRules reads its table of forbidden
// dependencies and fails on any package that has one (or on a rule whose
// pattern names no package), and TestHackHoldsCommandsOnly keeps hack/ to
// commands, so that no library grows there again; TestSizeLimits keeps
// functions to 80 lines and files to 600 (size_test.go).
package architecture_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const (
	module   = "github.com/installstrategy/installstrategy"
	archDoc  = "../../docs/ARCHITECTURE.md"
	rulesTop = "## Import rules"
)

// rule forbids every package matching from to depend, directly or through
// other packages, on a package matching any of to.
type rule struct {
	line int // in the document
	from string
	to   []string
}

// parseRules reads the first table after the rulesTop heading: each row
// is | `from` | `to`, `to`… | why |. Module-relative patterns (pkg/...) and
// import paths of other modules (k8s.io/client-go/...) are both allowed; a
// pattern ending in /... matches the package and everything below it.
func parseRules(r io.Reader) ([]rule, error) {
	var rules []rule
	in, header := false, 0
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		switch {
		case l == rulesTop:
			in = true
			continue
		case !in:
			continue
		case strings.HasPrefix(l, "## "):
			in = false
			continue
		case !strings.HasPrefix(l, "|"):
			if header > 0 && len(rules) > 0 {
				return rules, nil
			}
			continue
		}
		header++
		if header <= 2 { // column names and the |---| line
			continue
		}
		cells := strings.Split(strings.Trim(l, "|"), "|")
		if len(cells) < 2 {
			return nil, fmt.Errorf("%s:%d: a rule needs two cells, package and what it must not depend on: %q", archDoc, n, l)
		}
		from := patterns(cells[0])
		to := patterns(cells[1])
		if len(from) != 1 || len(to) == 0 {
			return nil, fmt.Errorf("%s:%d: a rule names one package pattern and at least one forbidden pattern, each in backquotes: %q", archDoc, n, l)
		}
		rules = append(rules, rule{line: n, from: from[0], to: to})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(rules) == 0 {
		return nil, fmt.Errorf("%s: no rule table under %q", archDoc, rulesTop)
	}
	return rules, nil
}

// patterns returns the backquoted words of a table cell.
func patterns(cell string) []string {
	var out []string
	parts := strings.Split(cell, "`")
	for i := 1; i < len(parts); i += 2 {
		if p := strings.TrimSpace(parts[i]); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// importPath turns a module-relative pattern (its first element a folder
// at the module's root) into an import path pattern; any other pattern is
// an import path of another module or of the standard library already.
func importPath(p string) string {
	first, _, _ := strings.Cut(p, "/")
	if fi, err := os.Stat(filepath.Join("../..", first)); err == nil && fi.IsDir() && !strings.Contains(first, ".") {
		return module + "/" + p
	}
	return p
}

func matches(pattern, pkg string) bool {
	pattern = importPath(pattern)
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	}
	return pkg == pattern
}

// graph maps each package to its imports (non-test code).
type graph map[string][]string

// path returns a chain of imports from pkg to a package matching one of
// to, or nil.
func (g graph) path(pkg string, to []string) []string {
	prev := map[string]string{pkg: ""}
	queue := []string{pkg}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, imp := range g[p] {
			if _, seen := prev[imp]; seen {
				continue
			}
			prev[imp] = p
			if slices.ContainsFunc(to, func(t string) bool { return matches(t, imp) }) {
				chain := []string{imp}
				for q := p; q != ""; q = prev[q] {
					chain = append(chain, q)
				}
				slices.Reverse(chain)
				return chain
			}
			queue = append(queue, imp)
		}
	}
	return nil
}

// check returns one line for each broken rule and each pattern that names
// no package of the graph (a rule that guards nothing, e.g. after a move).
func check(rules []rule, g graph, own []string) []string {
	var problems []string
	all := make([]string, 0, len(g))
	for p := range g {
		all = append(all, p)
	}
	slices.Sort(all)
	named := func(pattern string, among []string) bool {
		return slices.ContainsFunc(among, func(p string) bool { return matches(pattern, p) })
	}
	for _, r := range rules {
		if !named(r.from, own) {
			problems = append(problems, fmt.Sprintf("%s:%d: `%s` names no package of the module", archDoc, r.line, r.from))
		}
		for _, t := range r.to {
			if !named(t, all) {
				problems = append(problems, fmt.Sprintf("%s:%d: `%s` names no package the module builds with", archDoc, r.line, t))
			}
		}
		for _, p := range own {
			if !matches(r.from, p) {
				continue
			}
			// A chain through another package of the rule is that
			// package's violation, reported on its own.
			if chain := g.path(p, r.to); chain != nil && !slices.ContainsFunc(chain[1:len(chain)-1], func(q string) bool { return matches(r.from, q) }) {
				problems = append(problems, fmt.Sprintf("%s:%d: %s must not depend on %s, but: %s",
					archDoc, r.line, p, strings.Join(r.to, ", "), strings.Join(chain, " → ")))
			}
		}
	}
	return problems
}

type listed struct {
	ImportPath string
	Name       string
	Imports    []string
	Module     *struct{ Path string }
}

// goList runs go list -json on the module's packages (with -deps: and
// everything they build with).
func goList(t *testing.T, args ...string) []listed {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json=ImportPath,Name,Imports,Module"}, args...)...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list %v: %v\n%s", args, err, ee.Stderr)
		}
		t.Fatalf("go list %v: %v", args, err)
	}
	var pkgs []listed
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// TestImportRules fails when a package of the module depends on what the
// import rules of docs/ARCHITECTURE.md forbid it, or when a rule's pattern
// names no package.
func TestImportRules(t *testing.T) {
	f, err := os.Open(archDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rules, err := parseRules(f)
	if err != nil {
		t.Fatal(err)
	}
	g := graph{}
	var own []string
	for _, p := range goList(t, "-deps", "./...") {
		g[p.ImportPath] = p.Imports
		if p.Module != nil && p.Module.Path == module {
			own = append(own, p.ImportPath)
		}
	}
	if len(own) < 40 {
		t.Fatalf("go list found %d packages of the module: %v", len(own), own)
	}
	for _, p := range check(rules, g, own) {
		t.Error(p)
	}
	t.Logf("%d rules over %d packages of the module", len(rules), len(own))
}

// TestImportRulesCatchViolations holds the checker itself to a small
// graph: a forbidden import (reported once, on the package that makes it,
// not again on those that reach it through that package), a pattern naming
// nothing, a forbidden import of another module, and a document without
// the table.
func TestImportRulesCatchViolations(t *testing.T) {
	doc := "intro\n\n" + rulesTop + "\n\ntext\n\n" +
		"| package | must not depend on | why |\n|---|---|---|\n" +
		"| `pkg/...` | `internal/...`, `hack/...` | library |\n" +
		"| `pkg/kinds` | `k8s.io/client-go/...` | pure |\n" +
		"| `gone/...` | `pkg/...` | moved away |\n" +
		"\nafter the table\n\n| not | a rule |\n"
	rules, err := parseRules(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 3 || rules[0].from != "pkg/..." || !slices.Equal(rules[0].to, []string{"internal/...", "hack/..."}) || rules[0].line != 9 {
		t.Fatalf("parsed %+v", rules)
	}
	m := func(s string) string { return module + "/" + s }
	g := graph{
		m("pkg/a"):                        {m("pkg/b")},
		m("pkg/b"):                        {m("internal/x")},
		m("pkg/kinds"):                    {"k8s.io/apimachinery/pkg/runtime"},
		m("internal/x"):                   {"k8s.io/client-go/rest"},
		"k8s.io/client-go/rest":           nil,
		"k8s.io/apimachinery/pkg/runtime": nil,
	}
	own := []string{m("pkg/a"), m("pkg/b"), m("pkg/kinds"), m("internal/x")}
	got := strings.Join(check(rules, g, own), "\n")
	for _, want := range []string{
		m("pkg/b") + " must not depend on internal/..., hack/..., but: " + m("pkg/b") + " → " + m("internal/x"),
		"`hack/...` names no package",
		"`gone/...` names no package of the module",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, m("pkg/a")+" must not") {
		t.Errorf("pkg/b's violation reported again on pkg/a, which reaches it through pkg/b:\n%s", got)
	}
	if strings.Contains(got, "pkg/kinds must not") {
		t.Errorf("pkg/kinds keeps its rule, yet:\n%s", got)
	}
	g[m("pkg/kinds")] = append(g[m("pkg/kinds")], "k8s.io/client-go/rest")
	if got := strings.Join(check(rules, g, own), "\n"); !strings.Contains(got, m("pkg/kinds")+" must not depend on k8s.io/client-go/...") {
		t.Errorf("an import of client-go by pkg/kinds not reported:\n%s", got)
	}
	if _, err := parseRules(strings.NewReader("# no rules here\n")); err == nil {
		t.Error("a document without the rule table parsed")
	}
}

// TestHackHoldsCommandsOnly: every Go file under hack/, in the root
// module or in hack/'s own modules (hack/benchhelm, hack/tools/...), is
// part of a command (package main, or main_test for its tests), so nothing
// can import it; libraries live in internal/ (test helpers in
// internal/testenv, the local cluster in internal/localcluster).
func TestHackHoldsCommandsOnly(t *testing.T) {
	const hack = "../../hack"
	files := 0
	err := filepath.WalkDir(hack, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		files++
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly)
		if err != nil {
			return err
		}
		if name := f.Name.Name; name != "main" && name != "main_test" {
			rel, _ := filepath.Rel("../..", path)
			t.Errorf("%s is package %s: hack/ holds commands (package main) and scripts only; move the library to internal/", rel, name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 10 {
		t.Fatalf("found %d Go files under hack/", files)
	}
}
