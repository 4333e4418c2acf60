package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/operator"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// TestCRDRollbackThroughOperator: a product of our own (things v1 with a
// note, then v2, stored, adding a color) installed, upgraded and rolled
// back by an Installation pointed at each version's stored strategy. While
// a user's object holds a color, the rollback is Stalled (kstatus Failed,
// CRDChangeRefused) naming that object, and v2 runs on; once its user has
// cleared the color, the next resync rolls back: every object is migrated
// to v1, v2 leaves the CRD and status.storedVersions, and every note is
// kept.
func TestCRDRollbackThroughOperator(t *testing.T) {
	e := setup(t, withOptions(func(o *operator.Options) { o.ResyncPeriod = 2 * time.Second }))
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	group, crdName, crds := e.thingsCRD(t)
	const props = "note: {type: string}"
	texts := map[string]string{
		"v1.0.0": testenv.ThingsCRD(group, "Namespaced", props),
		"v2.0.0": testenv.ThingsCRDv2(group, props, "color: {type: string}"),
	}
	st, err := store.NewForConfig(e.env.Config, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Each version is published just before the Installation names it:
	// the operator garbage-collects stored strategies it does not use.
	spec := func(v string) v1alpha1.InstallationSpec {
		entry, err := st.PublishText(ctx, e.ns, []byte(texts[v]), strategy.Identity{Version: v})
		if err != nil {
			t.Fatalf("publish %s: %v", v, err)
		}
		s := sampleSpec(v)
		s.Strategy = &v1alpha1.StrategySource{ConfigMap: configMapSource(entry)}
		return s
	}
	things := func(version string) dynamic.ResourceInterface {
		return e.env.Dynamic.Resource(schema.GroupVersionResource{Group: group, Version: version, Resource: "things"}).Namespace(e.ns)
	}
	create := func(version, name string, spec map[string]any) {
		t.Helper()
		o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/" + version, "kind": "Thing",
			"metadata": map[string]any{"name": name}, "spec": spec}}
		testenv.WaitFor(ctx, t, "thing "+name+" written at "+version, func(ctx context.Context) (bool, string, error) {
			_, err := things(version).Create(ctx, o, metav1.CreateOptions{})
			return err == nil, fmt.Sprint(err), nil
		})
	}

	e.create(ctx, t, "things", spec("v1.0.0"))
	e.waitDeployed(ctx, t, "things", "v1.0.0")
	create("v1", "old", map[string]any{"note": "written at v1"})
	e.update(ctx, t, "things", func(in *v1alpha1.Installation) { in.Spec = spec("v2.0.0") })
	e.waitDeployed(ctx, t, "things", "v2.0.0")
	create("v2", "plain", map[string]any{"note": "written at v2"})
	create("v2", "colored", map[string]any{"note": "colored at v2", "color": "blue"})

	// The rollback, refused for the one object using the color.
	e.update(ctx, t, "things", func(in *v1alpha1.Installation) { in.Spec = spec("v1.0.0") })
	in := e.waitStalled(ctx, t, "things", "v1.0.0", v1alpha1.ReasonCRDChangeRefused)
	msg := in.Condition(v1alpha1.ConditionStalled).Message
	if !strings.Contains(msg, crdName+" v2 .spec.color: fieldRemoved") || !strings.Contains(msg, "1 stored objects affected, e.g. "+e.ns+"/colored") {
		t.Errorf("Stalled message %q does not refuse the color of %s/colored alone", msg, e.ns)
	}
	if in.Status.ObservedVersion != "v2.0.0" {
		t.Errorf("the refused rollback changed what runs: %s", describe(in))
	}

	// Its user clears the color: the next resync rolls back.
	colored, err := things("v2").Get(ctx, "colored", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	unstructured.RemoveNestedField(colored.Object, "spec", "color")
	if _, err := things("v2").Update(ctx, colored, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitDeployed(ctx, t, "things", "v1.0.0")
	crd, err := e.env.Dynamic.Resource(crds).Get(ctx, crdName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	stored, _, _ := unstructured.NestedStringSlice(crd.Object, "status", "storedVersions")
	if len(versions) != 1 || !slices.Equal(stored, []string{"v1"}) {
		t.Errorf("after the rollback: %d versions, storedVersions %v; want only v1", len(versions), stored)
	}
	// Reading an object still stored at v2 fails once v2 has left the CRD.
	list, err := things("v1").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("read the things back at v1: %v", err)
	}
	got := map[string]string{}
	for _, o := range list.Items {
		got[o.GetName()], _, _ = unstructured.NestedString(o.Object, "spec", "note")
	}
	if want := map[string]string{"old": "written at v1", "plain": "written at v2", "colored": "colored at v2"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("notes after the rollback %v, want %v", got, want)
	}
}

// thingsCRD names the group of the test's Things CRD (one per test
// namespace), the CRD's name and the CRDs' resource, and deletes the CRD
// when the test ends.
func (e *e2e) thingsCRD(t *testing.T) (group, crdName string, crds schema.GroupVersionResource) {
	group = strings.TrimPrefix(e.ns, "t-") + ".example.com"
	crdName = "things." + group
	crds = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	t.Cleanup(func() {
		_ = e.env.Dynamic.Resource(crds).Delete(context.WithoutCancel(t.Context()), crdName, metav1.DeleteOptions{})
	})
	return group, crdName, crds
}
