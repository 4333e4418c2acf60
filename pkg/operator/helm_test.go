package operator

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/render"
	"github.com/installstrategy/installstrategy/pkg/render/helmspec"
)

// Values are decoded from the Installation alone; their digest is of
// their canonical JSON (the same values in another key order are the
// same strategy), and every render input changes the identifier.
func TestChartValuesAndIdentifier(t *testing.T) {
	digest := func(raw string) string {
		t.Helper()
		src := &v1alpha1.HelmStrategySource{}
		if raw != "" {
			src.Values = &apiextensionsv1.JSON{Raw: []byte(raw)}
		}
		_, d, err := chartValues(src)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := digest(""); d != "" {
		t.Errorf("no values: digest %q, want none", d)
	}
	if d := digest("null"); d != "" {
		t.Errorf("null values: digest %q, want none", d)
	}
	a, b := digest(`{"a":1,"b":{"c":"x"}}`), digest(`{"b":{"c":"x"},"a":1}`)
	if a == "" || a != b {
		t.Errorf("the same values in another order: %q, %q", a, b)
	}
	if c := digest(`{"a":2,"b":{"c":"x"}}`); c == a {
		t.Error("other values, same digest")
	}
	if _, _, err := chartValues(&v1alpha1.HelmStrategySource{Values: &apiextensionsv1.JSON{Raw: []byte(`[1]`)}}); err == nil {
		t.Error("a values list was accepted")
	}

	base := helmspec.Options{ReleaseName: "r", Namespace: "ns", KubeVersion: "v1.36.0"}
	id := chartIdentifier("sha256:1", a, base)
	for name, other := range map[string]string{
		"chart":        chartIdentifier("sha256:2", a, base),
		"values":       chartIdentifier("sha256:1", "", base),
		"release name": chartIdentifier("sha256:1", a, helmspec.Options{ReleaseName: "s", Namespace: "ns", KubeVersion: "v1.36.0"}),
		"namespace":    chartIdentifier("sha256:1", a, helmspec.Options{ReleaseName: "r", Namespace: "ns2", KubeVersion: "v1.36.0"}),
		"kube version": chartIdentifier("sha256:1", a, helmspec.Options{ReleaseName: "r", Namespace: "ns"}),
		"skip crds":    chartIdentifier("sha256:1", a, helmspec.Options{ReleaseName: "r", Namespace: "ns", KubeVersion: "v1.36.0", SkipCRDs: true}),
	} {
		if other == id {
			t.Errorf("another %s, the same identifier %s", name, id)
		}
	}
}

// countingRenderer answers each render with err (or a result) and counts
// the renders.
type countingRenderer struct {
	calls int
	err   error
}

func (c *countingRenderer) RenderArchive(context.Context, string, []byte, map[string]any, helmspec.Options) (*helmspec.Result, error) {
	c.calls++
	if c.err != nil {
		return nil, c.err
	}
	return &helmspec.Result{Manifests: []byte("---\n"), Chart: helmspec.Chart{Name: "c", Version: "1.0.0"}}, nil
}

// A chart's render (result or error) is kept by chart digest and inputs;
// a failure of the renderer itself (its helper missing or killed) says
// nothing about the chart and is tried again at the next reconcile.
func TestRenderChartKeepsOnlyTheChartsOwnOutcome(t *testing.T) {
	a := &oci.Artifact{Reference: "oci://r/c:1", Digest: "sha256:1", Text: []byte("tgz")}
	opts := helmspec.Options{Namespace: "ns"}
	for _, tc := range []struct {
		name  string
		err   error
		calls int // after two renders
	}{
		{name: "result", calls: 1},
		{name: "chart error", err: errors.New("render chart c: template: c/templates/x.yaml:1: boom"), calls: 1},
		{name: "renderer error", err: &helmspec.RendererError{Err: errors.New("chart renderer missing")}, calls: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := &countingRenderer{err: tc.err}
			r := &Reconciler{opts: Options{HelmRenderer: fake}}
			for range 2 {
				res, err := r.renderChart(t.Context(), &v1alpha1.Installation{}, a, nil, "", opts)
				if (err != nil) != (tc.err != nil) || (err == nil && res.Chart.Name != "c") {
					t.Fatalf("render: %+v, %v; want error %v", res, err, tc.err)
				}
			}
			if fake.calls != tc.calls {
				t.Errorf("%d renders, want %d", fake.calls, tc.calls)
			}
		})
	}
}

// A chart is rendered as Helm numbers releases (helm install, then helm
// upgrade with the revision after the newest), and the rolled-out chart
// and values again with their own revision: a render after a restart
// sees the same .Release as the one that rolled out, so it renders the
// same objects.
func TestReleaseOfFollowsTheHistory(t *testing.T) {
	hist := func(revs ...v1alpha1.StrategyRevision) *v1alpha1.Installation {
		in := &v1alpha1.Installation{}
		in.Status.History = revs
		return in
	}
	for _, tc := range []struct {
		name     string
		in       *v1alpha1.Installation
		upgrade  bool
		revision int
	}{
		{"nothing rolled out: an install", hist(), false, 1},
		{"the installed chart again", hist(v1alpha1.StrategyRevision{Revision: 1, Identifier: "helm-a"}), false, 1},
		{"another chart after the install", hist(v1alpha1.StrategyRevision{Revision: 1, Identifier: "helm-b"}), true, 2},
		{"the upgraded chart again", hist(v1alpha1.StrategyRevision{Revision: 4, Identifier: "helm-a"}, v1alpha1.StrategyRevision{Revision: 3, Identifier: "helm-b"}), true, 4},
		{"back to an older chart (rollback): a new revision", hist(v1alpha1.StrategyRevision{Revision: 4, Identifier: "helm-b"}, v1alpha1.StrategyRevision{Revision: 3, Identifier: "helm-a"}), true, 5},
		{"a history without revision numbers", hist(v1alpha1.StrategyRevision{Identifier: "helm-a"}), true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			upgrade, revision := releaseOf(tc.in, "helm-a")
			if upgrade != tc.upgrade || revision != tc.revision {
				t.Fatalf("releaseOf = %t, %d; want %t, %d", upgrade, revision, tc.upgrade, tc.revision)
			}
			opts := helmspec.Options{Upgrade: upgrade, Revision: revision}
			if err := opts.Validate(); err != nil {
				t.Fatalf("the render refuses it: %v", err)
			}
		})
	}
}

// spec.strategy.helm.skipCRDs is helm install's --skip-crds: velero
// 12.1.0 (pkg/render/testdata, unedited), whose CRDs are all in crds/,
// renders through the operator's renderChart with its CRDs, and without
// any when the Installation skips them.
func TestHelmSourceSkipCRDs(t *testing.T) {
	archive, err := os.ReadFile(filepath.Join("..", "render", "testdata", "charts", "velero-12.1.0.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	crds := func(skip bool) int {
		t.Helper()
		in := &v1alpha1.Installation{Spec: v1alpha1.InstallationSpec{Strategy: &v1alpha1.StrategySource{
			Helm: &v1alpha1.HelmStrategySource{Chart: "oci://r/velero:12.1.0", ReleaseName: "demo", SkipCRDs: skip}}}}
		in.Namespace = "velero"
		opts := renderOptions(in)
		if opts.SkipCRDs != skip {
			t.Fatalf("render options %+v, want SkipCRDs %t", opts, skip)
		}
		r := &Reconciler{opts: Options{HelmRenderer: render.InProcess{}}}
		res, err := r.renderChart(t.Context(), in, &oci.Artifact{Reference: "velero", Digest: "sha256:1", Text: archive}, map[string]any{}, "", opts)
		if err != nil {
			t.Fatal(err)
		}
		return bytes.Count(res.Manifests, []byte("\nkind: CustomResourceDefinition"))
	}
	if n := crds(false); n == 0 {
		t.Fatal("velero rendered without skipCRDs has no CRD")
	}
	if n := crds(true); n != 0 {
		t.Errorf("velero rendered with skipCRDs has %d CRDs, want none", n)
	}
}
