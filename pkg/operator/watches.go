package operator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	crreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
)

// SetupWithManager registers the reconciler with the manager: it watches
// Installations, strategy ConfigMaps of their namespaces, the workloads
// that keep pods running (kinds.PodKeepers: spec changes and deletions, for drift), the key
// Secret and trusted keys ConfigMap of the key namespace (keyWatches), and
// the dump Jobs' status (dumpJobWatch).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	n := r.opts.MaxConcurrentReconciles
	if n == 0 {
		n = 4
	}
	if err := mgr.Add(warmer{r}); err != nil {
		return fmt.Errorf("informers: %w", err)
	}
	byNamespace := handler.EnqueueRequestsFromMapFunc(r.installationsOfNamespace)
	keys, err := r.keyWatches(mgr)
	if err != nil {
		return err
	}
	dumps, err := r.dumpJobWatch(mgr, byNamespace)
	if err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(strings.ToLower(r.res.GroupVersionKind().Kind)).
		For(r.res.New(), builder.WithPredicates(r.stopDeletedRollouts(), installationChanged())).
		// Metadata only: a strategy ConfigMap's data is read, when an
		// Installation names it, through the store's bounded reads; the
		// watch only says that one changed (StrategyConfigMapsCache).
		Watches(&corev1.ConfigMap{}, byNamespace, builder.WithPredicates(r.strategyConfigMapChanged()), builder.OnlyMetadata)
	// Workloads that keep pods running are watched through the informers
	// the reconciler reads from, which hold only objects installations
	// wrote: other products' workloads cost no memory.
	for _, info := range kinds.PodKeepers() {
		b = b.WatchesRawSource(source.Kind[client.Object](r.live.Informers(), workloadObject(info.GroupVersionKind()), byNamespace, r.workloadDrift()))
	}
	return b.WatchesRawSource(keys[0]).
		WatchesRawSource(keys[1]).
		WatchesRawSource(dumps).
		WithOptions(crcontroller.Options{MaxConcurrentReconciles: n}).
		Complete(r)
}

// workloadObject is the watched object of a workload kind: unstructured,
// so that the watch shares the informer the reconciler reads from.
func workloadObject(gvk schema.GroupVersionKind) client.Object {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// stopDeletedRollouts passes every event; on the update that gives an
// Installation its deletion timestamp it cancels the Installation's
// running rollout, so that its delete stages run at once instead of after
// the rollout (whose reconcile holds the Installation's key).
func (r *Reconciler) stopDeletedRollouts() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			if e.ObjectNew != nil && e.ObjectNew.GetDeletionTimestamp() != nil && (e.ObjectOld == nil || e.ObjectOld.GetDeletionTimestamp() == nil) {
				if cancel, ok := r.rollouts.Load(e.ObjectNew.GetUID()); ok {
					cancel.(context.CancelCauseFunc)(errDeletedMidRollout)
				}
			}
			return true
		},
	}
}

// installationChanged passes spec changes, deletions and removed
// finalizers (the operator's own put back), not the operator's own status
// writes, nor the finalizer it adds itself in the reconcile that goes on
// to roll out (passing that would reconcile everything once more at once).
func installationChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			if e.ObjectOld == nil || e.ObjectNew == nil {
				return true
			}
			return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
				!e.ObjectNew.GetDeletionTimestamp().Equal(e.ObjectOld.GetDeletionTimestamp()) ||
				slices.ContainsFunc(e.ObjectOld.GetFinalizers(), func(f string) bool { return !slices.Contains(e.ObjectNew.GetFinalizers(), f) })
		},
	}
}

// strategyConfigMapChanged passes the events of strategy ConfigMaps (a
// strategy published for a waiting Installation, one tampered with or
// deleted), except the creation and deletion of those the operator
// stores or garbage-collects itself: the reconcile that writes them goes
// on from there, and another at once would load the whole strategy again.
func (r *Reconciler) strategyConfigMapChanged() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool {
			return isStrategyConfigMap(e.Object) && !r.own.seen(createKey(e.Object))
		},
		UpdateFunc: func(e event.UpdateEvent) bool { return isStrategyConfigMap(e.ObjectNew) },
		DeleteFunc: func(e event.DeleteEvent) bool {
			return isStrategyConfigMap(e.Object) && !r.own.seen(deleteKey(e.Object.GetUID()))
		},
		GenericFunc: func(e event.GenericEvent) bool { return isStrategyConfigMap(e.Object) },
	}
}

// createKey names the creation of a native strategy ConfigMap: its
// namespace and digest (its name may be generated, its UID is not known
// before the write); "" for one without a digest.
func createKey(o client.Object) string {
	d := o.GetAnnotations()[metakeys.DigestAnnotation]
	if d == "" {
		return ""
	}
	return "create " + o.GetNamespace() + " " + d
}

// deleteKey names the deletion of an object.
func deleteKey(uid types.UID) string {
	if uid == "" {
		return ""
	}
	return "delete " + string(uid)
}

// ownEvents remembers writes the operator is about to make (recorded
// before the request, so that its watch event cannot come first), so that
// their events are told from others'. Records older than ownEventsTTL
// (the write failed, its event was missed) are dropped.
type ownEvents struct {
	mu   sync.Mutex
	keys map[string]time.Time
}

const ownEventsTTL = time.Minute

// expect records a write about to be made.
func (o *ownEvents) expect(key string) {
	if key == "" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	if o.keys == nil {
		o.keys = map[string]time.Time{}
	}
	for k, at := range o.keys {
		if now.Sub(at) > ownEventsTTL {
			delete(o.keys, k)
		}
	}
	o.keys[key] = now
}

// seen reports, once, whether an event is of a write recorded by expect.
func (o *ownEvents) seen(key string) bool {
	if key == "" {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.keys[key]
	delete(o.keys, key)
	return ok
}

// StrategyConfigMapsCache is what the manager's cache holds of ConfigMaps
// (cache.Options.ByObject for &corev1.ConfigMap{}): those labelled as
// strategies (metakeys.StrategyLabel), and of each only what the watch of
// strategy ConfigMaps reads (TransformStrategyConfigMap). Anyone who may
// create ConfigMaps in a watched namespace may label them so: what they
// cost the operator must not grow with what they hold.
func StrategyConfigMapsCache() (cache.ByObject, error) {
	strategies, err := labels.Parse(metakeys.StrategyLabel)
	if err != nil {
		return cache.ByObject{}, err
	}
	return cache.ByObject{Label: strategies, Transform: TransformStrategyConfigMap}, nil
}

// maxCachedDigest bounds the digest annotation a cached strategy
// ConfigMap keeps ("sha256:" and 64 hex digits; a longer one is no digest).
const maxCachedDigest = len("sha256:") + 64

// TransformStrategyConfigMap keeps of a ConfigMap, or of its metadata,
// what the watch of strategy ConfigMaps reads (strategyConfigMapChanged):
// its name, namespace, UID, resource version, timestamps, whether it is
// labelled as a strategy, and its digest annotation. A ConfigMap's data
// (up to about 1 MiB), its other labels and annotations (up to 256 KiB)
// and its managed fields are dropped before the cache keeps it, so each
// costs the cache a few hundred bytes whatever it holds.
func TransformStrategyConfigMap(in any) (any, error) {
	o, ok := in.(client.Object)
	if !ok {
		return in, nil
	}
	keep := metav1.ObjectMeta{Name: o.GetName(), Namespace: o.GetNamespace(), UID: o.GetUID(),
		ResourceVersion: o.GetResourceVersion(), Generation: o.GetGeneration(),
		CreationTimestamp: o.GetCreationTimestamp(), DeletionTimestamp: o.GetDeletionTimestamp()}
	for _, k := range []string{metakeys.StrategyLabel, metakeys.KubeVirtStrategyLabel} {
		if v, ok := o.GetLabels()[k]; ok {
			if keep.Labels == nil {
				keep.Labels = map[string]string{}
			}
			keep.Labels[k] = v
		}
	}
	if d := o.GetAnnotations()[metakeys.DigestAnnotation]; d != "" && len(d) <= maxCachedDigest {
		keep.Annotations = map[string]string{metakeys.DigestAnnotation: d}
	}
	switch obj := in.(type) {
	case *metav1.PartialObjectMetadata:
		return &metav1.PartialObjectMetadata{TypeMeta: obj.TypeMeta, ObjectMeta: keep}, nil
	case *corev1.ConfigMap:
		return &corev1.ConfigMap{TypeMeta: obj.TypeMeta, ObjectMeta: keep}, nil
	}
	return in, nil
}

func isStrategyConfigMap(o client.Object) bool {
	l := o.GetLabels()
	_, native := l[metakeys.StrategyLabel]
	_, kv := l[metakeys.KubeVirtStrategyLabel]
	return native || kv
}

func (r *Reconciler) installationsOfNamespace(ctx context.Context, o client.Object) []crreconcile.Request {
	return r.requests(ctx, o.GetNamespace())
}
