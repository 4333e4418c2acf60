package architecture_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// pluginReads are the calls that read, decode, parse or judge a strategy
// by hand: import path → functions. The plugin (internal/cli) reads every
// strategy through pkg/source, which bounds its size and decides its
// trust before it is parsed; a verb that called these itself would
// bypass that order.
var pluginReads = map[string][]string{
	"github.com/installstrategy/installstrategy/pkg/codec":    {"Decode", "LoadConfigMap", "LoadInput", "ParseInput", "ReadFile", "ReadConfigMaps", "Gunzip"},
	"github.com/installstrategy/installstrategy/pkg/strategy": {"Parse", "ReadDocuments"},
	"github.com/installstrategy/installstrategy/pkg/history":  {"OpenRevision"},
	"github.com/installstrategy/installstrategy/pkg/oci":      {"Verify", "Check", "CheckClaims"},
	"github.com/installstrategy/installstrategy/pkg/trust":    {"Gate"},
}

// storeReads are the methods of the plugin's store (a field or variable
// named store) that read and parse a strategy: source.ConfigMap and
// source.Unverified read through store.ReadConfigMap instead.
var storeReads = []string{"Read", "Load"}

// pluginReadAllowed are the functions of internal/cli (file: function)
// that may make such a call, each with why it is not a bypass.
var pluginReadAllowed = map[string]string{
	"input.go: loadStrategy":          "the picking half of source.File: the user's own file, bounded by File.Input before it is parsed",
	"encode.go: parseManifests":       "encode's input: the user's own files, read through source.File's bound",
	"encode.go: notAStrategy":         "encode's input: the user's own files, read through source.File's bound",
	"encode.go: readFolder":           "encode's input: the user's own files, read through source.File's bound",
	"helmadopt.go: load":              "a Helm release's manifest, decoded within pkg/helmrelease's bound; only what the live objects prove is the release's is adopted (Release.Verify)",
	"helmadopt.go: objects":           "a Helm release's manifest, decoded within pkg/helmrelease's bound; only what the live objects prove is the release's is adopted (Release.Verify)",
	"helmwalk.go: load":               "a chart the user named (a walk's hops: --allow-unsigned), downloaded within render's bounds, its archive's digest checked against the index, rendered locally",
	"sign.go: signFile":               "the user's own file, bounded by source.File, checked before the user's key signs it",
	"verify.go: verifyInput":          "verify reports each step of reading the user's own file (bounded by source.File); it acts on nothing",
	"oci.go: artifactSignatureChecks": "verify's report of an artifact's signatures (it acts on nothing; source.OCI decides the same for the verbs that act)",
	"clustertrust.go: load":           "builds source.ConfigMap's gate from --key",
}

// pluginReadCalls returns "file: function: pkg.Name" for every such call
// in the Go source src (named file, base name) outside the allowlist.
func pluginReadCalls(t *testing.T, fset *token.FileSet, file string, src any) []string {
	t.Helper()
	f, err := parser.ParseFile(fset, file, src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse %s: %v", file, err)
	}
	forbidden := map[string]map[string]bool{} // local import name → names
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		names, ok := pluginReads[path]
		if !ok {
			continue
		}
		local := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			local = imp.Name.Name
		}
		forbidden[local] = map[string]bool{}
		for _, n := range names {
			forbidden[local][n] = true
		}
	}
	base := filepath.Base(file)
	var out []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		if _, ok := pluginReadAllowed[base+": "+fn.Name.Name]; ok {
			continue
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			switch x := sel.X.(type) {
			case *ast.Ident:
				if forbidden[x.Name][sel.Sel.Name] {
					out = append(out, base+": "+fn.Name.Name+": "+x.Name+"."+sel.Sel.Name)
				}
				if x.Name == "store" && contains(storeReads, sel.Sel.Name) {
					out = append(out, base+": "+fn.Name.Name+": store."+sel.Sel.Name)
				}
			case *ast.SelectorExpr:
				if x.Sel.Name == "store" && contains(storeReads, sel.Sel.Name) {
					out = append(out, base+": "+fn.Name.Name+": store."+sel.Sel.Name)
				}
			}
			return true
		})
	}
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestPluginReadsThroughSource fails when a verb of the plugin reads,
// decodes, parses or judges a strategy by hand instead of through
// pkg/source (a cm/NAME read with store.Read, a codec.Decode, a
// strategy.Parse ...), outside the allowlist: such a read could parse
// what was never bounded or judged. A verb that shows a strategy nobody
// verified loads it with source.Unverified, which says so.
func TestPluginReadsThroughSource(t *testing.T) {
	dir := "../../internal/cli"
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var found []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		found = append(found, pluginReadCalls(t, fset, filepath.Join(dir, e.Name()), nil)...)
	}
	sort.Strings(found)
	for _, f := range found {
		t.Errorf("%s: internal/cli reads a strategy by hand; load it through pkg/source (source.Unverified for a display verb), or add the function to pluginReadAllowed with why it is no bypass", f)
	}
	// Every allowlisted function still exists: a stale entry would
	// allow whatever is written under its name next.
	for k := range pluginReadAllowed {
		file, fn, _ := strings.Cut(k, ": ")
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil || !strings.Contains(string(data), ") "+fn+"(") && !strings.Contains(string(data), "func "+fn+"(") {
			t.Errorf("pluginReadAllowed: %s: no such function; remove the entry", k)
		}
	}
}

// TestPluginReadsThroughSourceCatchesBypasses checks the rule on sources
// that bypass pkg/source, aliased or not, and on one that does not.
func TestPluginReadsThroughSourceCatchesBypasses(t *testing.T) {
	src := `package cli
import (
	cdc "github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/strategy"
	"github.com/installstrategy/installstrategy/pkg/source"
)
func (c *cluster) inspect(ctx context.Context) {
	c.store.Read(ctx, e)
	cdc.Decode(cm, opts)
	strategy.Parse(text, strategy.ParseOptions{})
}
func (c *cluster) fine(ctx context.Context) {
	source.Unverified{Reader: c.store}.Load(ctx)
	cdc.Digest(text)
	c.store.List(ctx, ns)
}
`
	got := pluginReadCalls(t, token.NewFileSet(), "status.go", src)
	want := []string{"status.go: inspect: store.Read", "status.go: inspect: cdc.Decode", "status.go: inspect: strategy.Parse"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("found %q, want %q", got, want)
	}
}
