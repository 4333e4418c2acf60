package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/codec"
)

// Which Installation updates reconcile: not the operator's status writes
// nor the finalizer it adds itself; spec changes, deletions and a removed
// finalizer do.
func TestInstallationChanged(t *testing.T) {
	in := func(gen int64, finalizers ...string) *v1alpha1.Installation {
		return &v1alpha1.Installation{ObjectMeta: metav1.ObjectMeta{Name: "i", Generation: gen, Finalizers: finalizers}}
	}
	deleting := in(1, v1alpha1.Finalizer)
	deleting.DeletionTimestamp = &metav1.Time{}
	for _, tt := range []struct {
		why      string
		old, new *v1alpha1.Installation
		want     bool
	}{
		{"status only", in(1), in(1), false},
		{"a finalizer added", in(1), in(1, v1alpha1.Finalizer), false},
		{"a finalizer removed", in(1, v1alpha1.Finalizer, "other"), in(1, "other"), true},
		{"the spec changed", in(1), in(2), true},
		{"deletion", in(1, v1alpha1.Finalizer), deleting, true},
	} {
		if got := installationChanged().Update(event.UpdateEvent{ObjectOld: tt.old, ObjectNew: tt.new}); got != tt.want {
			t.Errorf("%s: reconciles = %v, want %v", tt.why, got, tt.want)
		}
	}
}

// The creation and deletion of strategy ConfigMaps the operator writes
// itself queue no reconcile, once each; others' do, as do updates.
func TestOwnStrategyWritesQueueNoReconcile(t *testing.T) {
	r := &Reconciler{}
	p := r.strategyConfigMapChanged()
	cm := func(uid, digest string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s", UID: k8stypes.UID("uid-" + uid),
			Labels: map[string]string{codec.NativeStrategyLabel: ""}, Annotations: map[string]string{codec.NativeDigestAnnotation: digest}}}
	}
	ours, theirs := cm("1", "sha256:ours"), cm("2", "sha256:theirs")
	r.own.expect(createKey(ours))
	r.own.expect(deleteKey(ours.UID))
	if p.Create(event.CreateEvent{Object: ours}) {
		t.Error("the operator's own creation reconciles")
	}
	if !p.Create(event.CreateEvent{Object: ours}) {
		t.Error("a second creation of the same text is not the operator's: it must reconcile")
	}
	if !p.Create(event.CreateEvent{Object: theirs}) {
		t.Error("another's creation does not reconcile")
	}
	if !p.Update(event.UpdateEvent{ObjectOld: ours, ObjectNew: ours}) {
		t.Error("an update (tampering) does not reconcile")
	}
	if p.Delete(event.DeleteEvent{Object: ours}) {
		t.Error("the operator's own deletion reconciles")
	}
	if !p.Delete(event.DeleteEvent{Object: theirs}) {
		t.Error("another's deletion does not reconcile")
	}
	plain := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "settings"}}
	if p.Create(event.CreateEvent{Object: plain}) {
		t.Error("a ConfigMap that holds no strategy reconciles")
	}
}
