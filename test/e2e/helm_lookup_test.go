package e2e

import (
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/oci/ocitest"
)

// An Installation with a Helm source keeps the admin password Grafana's
// chart (unedited; kube-prometheus-stack's Grafana) generates unless its
// lookup finds the live Secret: the operator renders the upgrade to the
// next chart release (in its helper process) with the Installation's live
// objects for lookup, so the Secret keeps its password, as with helm
// upgrade. Before, each render drew a new one and the upgrade rewrote it.
func TestHelmSourceLookupKeepsGeneratedPassword(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	reg, _, _ := e.ociSetup(ctx, t)
	d14 := ocitest.PushChart(t, ocitest.PackChart(t, filepath.Join(renderTestdata, "charts", "grafana-10.5.14.tgz")), reg.Ref("charts/grafana:10.5.14"))
	d15 := ocitest.PushChart(t, ocitest.PackChart(t, filepath.Join(renderTestdata, "charts", "grafana-10.5.15.tgz")), reg.Ref("charts/grafana:10.5.15"))
	src := &v1alpha1.HelmStrategySource{Chart: reg.Ref("charts/grafana:10.5.14"), Digest: d14, ReleaseName: "grafana", KubeVersion: "v1.36.3"}
	e.create(ctx, t, "grafana", v1alpha1.InstallationSpec{Strategy: &v1alpha1.StrategySource{Helm: src}, UninstallStrategy: v1alpha1.UninstallRemoveWorkloads})
	e.waitDeployed(ctx, t, "grafana", "10.5.14")
	password := func() string {
		t.Helper()
		var s corev1.Secret
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "grafana"}, &s); err != nil {
			t.Fatal(err)
		}
		if len(s.Data["admin-password"]) == 0 {
			t.Fatalf("secret grafana has no admin-password")
		}
		return string(s.Data["admin-password"])
	}
	installed := password()

	e.update(ctx, t, "grafana", func(in *v1alpha1.Installation) {
		in.Spec.Strategy.Helm.Chart, in.Spec.Strategy.Helm.Digest = reg.Ref("charts/grafana:10.5.15"), d15
	})
	e.waitDeployed(ctx, t, "grafana", "10.5.15")
	if got := password(); got != installed {
		t.Fatalf("admin-password after the upgrade %q, want the installed %q", got, installed)
	}
}
