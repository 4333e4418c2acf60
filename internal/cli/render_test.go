package cli

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	helmcli "helm.sh/helm/v4/pkg/cli"
	"helm.sh/helm/v4/pkg/postrenderer"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/render"
	"github.com/installstrategy/installstrategy/pkg/render/helmchart"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// renderTestdata holds the charts and kustomizations of pkg/render's
// tests: real upstream charts (see its charts/README.md) and small ones.
var renderTestdata, _ = filepath.Abs(filepath.Join("..", "..", "pkg", "render", "testdata"))

// encodedText decodes the strategy ConfigMap encode printed.
func encodedText(t *testing.T, out string) (string, map[string]string) {
	t.Helper()
	cms, err := codec.ReadConfigMaps("encode output", []byte(out))
	if err != nil || len(cms) != 1 {
		t.Fatalf("encode output: %v (%d ConfigMaps)\n%s", err, len(cms), tail(out))
	}
	l, err := codec.LoadConfigMap("encode output", cms[0], codec.DecodeOptions{}, strategy.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	text, err := l.Strategy.Serialize()
	if err != nil {
		t.Fatal(err)
	}
	// A chart's NOTES.txt travels as a Notes document, never applied:
	// the rest is the rendering the tests compare.
	var applied []string
	for _, d := range strings.Split(string(text), "---\n") {
		if !strings.Contains(d, "\nkind: Notes\n") {
			applied = append(applied, d)
		}
	}
	return strings.Join(applied, "---\n"), cms[0].Annotations
}

// encode --from-helm encodes what the chart renders (the library's
// rendering, itself checked against helm template), names the chart in
// its annotations, takes the chart's version unless --version is given,
// and reports every hook on stderr.
func TestEncodeFromHelm(t *testing.T) {
	chart := filepath.Join(renderTestdata, "hooks")
	values := filepath.Join(renderTestdata, "hooks-values.yaml")
	code, out, errOut := run(t, nil, "encode", "--from-helm", chart, "-n", "demo", "--values", values, "--set", "greeting=hi", "--release-name", "h", "--kube-version", "v1.36.0", "--api-versions", "example.com/v1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want, err := helmchart.Helm(t.Context(), chart, render.HelmOptions{Namespace: "demo", ValuesFiles: []string{values}, Set: []string{"greeting=hi"}, ReleaseName: "h", KubeVersion: "v1.36.0", APIVersions: []string{"example.com/v1"}})
	if err != nil {
		t.Fatal(err)
	}
	text, ann := encodedText(t, out)
	if text != canonical(t, string(want.Manifests)) {
		t.Errorf("encoded text is not the chart's rendering:\n%s", text)
	}
	for _, w := range []string{"name: h-config", "greeting: hi", "replicas: \"2\"", "kube: v1.36.0", "example: served", "name: h-setup", "name: h-goodbye", "helm.sh/hook: pre-delete", "kind: CustomResourceDefinition"} {
		if !strings.Contains(text, w) {
			t.Errorf("encoded text lacks %q (values, --set, release name, capabilities, kept hooks with their annotations, CRDs)", w)
		}
	}
	if strings.Contains(text, "h-test") {
		t.Error("dropped test hook h-test is in the strategy")
	}
	for k, v := range map[string]string{render.ChartNameAnnotation: "hooks", render.ChartVersionAnnotation: "1.2.3", render.ChartAppVersionAnnotation: "4.5", metakeys.VersionAnnotation: "1.2.3"} {
		if ann[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, ann[k], v)
		}
	}
	for _, w := range []string{
		"helm: hook Job/h-setup (pre-install,pre-upgrade, hooks/templates/pre-install.yaml): kept: ",
		"helm: hook Pod/h-test (test, hooks/templates/test.yaml): dropped: ",
		"helm: hook ConfigMap/h-goodbye (pre-delete, hooks/templates/pre-delete.yaml): kept: ",
	} {
		if !strings.Contains(errOut, w) {
			t.Errorf("stderr does not report %q:\n%s", w, errOut)
		}
	}

	code, out, errOut = run(t, nil, "encode", "--from-helm", chart, "--strategy-version", "v9.0.0")
	if code != 0 {
		t.Fatalf("--strategy-version: exit %d: %s", code, errOut)
	}
	if _, ann := encodedText(t, out); ann[metakeys.VersionAnnotation] != "v9.0.0" || ann[render.ChartVersionAnnotation] != "1.2.3" {
		t.Errorf("--strategy-version v9.0.0: annotations %v", ann)
	}
}

// A chart whose template fails: exit 1, Helm's own error with the
// template's place, nothing on stdout.
func TestEncodeFromHelmTemplateError(t *testing.T) {
	code, out, errOut := run(t, nil, "encode", "--from-helm", filepath.Join(renderTestdata, "broken"))
	if code != 1 || out != "" {
		t.Errorf("exit %d, stdout %q", code, out)
	}
	for _, w := range []string{"render chart ", "broken/templates/configmap.yaml:6:56", "nil pointer evaluating"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errOut)
		}
	}
}

// encode --from-kustomize encodes what kubectl kustomize prints (the
// golden file of pkg/render).
func TestEncodeFromKustomize(t *testing.T) {
	code, out, errOut := run(t, nil, "encode", "--from-kustomize", filepath.Join(renderTestdata, "..", "kustomize", "testdata", "kustomize", "overlay"), "--version", "v2.1.0", "-n", "shop")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	golden, err := os.ReadFile(filepath.Join(renderTestdata, "..", "kustomize", "testdata", "kustomize", "overlay.golden"))
	if err != nil {
		t.Fatal(err)
	}
	if text, _ := encodedText(t, out); text != canonical(t, string(golden)) {
		t.Errorf("encoded text is not kubectl kustomize's output:\n%s", text)
	}
}

// helmFlagsEnv keeps Helm's configuration and caches in the test and
// finds the post-renderer plugin of pkg/render's testdata.
func helmFlagsEnv(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	for _, v := range []string{"HELM_CONFIG_HOME", "HELM_CACHE_HOME", "HELM_DATA_HOME"} {
		t.Setenv(v, filepath.Join(dir, v))
	}
	t.Setenv("HELM_PLUGINS", filepath.Join(renderTestdata, "helmflags", "plugins"))
}

// Each of Helm's flags reaches the render as the option of its name: the
// strategy is what the library renders with those options (itself
// compared with the Helm CLI in pkg/render).
func TestEncodeHelmFlags(t *testing.T) {
	helmFlagsEnv(t)
	chart := filepath.Join(renderTestdata, "helmflags", "echo")
	file := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(file, []byte("from-a-file"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, nil, "encode", "--from-helm", chart, "-n", "demo",
		"--set", "replicas=0", "--set-string", "build=007", "--set-json", `labels={"n":1}`, "--set-file", "notes="+file,
		"--set-literal", "motd=a,b", "--skip-crds", "--skip-schema-validation",
		"--post-renderer", "relabel", "--post-renderer-args", "relabeled")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	pr, err := postrenderer.NewPostRendererPlugin(helmcli.New(), "relabel", "relabeled")
	if err != nil {
		t.Fatal(err)
	}
	want, err := helmchart.Helm(t.Context(), chart, render.HelmOptions{Namespace: "demo", Set: []string{"replicas=0"},
		StringValues: []string{"build=007"}, JSONValues: []string{`labels={"n":1}`}, FileValues: []string{"notes=" + file},
		LiteralValues: []string{"motd=a,b"}, SkipCRDs: true, SkipSchemaValidation: true, PostRenderer: pr})
	if err != nil {
		t.Fatal(err)
	}
	text, ann := encodedText(t, out)
	if text != canonical(t, string(want.Manifests)) {
		t.Errorf("encoded text is not the chart's rendering with the same options:\n%s", text)
	}
	for _, w := range []string{`"build":"007"`, `"motd":"a,b"`, `"notes":"from-a-file"`, `"replicas":0`, "stage: relabeled", "added-by-post-renderer"} {
		if !strings.Contains(text, w) {
			t.Errorf("encoded text lacks %s", w)
		}
	}
	if strings.Contains(text, "CustomResourceDefinition") {
		t.Error("--skip-crds: the chart's CRD is in the strategy")
	}
	if ann[metakeys.VersionAnnotation] != "1.1.0" {
		t.Errorf("strategy version %q, want the chart's", ann[metakeys.VersionAnnotation])
	}
}

// --version with --from-helm is the chart's version and --strategy-version
// the strategy's (by default the chart's); without a chart --version is
// still the strategy's. A chart of a loopback repository (--repo) shows
// the picked version in the annotations.
func TestEncodeHelmVersions(t *testing.T) {
	helmFlagsEnv(t)
	srv := httptest.NewServer(http.FileServer(http.Dir(filepath.Join(renderTestdata, "helmflags", "repo"))))
	defer srv.Close()
	for _, tc := range []struct {
		args                  []string
		chartVersion, version string
	}{
		{args: []string{"--repo", srv.URL}, chartVersion: "1.1.0", version: "1.1.0"},
		{args: []string{"--repo", srv.URL, "--version", "1.0.0"}, chartVersion: "1.0.0", version: "1.0.0"},
		{args: []string{"--repo", srv.URL, "--version", "~1.0", "--strategy-version", "v5-prod"}, chartVersion: "1.0.0", version: "v5-prod"},
	} {
		code, out, errOut := run(t, nil, append([]string{"encode", "--from-helm", "echo"}, tc.args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.args, code, errOut)
		}
		if _, ann := encodedText(t, out); ann[render.ChartVersionAnnotation] != tc.chartVersion || ann[metakeys.VersionAnnotation] != tc.version {
			t.Errorf("%v: chart version %q, strategy version %q; want %s and %s", tc.args, ann[render.ChartVersionAnnotation], ann[metakeys.VersionAnnotation], tc.chartVersion, tc.version)
		}
	}

	chart := filepath.Join(renderTestdata, "helmflags", "echo")
	for _, tc := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{args: []string{"--from-helm", chart, "--version", "v9.0.0"}, want: "--strategy-version"},
		{args: []string{"--from-helm", chart, "-f", "values.yaml"}, want: "values files are --values"},
		{args: []string{"--from-helm", chart, "--post-renderer-args", "x"}, want: "--post-renderer-args needs --post-renderer"},
		{args: []string{"--from-helm", chart, "--post-renderer", "./a-program"}, want: "Helm 4 takes the name of a postrenderer/v1 plugin"},
		{args: []string{"--from-helm", chart, "--set-json", "a={"}, want: "--set-json "},
		{stdin: smallManifest, args: []string{"-", "--version", "v1", "--strategy-version", "v2"}, want: "give one"},
		{stdin: smallManifest, args: []string{"-"}, want: "--strategy-version (or --version) is required"},
		{stdin: smallManifest, args: []string{"-", "--repo", srv.URL, "--version", "v1"}, want: "--repo applies to --from-helm"},
	} {
		code, _, errOut := run(t, []byte(tc.stdin), append([]string{"encode"}, tc.args...)...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want it to say %q", tc.args, code, errOut, tc.want)
		}
	}
	for _, args := range [][]string{{"-", "--version", "v1"}, {"-", "--strategy-version", "v1"}, {"-", "--version", "v1", "--strategy-version", "v1"}} {
		code, out, errOut := run(t, []byte(smallManifest), append([]string{"encode"}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		if _, ann := encodedText(t, out); ann[metakeys.VersionAnnotation] != "v1" {
			t.Errorf("%v: strategy version %q", args, ann[metakeys.VersionAnnotation])
		}
	}
}
