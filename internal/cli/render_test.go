package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/installstrategy/installstrategy/pkg/codec"
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
	return string(text), cms[0].Annotations
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
	want, err := helmchart.Helm(context.Background(), chart, render.HelmOptions{Namespace: "demo", ValuesFiles: []string{values}, Set: []string{"greeting=hi"}, ReleaseName: "h", KubeVersion: "v1.36.0", APIVersions: []string{"example.com/v1"}})
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
	for k, v := range map[string]string{render.ChartNameAnnotation: "hooks", render.ChartVersionAnnotation: "1.2.3", render.ChartAppVersionAnnotation: "4.5", codec.NativeVersionAnnotation: "1.2.3"} {
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

	code, out, errOut = run(t, nil, "encode", "--from-helm", chart, "--version", "v9.0.0")
	if code != 0 {
		t.Fatalf("--version: exit %d: %s", code, errOut)
	}
	if _, ann := encodedText(t, out); ann[codec.NativeVersionAnnotation] != "v9.0.0" || ann[render.ChartVersionAnnotation] != "1.2.3" {
		t.Errorf("--version v9.0.0: annotations %v", ann)
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
