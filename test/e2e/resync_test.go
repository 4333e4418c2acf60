package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/installstrategy/installstrategy/internal/controller"
	"github.com/installstrategy/installstrategy/internal/testenv"
)

// An unchanged resync writes nothing, status included: over resyncs that
// found the Installation deployed, the operator sends no write request at
// all. (A resourceVersion cannot show it: the API server keeps it for an
// update that changes nothing.)
func TestUnchangedResyncWritesNoStatus(t *testing.T) {
	var metrics *controller.Metrics
	e, rec := setupRecorded(t, func(o *controller.Options) {
		o.ResyncPeriod = 2 * time.Second
		metrics = o.Metrics
	})
	ctx := t.Context()
	e.create(ctx, t, "sample", sampleSpec("v1.0.0"))
	in := e.waitDeployed(ctx, t, "sample", "v1.0.0")
	deployed := metrics.Reconciles.WithLabelValues("deployed")
	// Let the reconcile that found the rollout done settle, then watch
	// two more.
	testenv.WaitFor(ctx, t, "a resync after deployed", func(context.Context) (bool, string, error) {
		return testutil.ToFloat64(deployed) >= 1, "", nil
	})
	in, err := e.get(ctx, "sample")
	if err != nil {
		t.Fatal(err)
	}
	rec.Reset()
	rv, start := in.ResourceVersion, testutil.ToFloat64(deployed)
	testenv.WaitFor(ctx, t, "two resyncs", func(context.Context) (bool, string, error) {
		n := testutil.ToFloat64(deployed)
		return n >= start+2, fmt.Sprintf("%v deployed reconciles", n), nil
	})
	in, err = e.get(ctx, "sample")
	if err != nil {
		t.Fatal(err)
	}
	if w := rec.Writes(); len(w) != 0 {
		t.Errorf("resyncs of a deployed Installation sent %d writes: %v", len(w), w)
	}
	if in.ResourceVersion != rv {
		t.Errorf("resyncs of a deployed Installation wrote it: resourceVersion %s -> %s; status now %s", rv, in.ResourceVersion, describe(in))
	}
}
