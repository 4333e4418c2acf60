package e2e

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/oci/ocitest"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// renderTestdata holds the charts of pkg/render's tests (upstream charts
// unedited, and a chart whose template fails).
var renderTestdata = filepath.Join("..", "..", "pkg", "render", "testdata")

// signChart signs the chart at ref with s for product and version (a
// signer may sign anything: the operator judges what was signed).
func signChart(ctx context.Context, t *testing.T, c *oci.Client, ref, product, version string, s *trust.Signer) {
	t.Helper()
	a, err := c.PullChart(ctx, ref, 0)
	if err != nil {
		t.Fatal(err)
	}
	a.Meta.Product, a.Meta.Version = product, version
	if _, err := c.Sign(ctx, a, s); err != nil {
		t.Fatal(err)
	}
}

// An Installation with a Helm source installs metallb (the upstream chart
// of pkg/render/testdata, unedited) from a chart pushed with helm's own
// push to a registry on loopback. The chart is rendered only when trusted:
// unsigned and unpinned is refused with nothing applied; pinned installs,
// and a resync writes nothing; a values change in the Installation
// upgrades; a pinned tag moved elsewhere is refused; signatures for
// another product or another version are refused, one by a trusted key
// for the product applies; a chart that fails to render reports Helm's
// error with the template's place.
func TestHelmSource(t *testing.T) {
	e, rec, metrics := setupResyncing(t)
	ctx := t.Context()
	reg, c, release := e.ociSetup(ctx, t)
	v0149 := ocitest.PackChart(t, filepath.Join(renderTestdata, "charts", "metallb-v0.14.9"))
	v0153 := ocitest.PackChart(t, filepath.Join(renderTestdata, "charts", "metallb-v0.15.3"))
	stable := reg.Ref("charts/metallb:stable")
	d0149 := ocitest.PushChart(t, v0149, stable)
	ocitest.PushChart(t, v0149, reg.Ref("charts/metallb:0.14.9"))

	src := &v1alpha1.HelmStrategySource{Chart: stable, Interval: &metav1.Duration{Duration: time.Second}, KubeVersion: "v1.36.3"}
	e.create(ctx, t, "lb", v1alpha1.InstallationSpec{Strategy: &v1alpha1.StrategySource{Helm: src},
		UninstallStrategy: v1alpha1.UninstallRemoveWorkloads, PruneCRDs: true})

	// Unsigned, unpinned: refused, nothing rendered or applied.
	e.waitUntrusted(ctx, t, "lb", "not signed")
	if e.exists(ctx, t, &appsv1.Deployment{}, "metallb-controller") {
		t.Fatal("an untrusted chart was applied")
	}
	if n := testutil.ToFloat64(metrics.UntrustedStrategies.WithLabelValues("helm")); n < 1 {
		t.Errorf("installstrategy_untrusted_strategies_total{source=helm} = %v", n)
	}

	// Pinned: installed.
	e.update(ctx, t, "lb", func(in *v1alpha1.Installation) { in.Spec.Strategy.Helm.Digest = d0149 })
	in := e.waitDeployed(ctx, t, "lb", "0.14.9")
	assertCondition(t, in, v1alpha1.ConditionAvailable, metav1.ConditionTrue, v1alpha1.ReasonAllComponentsReady)
	if st := in.Status.Strategy; st == nil || st.Source != v1alpha1.StrategySourceHelm || !strings.HasSuffix(st.Chart, "@"+d0149) || st.VerifiedBy != "pinned digest" {
		t.Fatalf("status.strategy %+v, want chart @%s, pinned digest", in.Status.Strategy, d0149)
	}
	if !e.exists(ctx, t, &appsv1.Deployment{}, "metallb-controller") || !e.exists(ctx, t, &apiextensionsv1.CustomResourceDefinition{}, "ipaddresspools.metallb.io") {
		t.Fatal("the chart's controller or its CRD is missing")
	}
	identifier := in.Status.ObservedIdentifier

	// Resyncs of the deployed chart write nothing.
	deployed := metrics.Reconciles.WithLabelValues("deployed")
	testenv.WaitFor(ctx, t, "a resync after deployed", func(context.Context) (bool, string, error) {
		return testutil.ToFloat64(deployed) >= 1, "", nil
	})
	rec.Reset()
	waitResyncs(ctx, t, deployed, 2)
	if w := rec.Writes(); len(w) != 0 {
		t.Errorf("resyncs of a deployed chart sent %d writes: %v", len(w), w)
	}

	// A values change in the Installation: another strategy, upgraded.
	e.update(ctx, t, "lb", func(in *v1alpha1.Installation) {
		in.Spec.Strategy.Helm.Values = &apiextensionsv1.JSON{Raw: []byte(`{"controller":{"logLevel":"debug"}}`)}
	})
	if err := pollInstallation(ctx, e, "lb", func(in *v1alpha1.Installation) bool {
		// The history is written after Deployed (the GC stage records
		// it), so the wait includes it.
		return in.IsDeployed() && in.Status.Strategy != nil && in.Status.Strategy.ValuesDigest != "" && in.Status.ObservedIdentifier != identifier &&
			len(in.Status.History) > 0 && in.Status.History[0].Identifier == in.Status.ObservedIdentifier
	}); err != nil {
		in, _ := e.get(ctx, "lb")
		t.Fatalf("values change: %v; %s", err, describe(in))
	}
	var dep appsv1.Deployment
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "metallb-controller"}, &dep); err != nil {
		t.Fatal(err)
	}
	if args := dep.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--log-level=debug") {
		t.Errorf("controller args %v, want --log-level=debug from the Installation's values", args)
	}
	in, _ = e.get(ctx, "lb")
	if h := in.Status.History; len(h) == 0 || h[0].Chart != in.Status.Strategy.Chart || h[0].ValuesDigest != in.Status.Strategy.ValuesDigest {
		t.Errorf("history %+v, want the chart and values at its head", in.Status.History)
	}

	// The pinned tag moves elsewhere: refused, 0.14.9 stays.
	d0153 := ocitest.PushChart(t, v0153, stable)
	in = e.waitUntrusted(ctx, t, "lb", "not the pinned digest "+d0149)
	if in.Status.ObservedVersion != "0.14.9" {
		t.Errorf("the moved tag changed the product: %s", describe(in))
	}

	// Unpinned, signed for another product, then for another version:
	// refused.
	signChart(ctx, t, c, stable, "other", "0.15.3", release)
	e.update(ctx, t, "lb", func(in *v1alpha1.Installation) { in.Spec.Strategy.Helm.Digest = "" })
	e.waitUntrusted(ctx, t, "lb", "for other 0.15.3")
	signChart(ctx, t, c, stable, "metallb", "0.15.9", release)
	e.waitUntrusted(ctx, t, "lb", "for metallb 0.15.9")
	// Signed for the product and its version, but spec.version asks for
	// another.
	signChart(ctx, t, c, stable, "metallb", "0.15.3", release)
	e.update(ctx, t, "lb", func(in *v1alpha1.Installation) { in.Spec.Version = "0.15.4" })
	in = e.waitUntrusted(ctx, t, "lb", `version "0.15.3", want "0.15.4"`)
	if in.Status.ObservedVersion != "0.14.9" {
		t.Errorf("a refused chart changed the product: %s", describe(in))
	}
	// Signed by a trusted key for the product: applied.
	e.update(ctx, t, "lb", func(in *v1alpha1.Installation) { in.Spec.Version = "" })
	in = e.waitDeployed(ctx, t, "lb", "0.15.3")
	if st := in.Status.Strategy; !strings.HasSuffix(st.Chart, "@"+d0153) || !strings.Contains(st.VerifiedBy, "release.pub") {
		t.Errorf("status.strategy %+v, want chart @%s signed by release.pub", st, d0153)
	}

	// A chart whose template fails with the Installation's values:
	// Helm's error, with the template's place.
	broken := reg.Ref("charts/broken:0.1.0")
	dBroken := ocitest.PushChart(t, ocitest.PackChart(t, filepath.Join(renderTestdata, "broken")), broken)
	e.update(ctx, t, "lb", func(in *v1alpha1.Installation) {
		in.Spec.Strategy.Helm = &v1alpha1.HelmStrategySource{Chart: broken, Digest: dBroken, Values: &apiextensionsv1.JSON{Raw: []byte(`{"settings":{"other":1}}`)}}
	})
	if err := pollInstallation(ctx, e, "lb", func(in *v1alpha1.Installation) bool {
		c := in.Condition(v1alpha1.ConditionDegraded)
		return c != nil && c.Reason == v1alpha1.ReasonStrategyLoadFailed && strings.Contains(c.Message, "broken/templates/configmap.yaml:6") && strings.Contains(c.Message, "settings.name is required")
	}); err != nil {
		in, _ := e.get(ctx, "lb")
		t.Fatalf("broken chart: %v; %s, degraded %+v", err, describe(in), in.Condition(v1alpha1.ConditionDegraded))
	}
	if in, _ := e.get(ctx, "lb"); in.Status.ObservedVersion != "0.15.3" || !e.exists(ctx, t, &appsv1.Deployment{}, "metallb-controller") {
		t.Errorf("a chart that failed to render changed the product: %s", describe(in))
	}
}
