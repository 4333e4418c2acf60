package render_test

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/installstrategy/installstrategy/pkg/render"
	"github.com/installstrategy/installstrategy/pkg/render/helmchart"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

const charts = "testdata/charts"

var (
	helmOnce sync.Once
	helmBin  string
	helmErr  error
)

// helmCLI returns the Helm v4 CLI pinned in hack/tools/helm (the same
// helm.sh/helm/v4 version as go.mod), built once into the Go build cache
// by `go tool`.
func helmCLI(t *testing.T) string {
	t.Helper()
	helmOnce.Do(func() {
		cmd := exec.Command("go", "tool", "-n", "helm")
		cmd.Dir = filepath.Join("..", "..", "hack", "tools", "helm")
		out, err := cmd.Output()
		helmBin, helmErr = strings.TrimSpace(string(out)), err
	})
	if helmErr != nil {
		t.Fatalf("build helm (hack/tools/helm): %v", helmErr)
	}
	return helmBin
}

// helmEnv keeps Helm's configuration, caches and registry credentials,
// for the CLI and the SDK alike, in a folder of the test.
func helmEnv(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	var env []string
	for _, v := range []string{"HELM_CONFIG_HOME", "HELM_CACHE_HOME", "HELM_DATA_HOME"} {
		t.Setenv(v, filepath.Join(dir, v))
		env = append(env, v+"="+filepath.Join(dir, v))
	}
	t.Setenv("HELM_REGISTRY_CONFIG", filepath.Join(dir, "registry.json"))
	return append(env, "HELM_REGISTRY_CONFIG="+filepath.Join(dir, "registry.json"))
}

func runHelm(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(helmCLI(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// objects returns each object of a text by kind, namespace and name, as
// JSON.
func objects(t *testing.T, text string) map[string]string {
	t.Helper()
	docs, err := strategy.ReadDocuments([]byte(text), strategy.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range docs {
		key := d.Object.GetAPIVersion() + " " + d.Object.GetKind() + " " + d.Object.GetNamespace() + "/" + d.Object.GetName()
		if _, dup := out[key]; dup {
			t.Fatalf("%s twice", key)
		}
		j, err := json.Marshal(d.Object.Object)
		if err != nil {
			t.Fatal(err)
		}
		out[key] = string(j)
	}
	return out
}

func kinds(objs map[string]string) map[string]int {
	out := map[string]int{}
	for k := range objs {
		out[strings.Fields(k)[1]]++
	}
	return out
}

// Helm renders what `helm template --include-crds` of the Helm v4 CLI
// renders for the same chart and inputs: the same text byte for byte
// when every hook is kept, and the same objects less the dropped hooks.
func TestHelmRendersAsHelmTemplate(t *testing.T) {
	env := helmEnv(t)
	ctx := t.Context()
	for _, tc := range []struct {
		name, chart string
		opts        render.HelmOptions
		// want counts some kinds, so that a rendering that lost them
		// (CRDs not included, hooks dropped) fails even if the CLI
		// agreed.
		want map[string]int
	}{
		{name: "metallb v0.14.9 folder", chart: "metallb-v0.14.9", opts: render.HelmOptions{Namespace: "metallb-system"}, want: map[string]int{"CustomResourceDefinition": 7, "DaemonSet": 1, "Deployment": 1}},
		{name: "metallb v0.15.3 folder", chart: "metallb-v0.15.3", opts: render.HelmOptions{Namespace: "metallb-system"}, want: map[string]int{"CustomResourceDefinition": 9, "DaemonSet": 1, "Deployment": 1}},
		{name: "metallb with values", chart: "metallb-v0.15.3", opts: render.HelmOptions{Namespace: "metallb-system", ReleaseName: "lb", Set: []string{"speaker.enabled=false", "controller.logLevel=debug"}}, want: map[string]int{"CustomResourceDefinition": 9, "DaemonSet": 0, "Deployment": 1}},
		{name: "ingress-nginx 4.14.5 archive", chart: "ingress-nginx-4.14.5.tgz", opts: render.HelmOptions{Namespace: "ingress-nginx"}, want: map[string]int{"Job": 2, "Deployment": 1, "ValidatingWebhookConfiguration": 1}},
		{name: "ingress-nginx 4.15.1 archive", chart: "ingress-nginx-4.15.1.tgz", opts: render.HelmOptions{Namespace: "ingress-nginx", Set: []string{"controller.replicaCount=2"}, APIVersions: []string{"monitoring.coreos.com/v1"}}, want: map[string]int{"Job": 2, "Deployment": 1}},
		{name: "hooks chart", chart: "../hooks", opts: render.HelmOptions{ValuesFiles: []string{"testdata/hooks-values.yaml"}, Set: []string{"greeting=hi"}, APIVersions: []string{"example.com/v1"}, ReleaseName: "h", Namespace: "demo"}, want: map[string]int{"CustomResourceDefinition": 1, "ConfigMap": 2, "Job": 1, "Pod": 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chart := filepath.Join(charts, tc.chart)
			tc.opts.KubeVersion = "v1.36.0"
			got, err := helmchart.Helm(ctx, chart, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			name := tc.opts.ReleaseName
			if name == "" {
				name = got.Chart.Name
			}
			args := []string{"template", name, chart, "--include-crds", "-n", tc.opts.Namespace, "--kube-version", tc.opts.KubeVersion}
			for _, f := range tc.opts.ValuesFiles {
				args = append(args, "--values", f)
			}
			for _, s := range tc.opts.Set {
				args = append(args, "--set", s)
			}
			for _, a := range tc.opts.APIVersions {
				args = append(args, "--api-versions", a)
			}
			want := runHelm(t, env, args...)
			dropped := map[string]bool{}
			for _, h := range got.Hooks {
				if h.Action == render.HookDropped {
					dropped[h.Kind+" "+h.Name] = true
				}
			}
			if len(dropped) == 0 && string(got.Manifests) != want {
				t.Errorf("text differs from helm template's (%d bytes, helm %d)", len(got.Manifests), len(want))
			}
			ours, theirs := objects(t, string(got.Manifests)), objects(t, want)
			for k, v := range theirs {
				f := strings.Fields(k)
				if dropped[f[1]+" "+strings.TrimPrefix(f[2], tc.opts.Namespace+"/")] || dropped[f[1]+" "+strings.TrimPrefix(f[2], "/")] {
					delete(theirs, k)
					continue
				}
				if ours[k] != v {
					t.Errorf("%s: ours %s\nhelm's %s", k, ours[k], v)
				}
			}
			for k := range ours {
				if _, ok := theirs[k]; !ok {
					t.Errorf("%s: rendered by us, not by helm template", k)
				}
			}
			have := kinds(ours)
			for k, n := range tc.want {
				if have[k] != n {
					t.Errorf("%d %s objects, want %d (all: %v)", have[k], k, n, have)
				}
			}
		})
	}
}

// Install, upgrade, rollback and delete hooks are kept in the strategy
// with their hook annotations; test hooks are dropped; every hook is
// reported.
func TestHelmHooks(t *testing.T) {
	helmEnv(t)
	got, err := helmchart.Helm(t.Context(), "testdata/hooks", render.HelmOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var report []string
	for _, h := range got.Hooks {
		report = append(report, h.Kind+"/"+h.Name+" "+strings.Join(h.Events, ",")+" "+string(h.Action))
	}
	sort.Strings(report)
	want := []string{
		"ConfigMap/hooks-goodbye pre-delete kept",
		"Job/hooks-setup pre-install,pre-upgrade kept",
		"Pod/hooks-test test dropped",
	}
	if strings.Join(report, "\n") != strings.Join(want, "\n") {
		t.Errorf("hooks:\n%s\nwant:\n%s", strings.Join(report, "\n"), strings.Join(want, "\n"))
	}
	for _, h := range got.Hooks {
		if !strings.Contains(h.String(), h.Path) || h.Reason == "" {
			t.Errorf("hook report %q names no template or reason", h)
		}
	}
	objs := kinds(objects(t, string(got.Manifests)))
	if objs["Job"] != 1 || objs["Pod"] != 0 || objs["ConfigMap"] != 2 || objs["CustomResourceDefinition"] != 1 {
		t.Errorf("objects by kind %v, want the Job hook, the ConfigMap, the pre-delete ConfigMap hook and the CRD, no test Pod", objs)
	}
	wantChart := render.Chart{Name: "hooks", Version: "1.2.3", AppVersion: "4.5"}
	if got.Chart != wantChart {
		t.Errorf("chart %+v, want %+v", got.Chart, wantChart)
	}
	ann := got.Chart.Annotations()
	if ann[render.ChartNameAnnotation] != "hooks" || ann[render.ChartVersionAnnotation] != "1.2.3" || ann[render.ChartAppVersionAnnotation] != "4.5" {
		t.Errorf("annotations %v", ann)
	}
	// The release is named after the chart, in namespace default.
	if !strings.Contains(string(got.Manifests), "name: hooks-config") {
		t.Errorf("release not named after the chart:\n%s", got.Manifests)
	}
}

// Bad inputs fail with an error naming the input, Helm's own message and,
// for a template, its place.
func TestHelmErrors(t *testing.T) {
	helmEnv(t)
	dir := t.TempDir()
	badYAML := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(badYAML, []byte("a: [unclosed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, chart string
		opts        render.HelmOptions
		want        []string
	}{
		{"missing chart", "testdata/nothing-here", render.HelmOptions{}, []string{"chart testdata/nothing-here", "no such chart folder or archive"}},
		{"template error", "testdata/broken", render.HelmOptions{}, []string{"render chart testdata/broken", "broken/templates/configmap.yaml:6:56", "<.Values.settings.name>", "nil pointer"}},
		{"required value", "testdata/broken", render.HelmOptions{Set: []string{"settings.other=1"}}, []string{"broken/templates/configmap.yaml:6", "settings.name is required"}},
		{"bad --set", "testdata/hooks", render.HelmOptions{Set: []string{"greeting=hi", "a.b"}}, []string{`--set "a.b"`, "a.b"}},
		{"missing values file", "testdata/hooks", render.HelmOptions{ValuesFiles: []string{filepath.Join(dir, "absent.yaml")}}, []string{"values file " + filepath.Join(dir, "absent.yaml")}},
		{"bad values file", "testdata/hooks", render.HelmOptions{ValuesFiles: []string{badYAML}}, []string{"values file " + badYAML}},
		{"bad kube version", "testdata/hooks", render.HelmOptions{KubeVersion: "one.two"}, []string{`kube version "one.two"`}},
		{"chart's kubeVersion", filepath.Join(charts, "ingress-nginx-4.15.1.tgz"), render.HelmOptions{KubeVersion: "v1.20.0"}, []string{"ingress-nginx-4.15.1.tgz", ">=1.21.0-0", "v1.20.0"}},
		{"not a chart", "kustomize/testdata/kustomize/base", render.HelmOptions{}, []string{"load chart kustomize/testdata/kustomize/base", "Chart.yaml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := helmchart.Helm(t.Context(), tc.chart, tc.opts)
			if err == nil {
				t.Fatal("no error")
			}
			t.Log(err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// An oci:// reference is pulled from the registry, here an in-process
// one the Helm CLI pushed the chart to, and renders as the archive does.
func TestHelmFromOCIRegistry(t *testing.T) {
	env := helmEnv(t)
	srv := httptest.NewServer(registry.New())
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	chart := filepath.Join(charts, "ingress-nginx-4.15.1.tgz")
	runHelm(t, env, "push", chart, "oci://"+host+"/charts", "--plain-http")
	opts := render.HelmOptions{Namespace: "ingress-nginx", KubeVersion: "v1.36.0", PlainHTTP: true}
	got, err := helmchart.Helm(t.Context(), "oci://"+host+"/charts/ingress-nginx:4.15.1", opts)
	if err != nil {
		t.Fatal(err)
	}
	local, err := helmchart.Helm(t.Context(), chart, opts)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Manifests) != string(local.Manifests) || got.Chart != local.Chart {
		t.Errorf("the chart pulled from the registry renders differently from its archive (%+v, %+v)", got.Chart, local.Chart)
	}
	if _, err := helmchart.Helm(t.Context(), "oci://"+host+"/charts/absent:1.0.0", opts); err == nil || !strings.Contains(err.Error(), "pull chart oci://"+host+"/charts/absent:1.0.0") {
		t.Errorf("a missing oci chart: %v", err)
	}
}
