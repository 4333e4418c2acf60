package kustomize_test

import (
	"flag"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/installstrategy/installstrategy/pkg/render/kustomize"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// An overlay (a base, a strategic-merge patch, namePrefix, namespace, a
// generated ConfigMap) builds as `kubectl kustomize` prints it: the golden
// file is that output (checked against kubectl kustomize when it was
// written), and the objects are the expected ones.
func TestKustomizeOverlay(t *testing.T) {
	got, err := kustomize.Build("testdata/kustomize/overlay")
	if err != nil {
		t.Fatal(err)
	}
	const golden = "testdata/kustomize/overlay.golden"
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("kustomize output differs from %s:\n%s", golden, got)
	}
	docs, err := strategy.ReadDocuments(got, strategy.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, d := range docs {
		o := d.Object
		refs = append(refs, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
		switch o.GetKind() {
		case "Deployment":
			replicas, _, _ := unstructuredInt(o.Object, "spec", "replicas")
			sel := o.Object["spec"].(map[string]any)["selector"].(map[string]any)["matchLabels"].(map[string]any)
			if replicas != 3 || sel["app.kubernetes.io/name"] != "web" {
				t.Errorf("deployment: replicas %d (patch: 3), selector %v (labels with includeSelectors)", replicas, sel)
			}
			if !strings.Contains(string(got), "name: prod-web-settings-") {
				t.Errorf("the patch's configMapRef is not renamed to the generated ConfigMap")
			}
		}
	}
	sort.Strings(refs)
	wantRefs := []string{"ConfigMap shop/prod-web-settings-" + configMapHash(t, docs), "Deployment shop/prod-web", "Namespace /shop", "Service shop/prod-web"}
	if strings.Join(refs, "\n") != strings.Join(wantRefs, "\n") {
		t.Errorf("objects:\n%s\nwant:\n%s", strings.Join(refs, "\n"), strings.Join(wantRefs, "\n"))
	}
}

func configMapHash(t *testing.T, docs []strategy.Document) string {
	t.Helper()
	for _, d := range docs {
		if n := d.Object.GetName(); d.Object.GetKind() == "ConfigMap" && strings.HasPrefix(n, "prod-web-settings-") && len(n) == len("prod-web-settings-")+10 {
			return strings.TrimPrefix(n, "prod-web-settings-")
		}
	}
	t.Fatal("no generated ConfigMap prod-web-settings-<hash>")
	return ""
}

func unstructuredInt(obj map[string]any, path ...string) (int64, bool, error) {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return 0, false, nil
		}
		cur = m[p]
	}
	n, ok := cur.(int64)
	return n, ok, nil
}

// A kustomization that does not build fails naming its folder.
func TestKustomizeErrors(t *testing.T) {
	for _, dir := range []string{"testdata/nothing-here", "testdata/hooks"} {
		_, err := kustomize.Build(dir)
		if err == nil || !strings.Contains(err.Error(), "kustomize build "+dir) {
			t.Errorf("%s: %v", dir, err)
		}
	}
}
