package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	crreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// keyWatches watch the two objects of the key namespace that decide what
// is trusted, the operator's key Secret and the trusted keys ConfigMap,
// through a cache of their own that holds nothing else. A change of
// either reconciles every Installation at once; a change of the Secret
// (a rotation, a retired key removed: a revocation) also drops the key
// the operator holds, so the next load reads it again. No restart is
// needed.
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
	all := func(drop bool) handler.EventHandler {
		return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []crreconcile.Request {
			if drop {
				r.keyMu.Lock()
				r.key = nil
				r.keyMu.Unlock()
			}
			return r.allInstallations(ctx)
		})
	}
	return []source.Source{
		source.Kind[client.Object](c, &corev1.Secret{}, all(true)),
		source.Kind[client.Object](c, &corev1.ConfigMap{}, all(false)),
	}, nil
}

// allInstallations lists every Installation the operator watches.
func (r *Reconciler) allInstallations(ctx context.Context) []crreconcile.Request {
	var list v1alpha1.InstallationList
	if err := r.client.List(ctx, &list); err != nil {
		return nil
	}
	out := make([]crreconcile.Request, 0, len(list.Items))
	for _, in := range list.Items {
		out = append(out, crreconcile.Request{NamespacedName: client.ObjectKeyFromObject(&in)})
	}
	return out
}
