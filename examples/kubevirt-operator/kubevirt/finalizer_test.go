package kubevirt

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
)

// TestFinalizerRelease: virt-operator's finalizer goes only from a
// KubeVirt being deleted that the engine has released (the cluster test
// is TestVirtOperatorInstallTakenOverOnRealNode, whose cleanup waits for
// the CR virt-operator made to go).
func TestFinalizerRelease(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		name       string
		deleting   bool
		phase      string
		finalizers []string
		wantGone   bool
		want       []string
	}{
		{"released", true, "Deleted", []string{metakeys.KubeVirtFinalizer}, true, nil},
		{"released, virt-operator v1.8's finalizer", true, "Deleted", []string{metakeys.KubeVirtOldFinalizer}, true, nil},
		{"released, another finalizer stays", true, "Deleted", []string{metakeys.KubeVirtFinalizer, "other.example/keep"}, false, []string{"other.example/keep"}},
		{"uninstall not done", true, "Deleting", []string{metakeys.KubeVirtFinalizer}, false, []string{metakeys.KubeVirtFinalizer}},
		{"the engine's finalizer still there", true, "Deleted", []string{v1alpha1.Finalizer, metakeys.KubeVirtFinalizer}, false, []string{v1alpha1.Finalizer, metakeys.KubeVirtFinalizer}},
		{"not being deleted", false, "Deployed", []string{metakeys.KubeVirtFinalizer}, false, []string{metakeys.KubeVirtFinalizer}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kv := deployedKV("", tc.phase)
			kv.SetFinalizers(tc.finalizers)
			if tc.deleting {
				kv.SetDeletionTimestamp(&now)
			}
			c := fakeKubeVirt(t, kv)
			key := types.NamespacedName{Namespace: "kubevirt", Name: "kubevirt"}
			if _, err := (FinalizerRelease{Client: c}).Reconcile(t.Context(), reconcile.Request{NamespacedName: key}); err != nil {
				t.Fatal(err)
			}
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(GVK)
			err := c.Get(t.Context(), client.ObjectKey(key), got)
			if tc.wantGone {
				if !apierrors.IsNotFound(err) {
					t.Fatalf("want the KubeVirt gone, got %v (finalizers %v)", err, got.GetFinalizers())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fs := got.GetFinalizers(); len(fs) != len(tc.want) || (len(fs) > 0 && fs[0] != tc.want[0]) {
				t.Errorf("finalizers %v, want %v", fs, tc.want)
			}
		})
	}
}
