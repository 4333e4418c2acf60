package operator

import (
	"context"
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/identity"
)

// Resource is how the reconciler reads and writes the custom resource it
// drives: the operator author's own kind (KubeVirt, CDI, MyProduct) or our
// Installation (InstallationResource).
//
// The reconciler works on a view of each object: an Installation whose
// metadata is the object's, whose spec says what to install and whose
// status is what the object's status says was done. View builds it from
// the object, SetStatus writes the view's status back into the object's
// status. Whatever the author's status has no place for (history, say) is
// lost between reconciles; the reconciler copes (no history: nothing to
// roll back to without a source, older stored strategies are collected).
type Resource interface {
	// GroupVersionKind names the kind. Events are recorded on its objects.
	GroupVersionKind() schema.GroupVersionKind
	// New returns an empty object of the kind: a typed object registered
	// in the manager's scheme, or *unstructured.Unstructured.
	New() client.Object
	// NewList returns an empty list of the kind.
	NewList() client.ObjectList
	// View returns the Installation obj asks for. Its metadata must be
	// obj's (name, namespace, UID, generation, deletion timestamp).
	View(obj client.Object) (*v1alpha1.Installation, error)
	// SetStatus writes the view's status into obj.
	SetStatus(obj client.Object, view *v1alpha1.Installation) error
}

// Configurer is implemented by a Resource whose product computes its
// deployment configuration and identifier its own way (KubeVirt's
// deployment ID). Without it, ConfigFor and identity.Native are used.
type Configurer interface {
	Config(view *v1alpha1.Installation, d Defaults) (*identity.Config, identity.Algorithm, error)
}

// InstallationResource is our own Installation kind: the view is the
// object itself.
func InstallationResource() Resource { return installationResource{} }

type installationResource struct{}

func (installationResource) GroupVersionKind() schema.GroupVersionKind {
	return v1alpha1.GroupVersion.WithKind("Installation")
}
func (installationResource) New() client.Object         { return &v1alpha1.Installation{} }
func (installationResource) NewList() client.ObjectList { return &v1alpha1.InstallationList{} }

func (installationResource) View(obj client.Object) (*v1alpha1.Installation, error) {
	in, ok := obj.(*v1alpha1.Installation)
	if !ok {
		return nil, fmt.Errorf("want an Installation, got %T", obj)
	}
	return in.DeepCopy(), nil
}

func (installationResource) SetStatus(obj client.Object, view *v1alpha1.Installation) error {
	in, ok := obj.(*v1alpha1.Installation)
	if !ok {
		return fmt.Errorf("want an Installation, got %T", obj)
	}
	view.Status.DeepCopyInto(&in.Status)
	return nil
}

// view returns the Installation view of obj, its metadata checked to be
// obj's.
func (r *Reconciler) view(obj client.Object) (*v1alpha1.Installation, error) {
	in, err := r.res.View(obj)
	if err != nil {
		return nil, fmt.Errorf("%s %s/%s: %w", r.res.GroupVersionKind().Kind, obj.GetNamespace(), obj.GetName(), err)
	}
	if in.UID != obj.GetUID() || in.Name != obj.GetName() || in.Namespace != obj.GetNamespace() {
		return nil, fmt.Errorf("%s %s/%s: the view's metadata is not the object's", r.res.GroupVersionKind().Kind, obj.GetNamespace(), obj.GetName())
	}
	return in, nil
}

// list returns the views of the kind's objects (in one namespace, or all
// with ""). Objects whose view fails are left out.
func (r *Reconciler) list(ctx context.Context, namespace string) ([]*v1alpha1.Installation, error) {
	l := r.res.NewList()
	var opts []client.ListOption
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	if err := r.client.List(ctx, l, opts...); err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(l)
	if err != nil {
		return nil, err
	}
	out := make([]*v1alpha1.Installation, 0, len(items))
	for _, it := range items {
		obj, ok := it.(client.Object)
		if !ok {
			continue
		}
		if in, err := r.view(obj); err == nil {
			out = append(out, in)
		}
	}
	return out, nil
}

// withStatus returns a copy of obj with the view's status written in, and
// whether that changes it.
func (r *Reconciler) withStatus(obj client.Object, view *v1alpha1.Installation) (client.Object, bool, error) {
	out, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return nil, false, fmt.Errorf("%T is not a client.Object", obj)
	}
	if err := r.res.SetStatus(out, view); err != nil {
		return nil, false, err
	}
	return out, !apiequality.Semantic.DeepEqual(obj, out), nil
}

// ref is what events are recorded on: the object the view stands for.
func (r *Reconciler) ref(in *v1alpha1.Installation) runtime.Object {
	if _, ok := r.res.(installationResource); ok {
		return in
	}
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: r.res.GroupVersionKind().GroupVersion().String(), Kind: r.res.GroupVersionKind().Kind},
		ObjectMeta: in.ObjectMeta,
	}
}

// config maps a view onto its deployment configuration and identity
// algorithm.
func (r *Reconciler) config(in *v1alpha1.Installation) (*identity.Config, identity.Algorithm, error) {
	if c, ok := r.res.(Configurer); ok {
		return c.Config(in, r.opts.Defaults)
	}
	cfg, err := ConfigFor(in, r.opts.Defaults)
	return cfg, identity.Native, err
}

// requests returns a request for each object of the kind (in one
// namespace, or all with "").
func (r *Reconciler) requests(ctx context.Context, namespace string) []crreconcile.Request {
	l := r.res.NewList()
	var opts []client.ListOption
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	if err := r.client.List(ctx, l, opts...); err != nil {
		return nil
	}
	var out []crreconcile.Request
	_ = meta.EachListItem(l, func(o runtime.Object) error {
		if m, err := meta.Accessor(o); err == nil {
			out = append(out, crreconcile.Request{NamespacedName: types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()}})
		}
		return nil
	})
	return out
}
