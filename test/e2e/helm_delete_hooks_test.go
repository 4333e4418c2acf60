package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/oci/ocitest"
	"github.com/installstrategy/installstrategy/pkg/operator"
)

// Deleting an Installation with a Helm source runs the chart's pre-delete
// hook (pkg/render's hooks chart: a pre-delete ConfigMap hooks-goodbye,
// which Helm, and so the operator, leaves after the uninstall) from the
// strategy it last applied, loaded again through its trust decision: the
// chart at its pinned digest. When the chart under the reference was
// replaced meanwhile (the pinned digest no longer matches), the deletion
// removes the product as before but runs no hook, and says so in a
// DeleteHooksSkipped event.
func TestHelmSourceDeletionRunsDeleteHooks(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	reg, _, _ := e.ociSetup(ctx, t)
	hooks := ocitest.PackChart(t, filepath.Join(renderTestdata, "hooks"))
	ref := reg.Ref("charts/hooks:1.2.3")
	install := func(name string) {
		t.Helper()
		digest := ocitest.PushChart(t, hooks, ref)
		src := &v1alpha1.HelmStrategySource{Chart: ref, Digest: digest, ReleaseName: "hooks", KubeVersion: "v1.36.3"}
		e.create(ctx, t, name, v1alpha1.InstallationSpec{Strategy: &v1alpha1.StrategySource{Helm: src}, UninstallStrategy: v1alpha1.UninstallRemoveWorkloads})
		e.waitDeployed(ctx, t, name, "1.2.3")
		if !e.exists(ctx, t, &corev1.ConfigMap{}, "hooks-config") {
			t.Fatal("the chart's ConfigMap hooks-config is missing")
		}
	}
	event := func(reason, what string) {
		t.Helper()
		testenv.WaitFor(ctx, t, reason+" event", func(ctx context.Context) (bool, string, error) {
			events, err := e.env.Kube.CoreV1().Events(e.ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, "", err
			}
			var seen []string
			for _, ev := range events.Items {
				if ev.Reason == reason && strings.Contains(ev.Message, what) {
					return true, "", nil
				}
				seen = append(seen, ev.Reason+": "+ev.Message)
			}
			return false, fmt.Sprintf("events %v", seen), nil
		})
	}

	// The chart under the pinned reference replaced: no hook runs.
	install("hooks")
	ocitest.PushChart(t, ocitest.PackChart(t, filepath.Join(renderTestdata, "lookup")), ref)
	e.deleteInstallation(ctx, t, "hooks")
	e.waitGone(ctx, t, "hooks")
	event(operator.ReasonDeleteHooksSkipped, "pinned digest")
	if e.exists(ctx, t, &corev1.ConfigMap{}, "hooks-goodbye") {
		t.Fatal("a pre-delete hook ran from a chart that is not the one applied")
	}
	if e.exists(ctx, t, &corev1.ConfigMap{}, "hooks-config") {
		t.Fatal("hooks-config outlived the deleted installation")
	}

	// The chart as applied (installed again under the same name: its
	// pre-install Job, left by Helm's default delete policy, is the
	// installation's to replace): its pre-delete hook runs, and stays.
	install("hooks")
	e.deleteInstallation(ctx, t, "hooks")
	e.waitGone(ctx, t, "hooks")
	event(operator.ReasonDeleteHooks, "ConfigMap/"+e.ns+"/hooks-goodbye (pre-delete)")
	if !e.exists(ctx, t, &corev1.ConfigMap{}, "hooks-goodbye") {
		t.Fatal("the chart's pre-delete hook hooks-goodbye did not run")
	}
	if e.exists(ctx, t, &corev1.ConfigMap{}, "hooks-config") {
		t.Fatal("hooks-config outlived the deleted installation")
	}
}
