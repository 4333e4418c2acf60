// Package productdata gives tests the unedited upstream install manifests
// of other projects kept in shared/testdata/products beside the repository
// (or in the folder named by INSTALLSTRATEGY_PRODUCTS_TESTDATA), and those
// the repository keeps itself in internal/productdata/testdata (each with
// its source in the README there): one folder per product, one
// VERSION.yaml per release. Tests loop over whatever is there, so a product
// added to either folder is tested without a code change.
package productdata

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/installstrategy/installstrategy/internal/shareddata"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// Product is one project's manifests.
type Product struct {
	Name string
	// Versions are the releases, oldest first (semantic version order).
	Versions []string
	dir      string
}

// Path returns the manifest file of a version.
func (p Product) Path(v string) string { return filepath.Join(p.dir, v+".yaml") }

// Dir returns the folder holding the products. It fails the test when the
// folder cannot be found: these files are part of the project's inputs.
func Dir(tb testing.TB) string {
	tb.Helper()
	return shareddata.Dir(tb, "products", "INSTALLSTRATEGY_PRODUCTS_TESTDATA")
}

// All returns every product with at least one version, by name: the
// shared folder's (Dir) and the repository's own (RepoDir). A product of
// the shared folder hides the repository's of the same name.
func All(tb testing.TB) []Product {
	tb.Helper()
	out := products(tb, Dir(tb))
	for _, p := range products(tb, RepoDir(tb)) {
		if !slices.ContainsFunc(out, func(q Product) bool { return q.Name == p.Name }) {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if len(out) == 0 {
		tb.Fatalf("products testdata: no product in %s or %s", Dir(tb), RepoDir(tb))
	}
	return out
}

// RepoDir returns the folder of the products the repository keeps itself,
// internal/productdata/testdata of the module (found by walking up from
// the working directory to go.mod).
func RepoDir(tb testing.TB) string {
	tb.Helper()
	wd, err := os.Getwd()
	if err != nil {
		tb.Fatalf("products testdata: %v", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "internal", "productdata", "testdata")
		}
		if filepath.Dir(dir) == dir {
			tb.Fatalf("products testdata: no go.mod above %s", wd)
		}
	}
}

// products returns the products of one folder.
func products(tb testing.TB, root string) []Product {
	tb.Helper()
	entries, err := os.ReadDir(root)
	if err != nil {
		tb.Fatalf("products testdata: %v", err)
	}
	var out []Product
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		files, err := filepath.Glob(filepath.Join(root, e.Name(), "*.yaml"))
		if err != nil {
			tb.Fatal(err)
		}
		p := Product{Name: e.Name(), dir: filepath.Join(root, e.Name())}
		for _, f := range files {
			p.Versions = append(p.Versions, strings.TrimSuffix(filepath.Base(f), ".yaml"))
		}
		sort.Slice(p.Versions, func(i, j int) bool { return less(p.Versions[i], p.Versions[j]) })
		if len(p.Versions) > 0 {
			out = append(out, p)
		}
	}
	return out
}

func less(a, b string) bool {
	va, errA := version.ParseGeneric(a)
	vb, errB := version.ParseGeneric(b)
	if errA != nil || errB != nil {
		return a < b
	}
	return va.LessThan(vb)
}

// GuardsNamespaces reports a product whose admission webhooks refuse
// namespace writes when their backend does not answer (failurePolicy Fail,
// the default, on namespaces): under kwok no backend answers, so while it
// is installed no namespace can be created or changed in the cluster.
func (p Product) GuardsNamespaces(tb testing.TB) bool {
	tb.Helper()
	text, err := os.ReadFile(p.Path(p.Versions[0]))
	if err != nil {
		tb.Fatal(err)
	}
	s, _, err := strategy.Parse(text, strategy.ParseOptions{})
	if err != nil {
		tb.Fatalf("%s: %v", p.Name, err)
	}
	for _, o := range s.Objects {
		if !strings.HasSuffix(o.GetKind(), "WebhookConfiguration") {
			continue
		}
		hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
		for _, h := range hooks {
			hm, _ := h.(map[string]any)
			if fp, _ := hm["failurePolicy"].(string); fp == "Ignore" {
				continue
			}
			rules, _ := hm["rules"].([]any)
			for _, r := range rules {
				rm, _ := r.(map[string]any)
				res, _, _ := unstructured.NestedStringSlice(rm, "resources")
				for _, x := range res {
					if x == "namespaces" || x == "*" {
						return true
					}
				}
			}
		}
	}
	return false
}
