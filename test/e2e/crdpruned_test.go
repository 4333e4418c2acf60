package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/operator"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// TestCRDPrunedThroughOperator: an Installation with pruneCRDs moves from
// v1.0.0 (a CRD and a ConfigMap) to v2.0.0 (the ConfigMap changed, no CRD)
// while a user's object is stored in the CRD: Stalled (CRDChangeRefused)
// naming the CRD, crdPruned and the object, v1.0.0 still runs and the
// ConfigMap is as it was; spec.crdSafety.allow [{crd, rule: crdPruned}]
// (the Installation CRD's enum admits it) lets v2.0.0 through, which
// deletes the CRD.
func TestCRDPrunedThroughOperator(t *testing.T) {
	e := setup(t, withOptions(func(o *operator.Options) { o.ResyncPeriod = 2 * time.Second }))
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	group, crdName, crds := e.thingsCRD(t)
	settings := func(v string) string {
		return fmt.Sprintf("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: %s}\ndata: {v: %q}\n", e.ns, v)
	}
	texts := map[string]string{
		"v1.0.0": testenv.ThingsCRD(group, "Namespaced", "note: {type: string}") + settings("1"),
		"v2.0.0": settings("2"),
	}
	st, err := store.NewForConfig(e.env.Config, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	spec := func(v string) v1alpha1.InstallationSpec {
		entry, err := st.PublishText(ctx, e.ns, []byte(texts[v]), strategy.Identity{Version: v})
		if err != nil {
			t.Fatalf("publish %s: %v", v, err)
		}
		s := sampleSpec(v)
		s.PruneCRDs = true
		s.Strategy = &v1alpha1.StrategySource{ConfigMap: configMapSource(entry)}
		return s
	}
	e.create(ctx, t, "things", spec("v1.0.0"))
	e.waitDeployed(ctx, t, "things", "v1.0.0")
	things := e.env.Dynamic.Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "things"}).Namespace(e.ns)
	user := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": "Thing",
		"metadata": map[string]any{"name": "users"}, "spec": map[string]any{"note": "precious"}}}
	if _, err := things.Create(ctx, user, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	e.update(ctx, t, "things", func(in *v1alpha1.Installation) { in.Spec = spec("v2.0.0") })
	in := e.waitStalled(ctx, t, "things", "v2.0.0", v1alpha1.ReasonCRDChangeRefused)
	msg := in.Condition(v1alpha1.ConditionStalled).Message
	if !strings.Contains(msg, crdName+": crdPruned") || !strings.Contains(msg, "1 stored objects affected, e.g. "+e.ns+"/users") {
		t.Errorf("Stalled message %q does not refuse the prune of %s for %s/users", msg, crdName, e.ns)
	}
	if in.Status.ObservedVersion != "v1.0.0" {
		t.Errorf("the refused rollout changed what runs: %s", describe(in))
	}
	cm, err := e.env.Kube.CoreV1().ConfigMaps(e.ns).Get(ctx, "settings", metav1.GetOptions{})
	if err != nil || cm.Data["v"] != "1" {
		t.Errorf("the refused rollout wrote the ConfigMap: %v, %v", cm.Data, err)
	}
	if _, err := things.Get(ctx, "users", metav1.GetOptions{}); err != nil {
		t.Errorf("the user's object after the refusal: %v", err)
	}

	// The override: v2.0.0 rolls out and the CRD goes.
	e.update(ctx, t, "things", func(in *v1alpha1.Installation) {
		in.Spec.CRDSafety = &v1alpha1.CRDSafety{Allow: []v1alpha1.CRDChangeAllowance{{CRD: crdName, Rule: "crdPruned"}}}
	})
	e.waitDeployed(ctx, t, "things", "v2.0.0")
	testenv.WaitFor(ctx, t, crdName+" deleted", func(ctx context.Context) (bool, string, error) {
		crd, err := e.env.Dynamic.Resource(crds).Get(ctx, crdName, metav1.GetOptions{})
		return apierrors.IsNotFound(err) || err == nil && crd.GetDeletionTimestamp() != nil, fmt.Sprint(err), nil
	})
}
