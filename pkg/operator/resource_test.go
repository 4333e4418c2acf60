package operator

import (
	"fmt"
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/installstrategy/installstrategy/api/v1alpha1"
)

// phaseOnlyResource is an author's kind (example.com/v1 MyProduct,
// unstructured) whose status has a place for the phase only.
type phaseOnlyResource struct{}

var phaseOnlyGVK = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "MyProduct"}

func (phaseOnlyResource) GroupVersionKind() schema.GroupVersionKind { return phaseOnlyGVK }

func (phaseOnlyResource) New() client.Object {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(phaseOnlyGVK)
	return u
}

func (phaseOnlyResource) NewList() client.ObjectList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(phaseOnlyGVK.GroupVersion().WithKind("MyProductList"))
	return l
}

func (phaseOnlyResource) View(obj client.Object) (*v1alpha1.Installation, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("want unstructured, got %T", obj)
	}
	in := &v1alpha1.Installation{ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), Namespace: u.GetNamespace(), UID: u.GetUID(), Generation: u.GetGeneration()}}
	in.Spec.Version, _, _ = unstructured.NestedString(u.Object, "spec", "version")
	phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	in.Status.Phase = v1alpha1.InstallationPhase(phase)
	return in, nil
}

func (phaseOnlyResource) SetStatus(obj client.Object, view *v1alpha1.Installation) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("want unstructured, got %T", obj)
	}
	return unstructured.SetNestedField(u.Object, string(view.Status.Phase), "status", "phase")
}

func myProductObject(version, phase string) *unstructured.Unstructured {
	u := phaseOnlyResource{}.New().(*unstructured.Unstructured)
	u.SetNamespace("myproduct")
	u.SetName("mine")
	u.SetUID(types.UID("uid-1"))
	u.SetGeneration(3)
	_ = unstructured.SetNestedField(u.Object, version, "spec", "version")
	_ = unstructured.SetNestedField(u.Object, phase, "status", "phase")
	return u
}

func deployedInstallation() *v1alpha1.Installation {
	in := installation(v1alpha1.InstallationSpec{Version: "v1.2.0", Registry: "registry.example"})
	in.UID, in.Generation = "uid-0", 2
	in.Status.Phase = v1alpha1.PhaseDeployed
	in.Status.ObservedVersion = "v1.2.0"
	in.SetCondition(v1alpha1.ConditionAvailable, metav1.ConditionTrue, v1alpha1.ReasonAllComponentsReady, "ready")
	in.Status.History = []v1alpha1.StrategyRevision{{Revision: 1, Version: "v1.2.0", ConfigMap: "cm-1"}}
	return in
}

func TestInstallationResourceRoundTrip(t *testing.T) {
	res := InstallationResource()
	if gvk := res.GroupVersionKind(); gvk != v1alpha1.GroupVersion.WithKind("Installation") {
		t.Fatalf("GroupVersionKind = %v", gvk)
	}
	in := deployedInstallation()
	view, err := res.View(in)
	if err != nil {
		t.Fatal(err)
	}
	if view == in || !apiequality.Semantic.DeepEqual(view, in) {
		t.Fatalf("View is not an equal copy: %+v", view)
	}
	view.Status.Phase = v1alpha1.PhaseDeploying
	view.Spec.Version = "v9.9.9"
	if in.Status.Phase != v1alpha1.PhaseDeployed {
		t.Fatal("changing the view changed the object")
	}
	if err := res.SetStatus(in, view); err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(in.Status, view.Status) {
		t.Fatalf("status after SetStatus = %+v, want %+v", in.Status, view.Status)
	}
	if in.Spec.Version != "v1.2.0" {
		t.Fatalf("SetStatus wrote the spec: version %q", in.Spec.Version)
	}
	if _, err := res.View(myProductObject("v1", "")); err == nil {
		t.Fatal("View of another kind: no error")
	}
	if err := res.SetStatus(myProductObject("v1", ""), view); err == nil {
		t.Fatal("SetStatus of another kind: no error")
	}
}

func TestResourceWithStatus(t *testing.T) {
	t.Run("Installation", func(t *testing.T) {
		r := &Reconciler{res: installationResource{}}
		in := deployedInstallation()
		same := &v1alpha1.Installation{Status: *in.Status.DeepCopy()}
		out, changed, err := r.withStatus(in, same)
		if err != nil || changed {
			t.Fatalf("same status: changed %v, err %v", changed, err)
		}
		if out == client.Object(in) {
			t.Fatal("withStatus returned the object itself, not a copy")
		}
		other := same.DeepCopy()
		other.Status.Phase = v1alpha1.PhaseDeploying
		out, changed, err = r.withStatus(in, other)
		if err != nil || !changed {
			t.Fatalf("other phase: changed %v, err %v", changed, err)
		}
		if got := out.(*v1alpha1.Installation).Status.Phase; got != v1alpha1.PhaseDeploying {
			t.Fatalf("copy's phase = %q", got)
		}
		if in.Status.Phase != v1alpha1.PhaseDeployed {
			t.Fatal("withStatus changed the object")
		}
	})
	t.Run("custom", func(t *testing.T) {
		r := &Reconciler{res: phaseOnlyResource{}}
		obj := myProductObject("v1.0.0", string(v1alpha1.PhaseDeployed))
		view, err := r.view(obj)
		if err != nil {
			t.Fatal(err)
		}
		if view.Spec.Version != "v1.0.0" || view.Status.Phase != v1alpha1.PhaseDeployed {
			t.Fatalf("view = spec %+v, status %+v", view.Spec, view.Status)
		}
		// What the kind's status has no place for changes nothing.
		view.SetCondition(v1alpha1.ConditionAvailable, metav1.ConditionTrue, v1alpha1.ReasonAllComponentsReady, "ready")
		view.Status.History = []v1alpha1.StrategyRevision{{Revision: 1}}
		if _, changed, err := r.withStatus(obj, view); err != nil || changed {
			t.Fatalf("same phase: changed %v, err %v", changed, err)
		}
		view.Status.Phase = v1alpha1.PhaseFailed
		out, changed, err := r.withStatus(obj, view)
		if err != nil || !changed {
			t.Fatalf("other phase: changed %v, err %v", changed, err)
		}
		if got, _, _ := unstructured.NestedString(out.(*unstructured.Unstructured).Object, "status", "phase"); got != string(v1alpha1.PhaseFailed) {
			t.Fatalf("copy's status.phase = %q", got)
		}
		if got, _, _ := unstructured.NestedString(obj.Object, "status", "phase"); got != string(v1alpha1.PhaseDeployed) {
			t.Fatalf("withStatus changed the object: status.phase %q", got)
		}
	})
}

func TestResourceRef(t *testing.T) {
	in := deployedInstallation()
	if got := (&Reconciler{res: installationResource{}}).ref(in); got != in {
		t.Fatalf("Installation: ref = %T, want the Installation itself", got)
	}
	obj := myProductObject("v1.0.0", "")
	r := &Reconciler{res: phaseOnlyResource{}}
	view, err := r.view(obj)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := r.ref(view).(*metav1.PartialObjectMetadata)
	if !ok {
		t.Fatalf("custom: ref = %T, want *metav1.PartialObjectMetadata", r.ref(view))
	}
	if p.APIVersion != "example.com/v1" || p.Kind != "MyProduct" {
		t.Fatalf("ref's type = %s %s", p.APIVersion, p.Kind)
	}
	if p.GroupVersionKind() != phaseOnlyGVK {
		t.Fatalf("ref's GVK = %v", p.GroupVersionKind())
	}
	if p.Namespace != "myproduct" || p.Name != "mine" || p.UID != "uid-1" {
		t.Fatalf("ref's metadata = %s/%s %s", p.Namespace, p.Name, p.UID)
	}
}

// A view whose metadata is not the object's is refused.
func TestResourceViewMetadata(t *testing.T) {
	r := &Reconciler{res: renamingResource{}}
	if _, err := r.view(myProductObject("v1", "")); err == nil {
		t.Fatal("view with another name: no error")
	}
}

type renamingResource struct{ phaseOnlyResource }

func (renamingResource) View(obj client.Object) (*v1alpha1.Installation, error) {
	in, err := phaseOnlyResource{}.View(obj)
	if err == nil {
		in.Name += "-other"
	}
	return in, err
}
