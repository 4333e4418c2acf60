package operator

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
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
			Labels: map[string]string{metakeys.StrategyLabel: ""}, Annotations: map[string]string{metakeys.DigestAnnotation: digest}}}
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

// While a rollout runs in a namespace, changes of its workloads queue no
// reconcile (most are the rollout's own writes); at its end, one that the
// rollout did not make asks for one. Outside a rollout, a change
// reconciles at once.
func TestWorkloadDriftDuringRollout(t *testing.T) {
	r := &Reconciler{}
	p := r.workloadDrift()
	deploy := func(name string, gen int64) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("apps/v1")
		u.SetKind("Deployment")
		u.SetNamespace("ns")
		u.SetName(name)
		u.SetGeneration(gen)
		u.SetLabels(map[string]string{metakeys.ManagedByLabel: metakeys.ManagedBy, metakeys.InstallationLabel: "i"})
		return u
	}
	ref := func(name string) strategy.ObjectRef {
		return strategy.ObjectRef{Group: "apps", Kind: "Deployment", Namespace: "ns", Name: name}
	}
	update := func(name string, from, to int64) bool {
		return p.Update(event.UpdateEvent{ObjectOld: deploy(name, from), ObjectNew: deploy(name, to)})
	}
	if !update("api", 1, 2) {
		t.Fatal("a spec change outside a rollout does not reconcile")
	}
	if update("api", 2, 2) {
		t.Fatal("a status change reconciles")
	}
	foreign := deploy("x", 1)
	foreign.SetLabels(nil)
	if p.Update(event.UpdateEvent{ObjectOld: deploy("x", 1), ObjectNew: foreign}) || p.Delete(event.DeleteEvent{Object: foreign}) {
		t.Fatal("a workload of no installation reconciles")
	}

	applied := func(name string, action apply.Action, gen int64) apply.Result {
		return apply.Result{Ref: ref(name), Action: action, Generation: gen}
	}
	for _, tt := range []struct {
		why     string
		events  func()
		res     *engine.Result
		foreign string
	}{
		{"the rollout's own write", func() { update("api", 1, 2) },
			&engine.Result{Applied: []apply.Result{applied("api", apply.ActionUpdate, 2)}}, ""},
		{"a change before the rollout's write, which overwrote it", func() { update("api", 1, 2); update("api", 2, 3) },
			&engine.Result{Applied: []apply.Result{applied("api", apply.ActionUpdate, 3)}}, ""},
		{"someone's change after the rollout's write", func() { update("api", 1, 2); update("api", 2, 3) },
			&engine.Result{Applied: []apply.Result{applied("api", apply.ActionUpdate, 2)}}, "api"},
		{"someone's change of a workload found unchanged", func() { update("api", 4, 5) },
			&engine.Result{Applied: []apply.Result{applied("api", apply.ActionUnchanged, 4)}}, "api"},
		{"the rollout's prune", func() { update("old", 1, 2); p.Delete(event.DeleteEvent{Object: deploy("old", 2)}) },
			&engine.Result{Pruned: []strategy.ObjectRef{ref("old")}}, ""},
		{"the rollout's recreate (the old object's changes before do not count)", func() {
			update("api", 6, 7)
			p.Delete(event.DeleteEvent{Object: deploy("api", 7)})
		}, &engine.Result{Applied: []apply.Result{applied("api", apply.ActionRecreate, 1)}}, ""},
		{"someone's change of the recreated object", func() {
			p.Delete(event.DeleteEvent{Object: deploy("api", 7)})
			update("api", 1, 2)
		}, &engine.Result{Applied: []apply.Result{applied("api", apply.ActionRecreate, 1)}}, "api"},
		{"someone's deletion", func() { p.Delete(event.DeleteEvent{Object: deploy("api", 2)}) },
			&engine.Result{Applied: []apply.Result{applied("api", apply.ActionUpdate, 2)}}, "api"},
		{"a workload the rollout did not apply", func() { update("other", 1, 2) },
			&engine.Result{Applied: []apply.Result{applied("api", apply.ActionUpdate, 2)}}, "other"},
		{"a workload the rollout skipped", func() { update("api", 1, 2) },
			&engine.Result{Applied: []apply.Result{{Ref: ref("api"), Action: apply.ActionSkip}}}, "api"},
	} {
		stop := r.watchDrift("ns")
		tt.events()
		if r.workloadDrift().Update(event.UpdateEvent{ObjectOld: deploy("z", 1), ObjectNew: deploy("z", 2)}) {
			t.Errorf("%s: a change during the rollout reconciles at once", tt.why)
		}
		log := stop()
		delete(log.seen, ref("z"))
		got, ok := log.foreign(tt.res)
		if want := tt.foreign != ""; ok != want || ok && got != ref(tt.foreign) {
			t.Errorf("%s: foreign = %v %v, want %q", tt.why, got, ok, tt.foreign)
		}
	}
	if !update("api", 1, 2) {
		t.Error("a change after the rollout does not reconcile")
	}
}
