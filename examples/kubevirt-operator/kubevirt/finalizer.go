package kubevirt

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
)

// FinalizerRelease removes virt-operator's finalizer
// (metakeys.KubeVirtFinalizer; KubeVirtOldFinalizer, as virt-operator
// v1.8 wrote it) from a KubeVirt the example has uninstalled. A KubeVirt that virt-operator installed and the example
// took over keeps that finalizer, and only virt-operator removes it, once
// its own uninstall is done; with virt-operator gone, the CR would never
// go. The example does what virt-operator does at the same point: when the
// KubeVirt is being deleted, the engine has released it (phase Deleted,
// the operator's own finalizer removed), and virt-operator's finalizer is
// the one left of the two, it removes it (both spellings, as
// virt-operator v1.9.0 does). Other finalizers are not its business.
type FinalizerRelease struct {
	Client client.Client
}

// Released says whether kv is uninstalled by the example and only waits
// for virt-operator's finalizer.
func Released(kv *unstructured.Unstructured) bool {
	phase, _, _ := unstructured.NestedString(kv.Object, "status", "phase")
	return kv.GetDeletionTimestamp() != nil && phase == "Deleted" && !controllerutil.ContainsFinalizer(kv, v1alpha1.Finalizer) &&
		(controllerutil.ContainsFinalizer(kv, metakeys.KubeVirtFinalizer) || controllerutil.ContainsFinalizer(kv, metakeys.KubeVirtOldFinalizer))
}

// Reconcile implements reconcile.Reconciler.
func (f FinalizerRelease) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	kv := Resource{}.New().(*unstructured.Unstructured)
	if err := f.Client.Get(ctx, req.NamespacedName, kv); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !Released(kv) {
		return reconcile.Result{}, nil
	}
	old := kv.DeepCopy()
	controllerutil.RemoveFinalizer(kv, metakeys.KubeVirtFinalizer)
	controllerutil.RemoveFinalizer(kv, metakeys.KubeVirtOldFinalizer)
	// Optimistic lock: the finalizer list of the version read, not another.
	err := f.Client.Patch(ctx, kv, client.MergeFromWithOptions(old, client.MergeFromWithOptimisticLock{}))
	return reconcile.Result{}, client.IgnoreNotFound(err)
}

// SetupWithManager runs the release as a controller of mgr.
func (f FinalizerRelease) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("kubevirt-finalizer-release").For(Resource{}.New()).Complete(f)
}
