package engine_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/apply/applytest"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// legacyConfigMap is a ConfigMap as installstrategy v0.1 wrote it: the
// managed-by value alone named its installation, with the applied hash.
func legacyConfigMap(ns, name, managedBy string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{metakeys.ManagedByLabel: managedBy},
			Annotations: map[string]string{metakeys.AppliedHashAnnotation: "old", metakeys.InstallStrategyVersionAnnotation: "v0"}},
		Data: map[string]string{"v": "old"},
	}
}

func configMapObject(ns, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": ns}, "data": map[string]any{"v": "new"},
	}}
}

// Objects of the older labelling are migrated in place — relabelled by an
// update, never deleted and created again. An Installation's (managed-by
// "installstrategy.<ns>.<name>") are its own: the one its strategy dropped
// is pruned. The plugin's shared "installstrategy" value names no
// installation: such an object is migrated when the strategy holds it, and
// otherwise left alone.
func TestLegacyObjectsAreMigratedInPlace(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	cms := env.Kube.CoreV1().ConfigMaps(ns)
	operator := inventory.Owner{Namespace: ns, Name: "legacy", Kind: inventory.KindInstallation}
	old := inventory.LegacyManagedBy(ns, "legacy")
	for _, cm := range []*corev1.ConfigMap{
		legacyConfigMap(ns, "kept", old), legacyConfigMap(ns, "dropped", old),
		legacyConfigMap(ns, "plugin-kept", metakeys.ManagedBy), legacyConfigMap(ns, "plugin-other", metakeys.ManagedBy),
	} {
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	uid := func(name string) string {
		t.Helper()
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("configmap %s: %v", name, err)
		}
		return string(cm.UID)
	}
	keptUID, pluginUID := uid("kept"), uid("plugin-kept")

	cfg, rec := applytest.Record(env.Config)
	// observed is the version the older installstrategy installed.
	run := func(owner inventory.Owner, observed string, names ...string) *engine.Result {
		t.Helper()
		s := &strategy.Strategy{Identity: strategy.Identity{Version: "v1"}}
		for _, n := range names {
			s.Objects = append(s.Objects, configMapObject(ns, n))
		}
		res, err := engine.Run(ctx, cfg, s, engine.Options{Owner: owner, NoWait: true, Observed: strategy.Identity{Version: observed}})
		if err != nil {
			t.Fatalf("run for %s: %v", owner, err)
		}
		return res
	}
	// A fresh installation (nothing observed) has no older objects to
	// search for: no list of every kind by its legacy label.
	fresh := inventory.Owner{Namespace: ns, Name: "fresh", Kind: inventory.KindInstallation}
	run(fresh, "", "fresh-settings")
	for _, r := range rec.Reads() {
		if strings.Contains(r.Query, inventory.LegacyManagedBy(ns, "fresh")) {
			t.Errorf("a fresh install searched for legacy objects: GET %s?%s", r.Path, r.Query)
		}
	}
	res := run(operator, "v0", "kept")
	if len(res.Pruned) != 1 || res.Pruned[0].Name != "dropped" {
		t.Errorf("pruned %v, want the Installation's legacy object it dropped", res.Pruned)
	}
	cm, err := cms.Get(ctx, "kept", metav1.GetOptions{})
	if err != nil || string(cm.UID) != keptUID || !operator.Owns(cm.Labels) || cm.Data["v"] != "new" {
		t.Errorf("legacy object of the Installation not migrated in place: %v %+v", err, cm)
	}
	inv, err := inventory.NewStore(env.Kube).Get(ctx, operator)
	if err != nil || !inv.Has(strategy.ObjectRef{Kind: "ConfigMap", Namespace: ns, Name: "kept"}) {
		t.Errorf("inventory of %s: %v %+v", operator, err, inv)
	}

	plugin := inventory.Owner{Namespace: ns, Name: "cli"}
	run(plugin, "v0", "plugin-kept")
	cm, err = cms.Get(ctx, "plugin-kept", metav1.GetOptions{})
	if err != nil || string(cm.UID) != pluginUID || !plugin.Owns(cm.Labels) {
		t.Errorf("plugin legacy object not migrated in place: %v %+v", err, cm)
	}
	if cm, err := cms.Get(ctx, "plugin-other", metav1.GetOptions{}); err != nil || cm.Labels[metakeys.ManagedByLabel] != metakeys.ManagedBy {
		t.Errorf("a shared legacy object the strategy does not hold was touched: %v %+v", err, cm)
	}
	// Uninstall of the Installation removes only what is its own.
	if _, err := engine.Uninstall(ctx, env.Config, engine.UninstallOptions{Owner: operator, Wait: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(ctx, "kept", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("kept after uninstall: %v", err)
	}
	for _, n := range []string{"plugin-kept", "plugin-other"} {
		if _, err := cms.Get(ctx, n, metav1.GetOptions{}); err != nil {
			t.Errorf("uninstall of %s removed %s: %v", operator, n, err)
		}
	}
}
