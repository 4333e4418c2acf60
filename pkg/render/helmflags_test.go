package render_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/cli"
	"helm.sh/helm/v4/pkg/postrenderer"

	"github.com/installstrategy/installstrategy/pkg/render"
	"github.com/installstrategy/installstrategy/pkg/render/helmchart"
)

// flagsTestdata holds the chart, the post-renderer plugin and the chart
// repository of the tests of Helm's flags.
var flagsTestdata = filepath.Join("testdata", "helmflags")

// isolate keeps Helm's configuration, caches and plugins
// (testdata/helmflags/plugins) in the test, for the CLI and the SDK alike.
func isolate(t *testing.T) {
	t.Helper()
	helmEnv(t)
	plugins, err := filepath.Abs(filepath.Join(flagsTestdata, "plugins"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("HELM_PLUGINS", plugins)
}

// helm runs the Helm CLI in the test's environment and returns its
// standard output, or its error with its standard error.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmCLI(t), args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// byName returns the objects of a text (objects) by kind and name.
func byName(t *testing.T, text string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for k, v := range objects(t, text) {
		f := strings.Fields(k)
		_, name, _ := strings.Cut(f[2], "/")
		out[f[1]+"/"+name] = v
	}
	return out
}

// sameObjects fails unless ours and helm's texts hold the same objects.
func sameObjects(t *testing.T, ours, helms string) {
	t.Helper()
	o, h := byName(t, ours), byName(t, helms)
	for _, k := range slices.Sorted(maps.Keys(h)) {
		if o[k] != h[k] {
			t.Errorf("%s:\nours   %s\nhelm's %s", k, o[k], h[k])
		}
	}
	for k := range o {
		if _, ok := h[k]; !ok {
			t.Errorf("%s: rendered by us, not by helm template", k)
		}
	}
}

// valuesOf returns the values the echo chart printed into its ConfigMap.
func valuesOf(t *testing.T, text, release string) map[string]any {
	t.Helper()
	var cm struct {
		Data map[string]string `json:"data"`
	}
	obj, ok := byName(t, text)["ConfigMap/"+release+"-values"]
	if !ok {
		t.Fatalf("no ConfigMap/%s-values in\n%s", release, text)
	}
	if err := json.Unmarshal([]byte(obj), &cm); err != nil {
		t.Fatal(err)
	}
	var vals map[string]any
	if err := json.Unmarshal([]byte(cm.Data["values.json"]), &vals); err != nil {
		t.Fatal(err)
	}
	return vals
}

func writeTemp(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Every values flag gives the chart what helm template's same flag gives
// it, merged in Helm's order, and the values are the ones each flag means
// (so a flag wired to the wrong field fails even where Helm agrees).
func TestValueFlagsAsHelmTemplate(t *testing.T) {
	isolate(t)
	chart := filepath.Join(flagsTestdata, "echo")
	file := writeTemp(t, "prod.yaml", "image:\n  tag: \"2.0\"\nlabels:\n  from: file\nmotd: from-file\n")
	notes := writeTemp(t, "notes.txt", "line one\nline two\n")
	opts := render.HelmOptions{
		Namespace:     "demo",
		ReleaseName:   "e",
		ValuesFiles:   []string{file},
		Set:           []string{"replicas=2,ports[0]=8080", "image.pullPolicy=Always"},
		StringValues:  []string{"image.tag=3.0", "build=007"},
		JSONValues:    []string{`labels={"x":"y","n":1}`, `{"extra":{"k":[1,2]}}`},
		FileValues:    []string{"notes=" + notes},
		LiteralValues: []string{"motd=a,b=c"},
	}
	got, err := helmchart.Helm(context.Background(), chart, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := runHelm(t, nil, "template", "e", chart, "-n", "demo", "--include-crds",
		"-f", file, "--set", opts.Set[0], "--set", opts.Set[1],
		"--set-string", opts.StringValues[0], "--set-string", opts.StringValues[1],
		"--set-json", opts.JSONValues[0], "--set-json", opts.JSONValues[1],
		"--set-file", opts.FileValues[0], "--set-literal", opts.LiteralValues[0])
	sameObjects(t, string(got.Manifests), want)

	vals := valuesOf(t, string(got.Manifests), "e")
	for k, v := range map[string]any{
		"replicas": float64(2), // --set: a number
		"build":    "007",      // --set-string: a string
		"motd":     "a,b=c",    // --set-literal, after the file: as it is
		"notes":    "line one\nline two\n",
		"extra":    map[string]any{"k": []any{float64(1), float64(2)}},
		"labels":   map[string]any{"x": "y", "n": float64(1)}, // --set-json key=JSON replaces the file's map, as in Helm
		"image":    map[string]any{"tag": "3.0", "pullPolicy": "Always"},
		"ports":    []any{float64(8080)}, // --set replaces a list
	} {
		g, _ := json.Marshal(vals[k])
		w, _ := json.Marshal(v)
		if string(g) != string(w) {
			t.Errorf("values.%s = %s, want %s", k, g, w)
		}
	}

	// Helm's order is by flag, not by position: --set-literal wins over
	// --set, --set over --set-json, whatever the command line's order.
	order := render.HelmOptions{Set: []string{"a=set", "b=set"}, LiteralValues: []string{"a=literal"}, JSONValues: []string{`b="json"`, `c="json"`}}
	merged, err := helmchart.ValuesOptions(order).MergeValues(nil)
	if err != nil {
		t.Fatal(err)
	}
	if merged["a"] != "literal" || merged["b"] != "set" || merged["c"] != "json" {
		t.Errorf("merged %v: want a from --set-literal, b from --set, c from --set-json", merged)
	}
}

// A bad expression of each values flag is refused before anything is
// read, naming the flag.
func TestValueFlagsRefused(t *testing.T) {
	for flag, opts := range map[string]render.HelmOptions{
		"--set-string":  {StringValues: []string{"a"}},
		"--set-literal": {LiteralValues: []string{"novalue"}},
		"--set-json":    {JSONValues: []string{`a={"unclosed"`}},
		"--set-file":    {FileValues: []string{"a"}},
	} {
		_, err := helmchart.Helm(context.Background(), filepath.Join(flagsTestdata, "echo"), opts)
		if err == nil || !strings.Contains(err.Error(), flag+" ") {
			t.Errorf("%s: %v, want an error naming %s", flag, err, flag)
		}
	}
	isolate(t)
	_, err := helmchart.Helm(context.Background(), filepath.Join(flagsTestdata, "echo"), render.HelmOptions{FileValues: []string{"a=" + filepath.Join(t.TempDir(), "missing.txt")}})
	if err == nil || !strings.Contains(err.Error(), "missing.txt") {
		t.Errorf("--set-file of a missing file: %v", err)
	}
}

// --skip-crds leaves the crds/ folder out, as helm template without
// --include-crds (helm install --skip-crds installs none of them);
// --skip-schema-validation renders values the chart's schema refuses, as
// Helm does, and without it both refuse them.
func TestSkipCRDsAndSchemaValidationAsHelm(t *testing.T) {
	isolate(t)
	chart := filepath.Join(flagsTestdata, "echo")
	got, err := helmchart.Helm(context.Background(), chart, render.HelmOptions{Namespace: "demo", SkipCRDs: true})
	if err != nil {
		t.Fatal(err)
	}
	sameObjects(t, string(got.Manifests), runHelm(t, nil, "template", "echo", chart, "-n", "demo", "--skip-crds"))
	if strings.Contains(string(got.Manifests), "CustomResourceDefinition") {
		t.Error("--skip-crds rendered the chart's CRD")
	}
	full, err := helmchart.Helm(context.Background(), chart, render.HelmOptions{Namespace: "demo"})
	if err != nil || !strings.Contains(string(full.Manifests), "kind: CustomResourceDefinition") {
		t.Fatalf("without --skip-crds the CRD is rendered: %v", err)
	}

	bad := []string{"replicas=0"}
	_, ours := helmchart.Helm(context.Background(), chart, render.HelmOptions{Set: bad})
	_, theirs := helm(t, "template", "echo", chart, "--set", bad[0])
	if ours == nil || theirs == nil || !strings.Contains(ours.Error(), "minimum") {
		t.Fatalf("values against the schema: ours %v, helm's %v; want both refused", ours, theirs)
	}
	got, err = helmchart.Helm(context.Background(), chart, render.HelmOptions{Set: bad, SkipSchemaValidation: true, Namespace: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	sameObjects(t, string(got.Manifests), runHelm(t, nil, "template", "echo", chart, "-n", "demo", "--include-crds", "--set", bad[0], "--skip-schema-validation"))
	if vals := valuesOf(t, string(got.Manifests), "echo"); vals["replicas"] != float64(0) {
		t.Errorf("replicas %v, want 0", vals["replicas"])
	}
}

// --post-renderer takes a Helm 4 postrenderer/v1 plugin by name, runs it
// on the objects and hooks before they are sorted, and the objects it
// changes or adds are helm template's.
func TestPostRendererAsHelm(t *testing.T) {
	isolate(t)
	chart := filepath.Join(flagsTestdata, "echo")
	pr, err := postrenderer.NewPostRendererPlugin(cli.New(), "relabel", "relabeled")
	if err != nil {
		t.Fatal(err)
	}
	got, err := helmchart.Helm(context.Background(), chart, render.HelmOptions{Namespace: "demo", PostRenderer: pr})
	if err != nil {
		t.Fatal(err)
	}
	want := runHelm(t, nil, "template", "echo", chart, "-n", "demo", "--include-crds", "--post-renderer", "relabel", "--post-renderer-args", "relabeled")
	sameObjects(t, string(got.Manifests), want)
	objs := byName(t, string(got.Manifests))
	for _, k := range []string{"ConfigMap/echo-values", "ConfigMap/echo-hook"} {
		if !strings.Contains(objs[k], `"stage":"relabeled"`) || strings.Contains(objs[k], "postrender-filename") {
			t.Errorf("%s not post-rendered as asked: %s", k, objs[k])
		}
	}
	if _, ok := objs["ConfigMap/added-by-post-renderer"]; !ok {
		t.Error("the object the post-renderer added is missing")
	}
	if len(got.Hooks) != 1 || got.Hooks[0].Name != "echo-hook" || got.Hooks[0].Action != render.HookKept {
		t.Errorf("hooks %v: the post-rendered pre-install hook is still a hook", got.Hooks)
	}

	_, err = postrenderer.NewPostRendererPlugin(cli.New(), "no-such-plugin")
	if err == nil {
		t.Error("a missing post-renderer plugin was found")
	}
}
