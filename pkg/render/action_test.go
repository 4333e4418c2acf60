package render

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart"
	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/loader"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/strvals"

	"github.com/installstrategy/installstrategy/pkg/oci/ocitest"
)

// actionRender is how this package rendered a chart before it stopped
// linking Helm's install action (commit a9a539c): a client-only
// action.Install with IncludeCRDs, then what helm template prints of the
// release. It is the reference of TestRenderMatchesInstallAction and lives
// only in this test file, so the install action, its Kubernetes clients
// and storage drivers reach no program that imports this package.
func actionRender(ctx context.Context, ref string, loaded chart.Charter, vals map[string]any, opts HelmOptions) (*HelmResult, *release.Release, error) {
	chrt, ok := loaded.(*chartv2.Chart)
	if !ok {
		return nil, nil, fmt.Errorf("load chart %s: a %T chart, want apiVersion v1 or v2", ref, loaded)
	}
	if t := chrt.Metadata.Type; t != "" && t != "application" {
		return nil, nil, fmt.Errorf("chart %s: a %s chart is not installable", ref, t)
	}
	if deps := chrt.Metadata.Dependencies; len(deps) > 0 {
		reqs := make([]chart.Dependency, len(deps))
		for i, d := range deps {
			reqs[i] = d
		}
		if err := action.CheckDependencies(chrt, reqs); err != nil {
			return nil, nil, fmt.Errorf("chart %s: its dependencies are missing, run helm dependency build: %w", ref, err)
		}
	}
	if vals == nil {
		vals = map[string]any{}
	}
	inst := action.NewInstall(action.NewConfiguration(action.ConfigurationSetLogger(slog.DiscardHandler)))
	inst.DryRunStrategy = action.DryRunClient
	inst.Replace = true // no name check against a release store
	inst.IncludeCRDs = true
	inst.ReleaseName = opts.ReleaseName
	if inst.ReleaseName == "" {
		inst.ReleaseName = chrt.Name()
	}
	inst.Namespace = opts.Namespace
	if inst.Namespace == "" {
		inst.Namespace = "default"
	}
	if opts.KubeVersion != "" {
		inst.KubeVersion, _ = chartcommon.ParseKubeVersion(opts.KubeVersion)
	}
	inst.APIVersions = chartcommon.VersionSet(opts.APIVersions)
	r, err := inst.RunWithContext(ctx, chrt, vals)
	if err != nil {
		return nil, nil, fmt.Errorf("render chart %s: %w", ref, err)
	}
	rel, ok := r.(*release.Release)
	if !ok {
		return nil, nil, fmt.Errorf("render chart %s: helm returned a %T, want a v1 release", ref, r)
	}
	res := &HelmResult{Chart: Chart{Name: chrt.Name(), Version: chrt.Metadata.Version, AppVersion: chrt.Metadata.AppVersion}}
	var text strings.Builder
	if m := strings.TrimSpace(rel.Manifest); m != "" {
		text.WriteString(m)
		text.WriteByte('\n')
	}
	for _, h := range rel.Hooks {
		c := classify(h)
		res.Hooks = append(res.Hooks, c)
		if c.Action == HookKept {
			fmt.Fprintf(&text, "---\n# Source: %s\n%s\n", h.Path, h.Manifest)
		}
	}
	res.Manifests = []byte(text.String())
	return res, rel, nil
}

// copyValues deep-copies values, keeping their types (an int64 of --set
// stays one), so that each rendering gets values no other touched.
func copyValues(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = copyValues(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = copyValues(e)
		}
		return out
	default:
		return v
	}
}

// setValues parses --set expressions as helm does.
func setValues(t *testing.T, sets ...string) map[string]any {
	t.Helper()
	vals := map[string]any{}
	for _, s := range sets {
		if err := strvals.ParseInto(s, vals); err != nil {
			t.Fatal(err)
		}
	}
	return vals
}

// packChart returns a chart folder as a packaged chart (.tgz), or the
// archive itself.
func packChart(t *testing.T, path string) []byte {
	t.Helper()
	if !strings.HasSuffix(path, ".tgz") {
		return ocitest.PackChart(t, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// HelmChart and HelmArchive render, with Helm's chart, engine and release
// packages alone, what Helm's install action renders in a client-only dry
// run (the way this package rendered before): the same release manifest
// and hooks (every field, manifests byte for byte), the same result, and
// the same error, for every test chart with default and given values,
// hooks of every kind, subcharts (conditions, tags, aliases, imported
// values, a library, a vendored archive), CRDs of a chart and its
// subcharts, capabilities, and schema, template, dependency and
// kubeVersion failures.
func TestRenderMatchesInstallAction(t *testing.T) {
	const deps = "testdata/deps"
	metallb := filepath.Join("testdata", "charts", "metallb-v0.15.3")
	nginx := filepath.Join("testdata", "charts", "ingress-nginx-4.15.1.tgz")
	for _, tc := range []struct {
		name  string
		chart string
		vals  []string // --set expressions
		opts  HelmOptions
		// edit changes the loaded chart (each rendering loads its own).
		edit func(*chartv2.Chart)
		// wantErr is in the error of both, when they must fail.
		wantErr string
	}{
		{name: "metallb v0.14.9", chart: filepath.Join("testdata", "charts", "metallb-v0.14.9"), opts: HelmOptions{Namespace: "metallb-system"}},
		{name: "metallb v0.15.3", chart: metallb, opts: HelmOptions{Namespace: "metallb-system", KubeVersion: "v1.36.0"}},
		{name: "metallb with its vendored frr-k8s archive and no CRD subchart", chart: metallb, vals: []string{"frrk8s.enabled=true", "speaker.frr.enabled=false", "crds.enabled=false", "controller.logLevel=debug"}, opts: HelmOptions{Namespace: "metallb-system", ReleaseName: "lb", KubeVersion: "v1.31.2"}},
		{name: "metallb schema failure", chart: metallb, vals: []string{"controller.logLevel=loud", "speaker.enabled=maybe"}, opts: HelmOptions{Namespace: "metallb-system"}, wantErr: "values don't meet the specifications of the schema"},
		{name: "ingress-nginx 4.14.5", chart: filepath.Join("testdata", "charts", "ingress-nginx-4.14.5.tgz"), opts: HelmOptions{Namespace: "ingress-nginx", KubeVersion: "v1.30.0"}},
		{name: "ingress-nginx 4.15.1 without the admission webhook", chart: nginx, vals: []string{"controller.admissionWebhooks.enabled=false", "controller.kind=DaemonSet"}, opts: HelmOptions{Namespace: "ingress-nginx", KubeVersion: "v1.36.0"}},
		{name: "ingress-nginx 4.15.1 with values and API versions", chart: nginx, vals: []string{"controller.replicaCount=2", "controller.metrics.enabled=true", "controller.metrics.serviceMonitor.enabled=true", "controller.admissionWebhooks.patch.enabled=true"}, opts: HelmOptions{Namespace: "ingress-nginx", KubeVersion: "v1.36.0", APIVersions: []string{"monitoring.coreos.com/v1", "monitoring.coreos.com/v1/ServiceMonitor"}}},
		{name: "ingress-nginx kubeVersion incompatible", chart: nginx, opts: HelmOptions{KubeVersion: "v1.20.0"}, wantErr: "chart requires kubeVersion"},
		{name: "hooks defaults", chart: "testdata/hooks"},
		{name: "hooks with values", chart: "testdata/hooks", vals: []string{"greeting=hi", "replicas=3"}, opts: HelmOptions{ReleaseName: "h", Namespace: "demo", APIVersions: []string{"example.com/v1"}}},
		{name: "subcharts defaults", chart: deps, opts: HelmOptions{KubeVersion: "v1.33.1"}},
		{name: "subcharts: alias by tag, condition off, values over imports", chart: deps, vals: []string{"tags.extra=true", "sub.enabled=false", "other.color=green", "other.port=9090", "imported.level=7", "replicas=4", "extraDocs=true", "global.region=eu"}, opts: HelmOptions{ReleaseName: "rel", Namespace: "ns", KubeVersion: "v1.36.0", APIVersions: []string{"example.com/v1"}}},
		{name: "subcharts: both enabled, the lowest kube version", chart: deps, vals: []string{"tags.extra=true"}, opts: HelmOptions{KubeVersion: "1.25.0"}},
		{name: "default kube version", chart: deps, wantErr: "incompatible with Kubernetes v1.20.0"},
		{name: "schema failure in the parent", chart: deps, vals: []string{"replicas=0"}, wantErr: "minimum"},
		{name: "schema failure in a subchart", chart: deps, vals: []string{"sub.color=purple"}, wantErr: "sub:"},
		{name: "schema failure in an aliased subchart", chart: deps, vals: []string{"tags.extra=true", "other.port=70000"}, wantErr: "other:"},
		{name: "schema: a required value removed", chart: deps, vals: []string{"image=null"}, wantErr: "image"},
		{name: "kubeVersion incompatible", chart: deps, opts: HelmOptions{KubeVersion: "v1.24.9"}, wantErr: ">= 1.25.0-0"},
		{name: "dependency missing", chart: deps, edit: func(c *chartv2.Chart) {
			var keep []*chartv2.Chart
			for _, d := range c.Dependencies() {
				if d.Name() != "sub" {
					keep = append(keep, d)
				}
			}
			c.SetDependencies(keep...)
		}, wantErr: "missing in charts/ directory: sub"},
		{name: "library chart", chart: filepath.Join(deps, "charts", "lib"), wantErr: "a library chart is not installable"},
		{name: "bad release name", chart: "testdata/hooks", opts: HelmOptions{ReleaseName: "Not_A_Name"}, wantErr: "release name check failed"},
		{name: "template error", chart: "testdata/broken", wantErr: "nil pointer"},
		{name: "required value", chart: "testdata/broken", vals: []string{"settings.other=1"}, wantErr: "settings.name is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			vals := setValues(t, tc.vals...)
			load := func() chart.Charter {
				t.Helper()
				c, err := loader.Load(tc.chart)
				if err != nil {
					t.Fatal(err)
				}
				if tc.edit != nil {
					tc.edit(c.(*chartv2.Chart))
				}
				return c
			}
			want, rel, wantErr := actionRender(ctx, tc.chart, load(), copyValues(vals).(map[string]any), tc.opts)
			_, manifest, notes, hooks, partsErr := renderParts(ctx, tc.chart, load(), copyValues(vals).(map[string]any), tc.opts)
			got, err := HelmChart(ctx, tc.chart, load(), copyValues(vals).(map[string]any), tc.opts)
			if tc.wantErr != "" {
				if wantErr == nil || err == nil || partsErr == nil {
					t.Fatalf("errors: action %v, HelmChart %v, renderParts %v; want both to fail", wantErr, err, partsErr)
				}
				if !sameError(err, wantErr) || !sameError(partsErr, wantErr) {
					t.Errorf("error\n%v\nthe install action's\n%v", err, wantErr)
				}
				if !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %q does not say %q", err, tc.wantErr)
				}
				t.Log(err)
			} else {
				if wantErr != nil || err != nil || partsErr != nil {
					t.Fatalf("errors: action %v, HelmChart %v, renderParts %v", wantErr, err, partsErr)
				}
				if manifest != rel.Manifest {
					t.Errorf("release manifest differs from the install action's (%d bytes, action %d):\n%s", len(manifest), len(rel.Manifest), firstDiff(manifest, rel.Manifest))
				}
				if notes != rel.Info.Notes || got.Notes != rel.Info.Notes {
					t.Errorf("notes %q (HelmChart %q), the install action's %q", notes, got.Notes, rel.Info.Notes)
				}
				if !reflect.DeepEqual(hooks, rel.Hooks) {
					t.Errorf("hooks differ from the install action's:\n%s", firstDiff(hookText(hooks), hookText(rel.Hooks)))
				}
				compareResults(t, "HelmChart", got, want)
				if len(rel.Manifest) == 0 {
					t.Error("nothing rendered")
				}
			}

			// The operator's path: the same chart packaged, rendered from
			// its bytes.
			tgz := packChart(t, tc.chart)
			if tc.edit != nil {
				return // the edit is of a loaded chart
			}
			arch, err := HelmArchive(ctx, tc.chart, tgz, copyValues(vals).(map[string]any), tc.opts)
			if tc.wantErr != "" {
				if !sameError(err, wantErr) {
					t.Errorf("HelmArchive error\n%v\nthe install action's\n%v", err, wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			compareResults(t, "HelmArchive", arch, want)
		})
	}
}

// sameError tells whether two errors say the same. Helm lists the
// failures of a values schema in no fixed order (its JSON schema
// validator's), so lines are compared as a set.
func sameError(err, want error) bool {
	if err == nil || want == nil {
		return err == want
	}
	if err.Error() == want.Error() {
		return true
	}
	a, b := strings.Split(err.Error(), "\n"), strings.Split(want.Error(), "\n")
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b) && strings.Contains(want.Error(), "schema")
}

func compareResults(t *testing.T, what string, got, want *HelmResult) {
	t.Helper()
	if string(got.Manifests) != string(want.Manifests) {
		t.Errorf("%s: manifests differ from the install action's (%d bytes, action %d):\n%s", what, len(got.Manifests), len(want.Manifests), firstDiff(string(got.Manifests), string(want.Manifests)))
	}
	if !reflect.DeepEqual(got.Hooks, want.Hooks) || got.Chart != want.Chart {
		t.Errorf("%s: chart %+v, hooks %v; the install action's %+v, %v", what, got.Chart, got.Hooks, want.Chart, want.Hooks)
	}
}

func hookText(hooks []*release.Hook) string {
	var b strings.Builder
	for _, h := range hooks {
		fmt.Fprintf(&b, "%s %s %s %v weight %d delete %v log %v\n%s\n", h.Kind, h.Name, h.Path, h.Events, h.Weight, h.DeletePolicies, h.OutputLogPolicies, h.Manifest)
	}
	return b.String()
}

// firstDiff shows where two texts part.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y || i >= len(al) || i >= len(bl) {
			return fmt.Sprintf("line %d:\n ours   %q\n action %q", i+1, x, y)
		}
	}
	return "(same lines)"
}

// Renders at once (the operator reconciles several Installations at a
// time) each see their own capabilities: Helm's default API versions are
// shared, the ones given are added to a copy.
func TestConcurrentRendersKeepTheirCapabilities(t *testing.T) {
	tgz := packChart(t, "testdata/deps")
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			opts := HelmOptions{KubeVersion: "v1.36.0"}
			want := `gadgets: "false"`
			if i%2 == 0 {
				opts.APIVersions = []string{"example.com/v1"}
				want = `gadgets: "true"`
			}
			res, err := HelmArchive(t.Context(), "deps", tgz, nil, opts)
			if err != nil {
				t.Error(err)
				return
			}
			if !strings.Contains(string(res.Manifests), want) {
				t.Errorf("render %d (API versions %v) does not say %s", i, opts.APIVersions, want)
			}
		}()
	}
	wg.Wait()
	if slices.Contains(chartcommon.DefaultCapabilities.APIVersions, "example.com/v1") {
		t.Error("a render changed Helm's default API versions")
	}
}
