package operator

import (
	"context"
	"errors"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/kinds"
)

// warmer starts the live cache's informers of every kind of the kind
// table the cluster serves when the manager starts, on every replica (a
// standby that takes over has them ready), so that the first rollout
// does not start them one kind at a time. virt-operator starts its
// informers the same way.
type warmer struct{ r *Reconciler }

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (warmer) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable.
func (w warmer) Start(ctx context.Context) error {
	r := w.r
	defer close(r.warmed)
	log := ctrl.LoggerFrom(ctx).WithName("informers")
	// Until the cache has started, a read would fail.
	if !r.live.Informers().WaitForCacheSync(ctx) {
		return nil
	}
	start := time.Now()
	var gvks []schema.GroupVersionKind
	for _, info := range kinds.All() {
		_, _, err := r.applier.GroupVersionResource(info.GroupKind, info.Version)
		var notServed *apply.NotServedError
		switch {
		case errors.As(err, &notServed):
			continue
		case err != nil:
			// Discovery failed: the kinds start on their first read.
			log.Error(err, "informers start on first use", "kind", info.GroupKind)
			return nil
		}
		gvks = append(gvks, info.GroupKind.WithVersion(info.Version))
	}
	if err := r.live.Warm(ctx, gvks); err != nil && ctx.Err() == nil {
		// Not fatal: those kinds are read from the API server for a while.
		log.Error(err, "some informers did not sync")
	}
	log.Info("informers started", "kinds", len(gvks), "took", time.Since(start).Round(time.Millisecond).String())
	return nil
}

// InformersStarted is a readiness check (healthz.Checker): it fails until
// the informers of the kind table's kinds have started.
func (r *Reconciler) InformersStarted(*http.Request) error {
	select {
	case <-r.warmed:
		return nil
	default:
		return errors.New("informers of the kind table are starting")
	}
}

// Warmed is closed once the informers of the kind table's kinds have
// started (or failed to).
func (r *Reconciler) Warmed() <-chan struct{} { return r.warmed }
