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

// An unchanged resync writes nothing, status included: the Installation's
// resourceVersion stays the same over resyncs that found it deployed.
func TestUnchangedResyncWritesNoStatus(t *testing.T) {
	var metrics *controller.Metrics
	e := setupWith(t, func(o *controller.Options) {
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
	rv, start := in.ResourceVersion, testutil.ToFloat64(deployed)
	testenv.WaitFor(ctx, t, "two resyncs", func(context.Context) (bool, string, error) {
		n := testutil.ToFloat64(deployed)
		return n >= start+2, fmt.Sprintf("%v deployed reconciles", n), nil
	})
	in, err = e.get(ctx, "sample")
	if err != nil {
		t.Fatal(err)
	}
	if in.ResourceVersion != rv {
		t.Errorf("resyncs of a deployed Installation wrote it: resourceVersion %s -> %s; status now %s", rv, in.ResourceVersion, describe(in))
	}
}
