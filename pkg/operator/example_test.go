package operator_test

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/generate"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/operator"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// myProduct is the operator author's own kind, example.com/v1 MyProduct,
// read as unstructured: spec.version is the version to install; the status
// keeps what the reconciler needs between reconciles.
type myProduct struct{}

var myProductGVK = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "MyProduct"}

// myStatus is MyProduct's status. The phase, the observed generation and
// the observed and target identity must survive: without them every
// reconcile looks like a first install. It has no place for history or
// components: those are dropped (no rollback history; garbage collection
// keeps only the current strategy).
type myStatus struct {
	Phase              string             `json:"phase,omitempty"`
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	ObservedVersion    string             `json:"observedVersion,omitempty"`
	ObservedRegistry   string             `json:"observedRegistry,omitempty"`
	ObservedID         string             `json:"observedID,omitempty"`
	TargetVersion      string             `json:"targetVersion,omitempty"`
	TargetRegistry     string             `json:"targetRegistry,omitempty"`
	TargetID           string             `json:"targetID,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
}

func (myProduct) GroupVersionKind() schema.GroupVersionKind { return myProductGVK }

func (myProduct) New() client.Object {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(myProductGVK)
	return u
}

func (myProduct) NewList() client.ObjectList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(myProductGVK.GroupVersion().WithKind(myProductGVK.Kind + "List"))
	return l
}

// nested converts the map at u's field name into out.
func nested(u *unstructured.Unstructured, name string, out any) error {
	m, _, err := unstructured.NestedMap(u.Object, name)
	if err != nil || m == nil {
		return err
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(m, out)
}

func (myProduct) View(obj client.Object) (*v1alpha1.Installation, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("want unstructured, got %T", obj)
	}
	in := &v1alpha1.Installation{}
	// The view's metadata is the object's: name, namespace, UID,
	// generation, finalizers, timestamps.
	if err := nested(u, "metadata", &in.ObjectMeta); err != nil {
		return nil, err
	}
	version, _, err := unstructured.NestedString(u.Object, "spec", "version")
	if err != nil {
		return nil, err
	}
	in.Spec.Version = version // no spec.strategy: Options.Product generates it
	var st myStatus
	if err := nested(u, "status", &st); err != nil {
		return nil, err
	}
	in.Status = v1alpha1.InstallationStatus{
		Phase:              v1alpha1.InstallationPhase(st.Phase),
		ObservedGeneration: st.ObservedGeneration,
		ObservedVersion:    st.ObservedVersion, ObservedRegistry: st.ObservedRegistry, ObservedIdentifier: st.ObservedID,
		TargetVersion: st.TargetVersion, TargetRegistry: st.TargetRegistry, TargetIdentifier: st.TargetID,
		Conditions: st.Conditions,
	}
	return in, nil
}

func (myProduct) SetStatus(obj client.Object, view *v1alpha1.Installation) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("want unstructured, got %T", obj)
	}
	s := view.Status
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&myStatus{
		Phase:              string(s.Phase),
		ObservedGeneration: s.ObservedGeneration,
		ObservedVersion:    s.ObservedVersion, ObservedRegistry: s.ObservedRegistry, ObservedID: s.ObservedIdentifier,
		TargetVersion: s.TargetVersion, TargetRegistry: s.TargetRegistry, TargetID: s.TargetIdentifier,
		Conditions: s.Conditions,
	})
	if err != nil {
		return err
	}
	return unstructured.SetNestedMap(u.Object, m, "status")
}

// myProductStrategy generates MyProduct's strategy in the operator binary,
// for any configuration.
func myProductStrategy(cfg *identity.Config) (*strategy.Strategy, error) {
	return generate.New(cfg, generate.Options{Product: "myproduct"}).
		ServiceAccount("myproduct-controller").
		Deployment(generate.Workload{Name: "myproduct-controller", Role: generate.RoleController}).
		Build()
}

// An operator for MyProduct: the Resource says how to read and write the
// kind, Product generates its strategy. The manager's scheme needs nothing
// for MyProduct (it is unstructured). Compile-only: it needs a cluster.
func ExampleNew() {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{})
	if err != nil {
		panic(err)
	}
	r, err := operator.New(mgr, operator.Options{
		Resource:     myProduct{},
		Product:      myProductStrategy,
		Defaults:     operator.Defaults{Version: "v1.0.0", Registry: "registry.example.com/myproduct"},
		KeyNamespace: "myproduct-operator", // the operator's own namespace
	})
	if err != nil {
		panic(err)
	}
	if err := r.SetupWithManager(mgr); err != nil {
		panic(err)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		panic(err)
	}
}
