// Package productdata gives tests the unedited upstream install manifests
// of other projects kept in shared/testdata/products beside the repository
// (or in the folder named by INSTALLSTRATEGY_PRODUCTS_TESTDATA): one folder
// per product, one VERSION.yaml per release. Tests loop over whatever is
// there, so a product added to the folder is tested without a code change.
package productdata

import (
	"os"
	"path/filepath"
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

// All returns every product of the folder with at least one version, by
// name.
func All(tb testing.TB) []Product {
	tb.Helper()
	root := Dir(tb)
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
	if len(out) == 0 {
		tb.Fatalf("products testdata: no product in %s", root)
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
