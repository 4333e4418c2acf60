package engine_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// Every upgrade runs the upgrade hooks, as every helm upgrade does: also
// one to a strategy of the same identity that differs only in a release
// object (a chart encoded again with other values and no new
// --identifier), and again at the next version; a re-run of the strategy
// applied runs none. A hook without a delete policy is deleted before it
// is created again (Helm's default before-hook-creation): its Job is a
// new one, with a new UID, at each upgrade.
func TestEveryUpgradeRunsTheUpgradeHooks(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	strategyOf := func(version, value string) *strategy.Strategy {
		app := configMapObject(ns, "app")
		_ = unstructured.SetNestedField(app.Object, value, "data", "v")
		return hookStrategy(version, app,
			asHook(hookJob(ns, "migrate", nil), "pre-install,pre-upgrade", "", ""),
			asHook(configMapObject(ns, "upgraded"), "post-upgrade", "", ""))
	}
	var log hookLog
	opts := engine.Options{Owner: inventory.Owner{Namespace: ns, Name: "hooks"}, StageDeadline: 2 * time.Minute, OnEvent: log.on}
	uid := func() types.UID {
		t.Helper()
		job, err := env.Kube.BatchV1().Jobs(ns).Get(ctx, "migrate", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if job.Status.Succeeded != 1 {
			t.Errorf("hook Job status %+v, want it completed", job.Status)
		}
		return job.UID
	}
	step := func(what string, s *strategy.Strategy, want ...string) {
		t.Helper()
		if _, err := engine.Run(ctx, env.Config, s, opts); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := hooksOnly(log.take()); !slices.Equal(got, want) {
			t.Fatalf("%s:\n%s\nwant:\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}

	step("install", strategyOf("v1", "a"), "hook pre-install apply Job/migrate", "release apply ConfigMap/app")
	installed := uid()
	upgrade := []string{"hook pre-upgrade delete Job/migrate", "hook pre-upgrade apply Job/migrate", "release apply ConfigMap/app", "hook post-upgrade apply ConfigMap/upgraded"}
	step("an upgrade of the same identity, another value", strategyOf("v1", "b"), upgrade...)
	upgraded := uid()
	if upgraded == installed {
		t.Error("the upgrade's hook Job is the install's: not deleted before it was created again")
	}
	step("the same strategy again", strategyOf("v1", "b"), "release apply ConfigMap/app")
	upgrade[3] = "hook post-upgrade delete ConfigMap/upgraded"
	upgrade = slices.Insert(upgrade, 4, "hook post-upgrade apply ConfigMap/upgraded")
	step("an upgrade to the next version", strategyOf("v2", "b"), upgrade...)
	if uid() == upgraded {
		t.Error("the second upgrade's hook Job is the first's")
	}
}
