package v1alpha1_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/testenv"
)

// A new Installation, before any operator wrote its status, is InProgress
// for kstatus (Flux's wait, Helm 4's --wait): the CRD defaults
// status.observedGeneration to 0, which is not its generation. Without the
// default it has neither observedGeneration nor conditions, and kstatus
// calls it Current the moment it is created.
func TestNewInstallationIsInProgressForKstatus(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := testenv.New(t)
	c := installCRD(ctx, t, env)
	ns := env.Namespace(ctx, t)
	in := &v1alpha1.Installation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fresh"}}
	if err := c.Create(ctx, in); err != nil {
		t.Fatal(err)
	}
	gvr := v1alpha1.GroupVersion.WithResource("installations")
	for _, read := range []struct {
		name string
		get  func() (*unstructured.Unstructured, error)
	}{
		{"get", func() (*unstructured.Unstructured, error) {
			return env.Dynamic.Resource(gvr).Namespace(ns).Get(ctx, "fresh", metav1.GetOptions{})
		}},
		{"list", func() (*unstructured.Unstructured, error) {
			l, err := env.Dynamic.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil || len(l.Items) != 1 {
				t.Fatalf("list: %v, %d items", err, len(l.Items))
			}
			return &l.Items[0], nil
		}},
	} {
		u, err := read.get()
		if err != nil {
			t.Fatal(err)
		}
		og, found, err := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		if err != nil || !found || og != 0 {
			t.Errorf("%s: status.observedGeneration = %d (found %v, %v), want 0", read.name, og, found, err)
		}
		res, err := kstatus.Compute(u)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != kstatus.InProgressStatus {
			t.Errorf("%s: kstatus of a new installation = %s (%s), want InProgress", read.name, res.Status, res.Message)
		}
	}
}
