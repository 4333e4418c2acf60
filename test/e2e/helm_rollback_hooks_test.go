package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/oci/ocitest"
)

// rollbackHooksChart writes a chart of version v with one ConfigMap and a
// ConfigMap hook for each upgrade and rollback phase, each recreated by
// the run that runs it (before-hook-creation) and naming the chart version
// that ran it.
func rollbackHooksChart(t *testing.T, v string) []byte {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"Chart.yaml":               "apiVersion: v2\nname: rb\nversion: " + v + "\n",
		"templates/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: rb-config\ndata:\n  version: {{ .Chart.Version | quote }}\n",
	}
	for _, phase := range []string{"pre-upgrade", "post-upgrade", "pre-rollback", "post-rollback"} {
		files["templates/"+phase+".yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: rb-" + phase +
			"\n  annotations:\n    \"helm.sh/hook\": " + phase + "\n    \"helm.sh/hook-delete-policy\": before-hook-creation\n" +
			"data:\n  version: {{ .Chart.Version | quote }}\n"
	}
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ocitest.PackChart(t, dir)
}

// An Installation whose spec.strategy returns to a chart it rolled out
// before (recorded in status.history with the same identity and digest) is
// rolled back as helm rollback does: install 1.0.0 (no upgrade or rollback
// hook), upgrade to 2.0.0 (pre- and post-upgrade hooks, no rollback hook),
// back to 1.0.0 (pre- and post-rollback hooks; the upgrade hooks are not
// run again), with a Rollback event.
func TestHelmSourceReturnToEarlierChartRunsRollbackHooks(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	reg, _, _ := e.ociSetup(ctx, t)
	src := func(v string) *v1alpha1.HelmStrategySource {
		ref := reg.Ref("charts/rb:" + v)
		digest := ocitest.PushChart(t, rollbackHooksChart(t, v), ref)
		return &v1alpha1.HelmStrategySource{Chart: ref, Digest: digest, ReleaseName: "rb", KubeVersion: "v1.36.3"}
	}
	v1, v2 := src("1.0.0"), src("2.0.0")
	// hooks is the chart version and UID of each hook ConfigMap present.
	hooks := func() map[string]string {
		t.Helper()
		out := map[string]string{}
		for _, phase := range []string{"pre-upgrade", "post-upgrade", "pre-rollback", "post-rollback"} {
			var cm corev1.ConfigMap
			err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "rb-" + phase}, &cm)
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			out[phase] = cm.Data["version"] + " " + string(cm.UID)
		}
		return out
	}
	// version and uid read an entry of hooks ("" when absent).
	version := func(s string) string { v, _, _ := strings.Cut(s, " "); return v }
	uid := func(s string) types.UID { _, u, _ := strings.Cut(s, " "); return types.UID(u) }

	e.create(ctx, t, "rb", v1alpha1.InstallationSpec{Strategy: &v1alpha1.StrategySource{Helm: v1}, UninstallStrategy: v1alpha1.UninstallRemoveWorkloads})
	e.waitDeployed(ctx, t, "rb", "1.0.0")
	if h := hooks(); len(h) != 0 {
		t.Fatalf("the install ran upgrade or rollback hooks: %v", h)
	}

	e.update(ctx, t, "rb", func(in *v1alpha1.Installation) { in.Spec.Strategy.Helm = v2 })
	e.waitDeployed(ctx, t, "rb", "2.0.0")
	upgraded := hooks()
	if len(upgraded) != 2 || version(upgraded["pre-upgrade"]) != "2.0.0" || version(upgraded["post-upgrade"]) != "2.0.0" {
		t.Fatalf("the upgrade to 2.0.0: hooks %v, want pre-upgrade and post-upgrade of 2.0.0 only", upgraded)
	}

	e.update(ctx, t, "rb", func(in *v1alpha1.Installation) {
		in.Spec.Strategy.Helm = v1
		in.Spec.AllowDowngrade = true
	})
	e.waitDeployed(ctx, t, "rb", "1.0.0")
	back := hooks()
	for _, phase := range []string{"pre-rollback", "post-rollback"} {
		if version(back[phase]) != "1.0.0" {
			t.Errorf("the return to 1.0.0 did not run its %s hook: hooks %v", phase, back)
		}
	}
	for _, phase := range []string{"pre-upgrade", "post-upgrade"} {
		if back[phase] == "" || uid(back[phase]) != uid(upgraded[phase]) || version(back[phase]) != "2.0.0" {
			t.Errorf("the return to 1.0.0 ran the %s hook again: %s, was %s", phase, back[phase], upgraded[phase])
		}
	}
	// The history records the rollback as a new revision, as helm
	// rollback does (recorded after the status says Deployed).
	if err := pollInstallation(ctx, e, "rb", func(in *v1alpha1.Installation) bool {
		return len(in.Status.History) == 3 && in.Status.History[0].Version == "1.0.0" && in.Status.History[0].Revision == 3
	}); err != nil {
		in, _ := e.get(ctx, "rb")
		t.Errorf("history after the rollback: %v; %+v, want revision 3 of 1.0.0 at its head", err, in.Status.History)
	}
	testenv.WaitFor(ctx, t, "Rollback event", func(ctx context.Context) (bool, string, error) {
		events, err := e.env.Kube.CoreV1().Events(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		var seen []string
		for _, ev := range events.Items {
			if strings.Contains(ev.Message, "rolling back from 2.0.0 to 1.0.0") {
				return true, "", nil
			}
			seen = append(seen, ev.Reason+": "+ev.Message)
		}
		return false, fmt.Sprintf("events %v", seen), nil
	})
}
