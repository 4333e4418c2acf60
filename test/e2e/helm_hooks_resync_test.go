package e2e

import (
	"path/filepath"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/oci/ocitest"
)

// The operator runs a Helm source's hooks once per strategy: pkg/render's
// hooks chart (a pre-install,pre-upgrade Job, before-hook-creation) runs
// its Job at the install, not again on resyncs of the deployed strategy
// (the Job keeps its UID), and again, as a new Job, at an upgrade to
// other values, as helm upgrade runs it.
func TestHelmSourceHooksRunOncePerStrategy(t *testing.T) {
	e, _, metrics := setupResyncing(t)
	ctx := t.Context()
	reg, _, _ := e.ociSetup(ctx, t)
	ref := reg.Ref("charts/hooks:1.2.3")
	digest := ocitest.PushChart(t, ocitest.PackChart(t, filepath.Join(renderTestdata, "hooks")), ref)
	src := &v1alpha1.HelmStrategySource{Chart: ref, Digest: digest, ReleaseName: "hooks", KubeVersion: "v1.36.3"}
	e.create(ctx, t, "hooks", v1alpha1.InstallationSpec{Strategy: &v1alpha1.StrategySource{Helm: src}, UninstallStrategy: v1alpha1.UninstallRemoveWorkloads})
	job := func() *batchv1.Job {
		t.Helper()
		var j batchv1.Job
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "hooks-setup"}, &j); err != nil {
			t.Fatal(err)
		}
		return &j
	}
	installed := e.waitDeployed(ctx, t, "hooks", "1.2.3").Status.ObservedIdentifier
	first := job().UID

	waitResyncs(ctx, t, metrics.Reconciles.WithLabelValues("deployed"), 3)
	if uid := job().UID; uid != first {
		t.Fatalf("a resync ran the hook again: Job UID %s, was %s", uid, first)
	}

	e.update(ctx, t, "hooks", func(in *v1alpha1.Installation) {
		in.Spec.Strategy.Helm.Values = &apiextensionsv1.JSON{Raw: []byte(`{"greeting":"hello again"}`)}
	})
	if err := pollInstallation(ctx, e, "hooks", func(in *v1alpha1.Installation) bool {
		return in.IsDeployed() && in.Status.ObservedIdentifier != installed
	}); err != nil {
		in, _ := e.get(ctx, "hooks")
		t.Fatalf("upgrade: %v; %s", err, describe(in))
	}
	upgraded := job()
	if upgraded.UID == first || upgraded.Status.Succeeded != 1 {
		t.Errorf("the upgrade's pre-upgrade Job: UID %s (install's %s), status %+v: want a new one, completed", upgraded.UID, first, upgraded.Status)
	}
	waitResyncs(ctx, t, metrics.Reconciles.WithLabelValues("deployed"), 3)
	if uid := job().UID; uid != upgraded.UID {
		t.Errorf("a resync after the upgrade ran the hook again")
	}
}
