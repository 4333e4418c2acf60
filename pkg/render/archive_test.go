package render_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/installstrategy/installstrategy/pkg/oci/ocitest"
	"github.com/installstrategy/installstrategy/pkg/render"
)

// HelmArchive renders a packaged chart with the given values only (over
// the chart's values.yaml), classifies hooks as Helm does for encode
// --from-helm, and reports template errors with their place.
func TestHelmArchive(t *testing.T) {
	hooks := ocitest.PackChart(t, "testdata/hooks")
	for _, tc := range []struct {
		name      string
		tgz       []byte
		vals      map[string]any
		opts      render.HelmOptions
		want      []string // in the manifests
		wantErr   []string
		dropHooks int
	}{
		{name: "chart defaults", tgz: hooks, opts: render.HelmOptions{Namespace: "ns1"}, want: []string{`greeting: "hello"`, "name: hooks-config"}, dropHooks: 1},
		{name: "values", tgz: hooks, vals: map[string]any{"greeting": "hi"}, opts: render.HelmOptions{ReleaseName: "r", Namespace: "ns1"}, want: []string{`greeting: "hi"`, "name: r-config", `replicas: "1"`}, dropHooks: 1},
		{name: "template error", tgz: ocitest.PackChart(t, "testdata/broken"), vals: map[string]any{"settings": map[string]any{"other": 1}}, wantErr: []string{"broken/templates/configmap.yaml:6", "settings.name is required"}},
		{name: "not an archive", tgz: []byte("not gzip"), wantErr: []string{"load chart x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := render.HelmArchive(t.Context(), "x", tc.tgz, tc.vals, tc.opts)
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatal("no error")
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not name %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(res.Manifests), w) {
					t.Errorf("manifests lack %q:\n%s", w, res.Manifests)
				}
			}
			dropped := 0
			for _, h := range res.Hooks {
				if h.Action == render.HookDropped {
					dropped++
					if strings.Contains(string(res.Manifests), "# Source: "+h.Path) {
						t.Errorf("dropped hook %s is in the manifests", h)
					}
				}
			}
			if dropped != tc.dropHooks {
				t.Errorf("%d hooks dropped, want %d: %v", dropped, tc.dropHooks, res.Hooks)
			}
		})
	}
}

// A chart's lookup finds nothing and its DNS lookups are off: the render
// is client-only (no cluster, no network), whatever the templates ask.
func TestHelmArchiveClientOnly(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "c", "templates"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "c", "Chart.yaml"), []byte("apiVersion: v2\nname: c\nversion: 0.1.0\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "c", "templates", "cm.yaml"), []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: c
data:
  secrets: {{ lookup "v1" "Secret" "kube-system" "" | toJson | quote }}
  host: {{ getHostByName "localhost" | quote }}
`), 0o644))
	res, err := render.HelmArchive(t.Context(), "c", ocitest.PackChart(t, filepath.Join(dir, "c")), nil, render.HelmOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`secrets: "{}"`, `host: ""`} {
		if !strings.Contains(string(res.Manifests), w) {
			t.Errorf("manifests lack %q:\n%s", w, res.Manifests)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := render.HelmArchive(ctx, "c", ocitest.PackChart(t, filepath.Join(dir, "c")), nil, render.HelmOptions{}); err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Errorf("a render past its context: %v, want the context's error", err)
	}
}
