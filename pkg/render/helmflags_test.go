package render_test

import (
	"cmp"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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
	got, err := helmchart.Helm(t.Context(), chart, opts)
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
		_, err := helmchart.Helm(t.Context(), filepath.Join(flagsTestdata, "echo"), opts)
		if err == nil || !strings.Contains(err.Error(), flag+" ") {
			t.Errorf("%s: %v, want an error naming %s", flag, err, flag)
		}
	}
	isolate(t)
	_, err := helmchart.Helm(t.Context(), filepath.Join(flagsTestdata, "echo"), render.HelmOptions{FileValues: []string{"a=" + filepath.Join(t.TempDir(), "missing.txt")}})
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
	got, err := helmchart.Helm(t.Context(), chart, render.HelmOptions{Namespace: "demo", SkipCRDs: true})
	if err != nil {
		t.Fatal(err)
	}
	sameObjects(t, string(got.Manifests), runHelm(t, nil, "template", "echo", chart, "-n", "demo", "--skip-crds"))
	if strings.Contains(string(got.Manifests), "CustomResourceDefinition") {
		t.Error("--skip-crds rendered the chart's CRD")
	}
	full, err := helmchart.Helm(t.Context(), chart, render.HelmOptions{Namespace: "demo"})
	if err != nil || !strings.Contains(string(full.Manifests), "kind: CustomResourceDefinition") {
		t.Fatalf("without --skip-crds the CRD is rendered: %v", err)
	}

	bad := []string{"replicas=0"}
	_, ours := helmchart.Helm(t.Context(), chart, render.HelmOptions{Set: bad})
	_, theirs := helm(t, "template", "echo", chart, "--set", bad[0])
	if ours == nil || theirs == nil || !strings.Contains(ours.Error(), "minimum") {
		t.Fatalf("values against the schema: ours %v, helm's %v; want both refused", ours, theirs)
	}
	got, err = helmchart.Helm(t.Context(), chart, render.HelmOptions{Set: bad, SkipSchemaValidation: true, Namespace: "demo"})
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
	got, err := helmchart.Helm(t.Context(), chart, render.HelmOptions{Namespace: "demo", PostRenderer: pr})
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

// repoServer serves testdata/helmflags/repo (an index.yaml and two
// versions of the echo chart) on loopback HTTP, or HTTPS with basic auth
// when user is set; it counts the requests by path.
func repoServer(t *testing.T, user string) (*httptest.Server, map[string]int) {
	t.Helper()
	files := http.FileServer(http.Dir(filepath.Join(flagsTestdata, "repo")))
	var mu sync.Mutex
	hits := map[string]int{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		if user != "" {
			if u, p, ok := r.BasicAuth(); !ok || u != user || p != "secret" {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		files.ServeHTTP(w, r)
	})
	var srv *httptest.Server
	if user != "" {
		srv = httptest.NewTLSServer(h)
	} else {
		srv = httptest.NewServer(h)
	}
	t.Cleanup(srv.Close)
	return srv, hits
}

// Charts of a repository are found as helm finds them, and render as helm
// template renders them: a name with --repo URL (the newest version, or
// the one --version picks), an http(s) URL of an archive, and REPO/CHART
// of a repository helm repo add wrote to the user's config (its
// credentials and CA go with the download). Errors name the URL.
func TestRepositoryChartsAsHelm(t *testing.T) {
	isolate(t)
	ctx := t.Context()
	srv, hits := repoServer(t, "")
	for _, tc := range []struct {
		name, ref, wantVersion string
		opts                   render.HelmOptions
		helmArgs               []string
	}{
		{name: "--repo, newest", ref: "echo", opts: render.HelmOptions{RepoURL: srv.URL}, wantVersion: "1.1.0", helmArgs: []string{"--repo", srv.URL}},
		{name: "--repo --version range", ref: "echo", opts: render.HelmOptions{RepoURL: srv.URL + "/", ChartVersion: "<1.1"}, wantVersion: "1.0.0", helmArgs: []string{"--repo", srv.URL + "/", "--version", "<1.1"}},
		{name: "URL", ref: srv.URL + "/echo-1.0.0.tgz", wantVersion: "1.0.0"},
		{name: "URL of the version asked", ref: srv.URL + "/echo-1.1.0.tgz", opts: render.HelmOptions{ChartVersion: "1.1.0"}, wantVersion: "1.1.0", helmArgs: []string{"--version", "1.1.0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Namespace = "demo"
			got, err := helmchart.Helm(ctx, tc.ref, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got.Chart.Version != tc.wantVersion {
				t.Errorf("chart version %s, want %s", got.Chart.Version, tc.wantVersion)
			}
			want := runHelm(t, nil, append([]string{"template", "echo", tc.ref, "-n", "demo", "--include-crds"}, tc.helmArgs...)...)
			sameObjects(t, string(got.Manifests), want)
		})
	}
	if hits["/index.yaml"] == 0 || hits["/echo-1.0.0.tgz"] == 0 {
		t.Errorf("requests %v: the index and the archive were not read from the repository", hits)
	}

	t.Run("REPO/CHART", func(t *testing.T) {
		private, hits := repoServer(t, "me")
		ca := writeTemp(t, "ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: private.Certificate().Raw})))
		runHelm(t, nil, "repo", "add", "private", private.URL, "--ca-file", ca, "--username", "me", "--password", "secret")
		for _, version := range []string{"", "1.0.0"} {
			got, err := helmchart.Helm(ctx, "private/echo", render.HelmOptions{Namespace: "demo", ChartVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			args := []string{"template", "echo", "private/echo", "-n", "demo", "--include-crds"}
			if version != "" {
				args = append(args, "--version", version)
			}
			sameObjects(t, string(got.Manifests), runHelm(t, nil, args...))
			if want := cmp.Or(version, "1.1.0"); got.Chart.Version != want {
				t.Errorf("--version %q: chart version %s, want %s", version, got.Chart.Version, want)
			}
		}
		// The server refuses a request without the credentials, so each
		// archive we rendered came with them (Helm's CLI may take it from
		// its content cache instead, filled by the subtests above).
		if hits["/echo-1.0.0.tgz"] == 0 || hits["/echo-1.1.0.tgz"] == 0 {
			t.Errorf("requests %v: we did not download the archives from the repository", hits)
		}
		_, err := helmchart.Helm(ctx, "nosuch/echo", render.HelmOptions{})
		if err == nil || !strings.Contains(err.Error(), `no repository "nosuch"`) {
			t.Errorf("an unknown repository: %v", err)
		}
	})

	for _, tc := range []struct {
		name, ref string
		opts      render.HelmOptions
		want      []string
	}{
		{name: "missing archive", ref: srv.URL + "/echo-9.9.9.tgz", want: []string{"download " + srv.URL + "/echo-9.9.9.tgz", "404"}},
		{name: "not a repository", ref: "echo", opts: render.HelmOptions{RepoURL: srv.URL + "/nothing"}, want: []string{"--repo " + srv.URL + "/nothing", "download " + srv.URL + "/nothing/index.yaml", "404"}},
		{name: "no such version", ref: "echo", opts: render.HelmOptions{RepoURL: srv.URL, ChartVersion: "2.0.0"}, want: []string{`chart "echo" version "2.0.0" not found in repository ` + srv.URL}},
		{name: "URL of another version", ref: srv.URL + "/echo-1.0.0.tgz", opts: render.HelmOptions{ChartVersion: "1.1.0"}, want: []string{"is version 1.0.0, --version asks for 1.1.0", "--strategy-version"}},
		{name: "folder of another version", ref: filepath.Join(flagsTestdata, "echo"), opts: render.HelmOptions{ChartVersion: "v9.0.0"}, want: []string{"is version 1.1.0, --version asks for v9.0.0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := helmchart.Helm(ctx, tc.ref, tc.opts)
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v, want it to say %q", err, w)
				}
			}
		})
	}
}

// --dependency-update downloads the dependencies a chart folder lacks
// (helm dependency update) before rendering, as helm install
// --dependency-update; without it the render refuses, naming them, as
// helm does; a chart that lacks nothing is rendered as it is.
func TestDependencyUpdateAsHelm(t *testing.T) {
	isolate(t)
	srv, _ := repoServer(t, "")
	parent := func() string {
		dir := t.TempDir()
		for name, text := range map[string]string{
			"Chart.yaml":          "apiVersion: v2\nname: parent\nversion: 0.1.0\ndependencies:\n- name: echo\n  version: 1.0.0\n  repository: " + srv.URL + "\n",
			"templates/mine.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-mine\n",
		} {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	ctx := t.Context()
	ours := parent()
	if _, err := helmchart.Helm(ctx, ours, render.HelmOptions{}); err == nil || !strings.Contains(err.Error(), "missing in charts/ directory: echo") {
		t.Fatalf("without --dependency-update: %v", err)
	}
	got, err := helmchart.Helm(ctx, ours, render.HelmOptions{Namespace: "demo", DependencyUpdate: true})
	if err != nil {
		t.Fatal(err)
	}
	want := runHelm(t, nil, "template", "parent", parent(), "-n", "demo", "--include-crds", "--dependency-update")
	want = want[strings.Index(want, "---"):] // helm prints its downloads first
	sameObjects(t, string(got.Manifests), want)
	if objs := byName(t, string(got.Manifests)); objs["ConfigMap/parent-values"] == "" || objs["ConfigMap/parent-mine"] == "" {
		t.Errorf("the dependency's and the chart's objects: %v", slices.Collect(maps.Keys(objs)))
	}
	if _, err := os.Stat(filepath.Join(ours, "charts", "echo-1.0.0.tgz")); err != nil {
		t.Errorf("the dependency is not in charts/: %v", err)
	}
	_, err = helmchart.Helm(ctx, srv.URL+"/echo-1.0.0.tgz", render.HelmOptions{DependencyUpdate: true})
	if err != nil {
		t.Errorf("an archive that lacks nothing, with --dependency-update: %v", err)
	}
}
