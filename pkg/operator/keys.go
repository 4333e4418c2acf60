package operator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	crreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/installstrategy/installstrategy/pkg/trust"
)

// keyWatches watch the two objects of the key namespace that decide what
// is trusted, the operator's key Secret and the trusted keys ConfigMap,
// through a cache of their own that holds nothing else. A change of
// either reconciles every Installation at once; a change of the Secret
// (a rotation, a retired key removed: a revocation) also replaces the key
// the operator holds. No restart is needed.
func (r *Reconciler) keyWatches(mgr ctrl.Manager) ([]source.Source, error) {
	ns := r.opts.KeyNamespace
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultNamespaces: map[string]cache.Config{ns: {}},
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}:    {Field: fields.OneTermEqualSelector("metadata.name", trust.OperatorKeySecret)},
			&corev1.ConfigMap{}: {Field: fields.OneTermEqualSelector("metadata.name", trust.TrustedKeysConfigMap)},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("key namespace cache: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return nil, fmt.Errorf("key namespace cache: %w", err)
	}
	r.keyCache = c
	enqueueAll := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[crreconcile.Request]) {
		for _, req := range r.allInstallations(ctx) {
			q.Add(req)
		}
	}
	// The key Secret: its content replaces the key held at once (no
	// moment without a key: a reconcile signing meanwhile uses the old
	// one or the new one). Its creation (the operator's own, on first
	// start, or the informer's first list) re-judges nothing.
	keySecret := handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, _ workqueue.TypedRateLimitingInterface[crreconcile.Request]) {
			r.replaceKey(e.Object)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[crreconcile.Request]) {
			if r.replaceKey(e.ObjectNew) {
				enqueueAll(ctx, q)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[crreconcile.Request]) {
			r.keyMu.Lock()
			r.keyStale = true
			r.keyMu.Unlock()
			enqueueAll(ctx, q)
		},
	}
	// The trusted keys: any change after the operator started re-judges
	// every Installation (the informer's first list does not: the first
	// reconciles read the keys anyway).
	trustedKeys := handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[crreconcile.Request]) {
			if !e.Object.GetCreationTimestamp().Time.Before(r.started.Truncate(time.Second)) {
				enqueueAll(ctx, q)
			}
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[crreconcile.Request]) {
			enqueueAll(ctx, q)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[crreconcile.Request]) {
			enqueueAll(ctx, q)
		},
	}
	return []source.Source{
		source.Kind[client.Object](c, &corev1.Secret{}, keySecret),
		source.Kind[client.Object](c, &corev1.ConfigMap{}, trustedKeys),
	}, nil
}

// replaceKey makes the key of a key Secret the one the operator holds; it
// reports whether that changed the key (a Secret it cannot read leaves the
// held key, marked to be read again).
func (r *Reconciler) replaceKey(o client.Object) bool {
	sec, ok := o.(*corev1.Secret)
	if !ok {
		return false
	}
	k, err := trust.OperatorKeyOf(sec)
	r.keyMu.Lock()
	defer r.keyMu.Unlock()
	if err != nil {
		r.keyStale = true
		return true
	}
	changed := r.key == nil || r.key.Signer.KeyID() != k.Signer.KeyID() || r.key.Keys.Len() != k.Keys.Len()
	r.key, r.keyStale = k, false
	return changed
}

// allInstallations lists every Installation the operator watches.
func (r *Reconciler) allInstallations(ctx context.Context) []crreconcile.Request {
	return r.requests(ctx, "")
}

// ErrKeyNamespaceWatched: the operator's key namespace is one it watches,
// so ConfigMap editors there would choose the keys it trusts.
var ErrKeyNamespaceWatched = errors.New("the key namespace must not be a watched namespace")

// CheckKeyNamespace refuses a key namespace that is one of the watched
// namespaces (watched empty: every namespace, which then must exclude the
// key namespace from its watch, see ExcludeKeyNamespace).
func CheckKeyNamespace(keyNamespace string, watched []string, excluded bool) error {
	if keyNamespace == "" {
		keyNamespace = DefaultKeyNamespace
	}
	if len(watched) == 0 && !excluded {
		return fmt.Errorf("key namespace %s: %w: every namespace is watched and %s is not excluded", keyNamespace, ErrKeyNamespaceWatched, keyNamespace)
	}
	if slices.Contains(watched, keyNamespace) {
		return fmt.Errorf("key namespace %s: %w (--namespace %s): give --key-namespace a namespace only cluster administrators write", keyNamespace, ErrKeyNamespaceWatched, keyNamespace)
	}
	return nil
}

// ExcludeKeyNamespace is the field selector of a cache that watches every
// namespace but the key namespace.
func ExcludeKeyNamespace(keyNamespace string) fields.Selector {
	return fields.OneTermNotEqualSelector("metadata.namespace", keyNamespace)
}
