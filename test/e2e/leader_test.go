package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/testenv"
)

// leaseName is the operator's leader election Lease
// (cmd/installstrategy-operator).
const leaseName = "installstrategy-operator.installstrategy.io"

// acquiredLease is what controller-runtime's leader election logs when a
// replica becomes the leader.
const acquiredLease = "Successfully acquired lease"

// TestTwoReplicasOnlyLeaderWrites runs two replicas of the real operator
// with leader election. Only the leader reconciles (the other's reconcile
// and object counters stay at zero while it serves metrics); when the leader
// is SIGKILLed — no lease release — the other takes the lease over and
// carries an upgrade to the end.
func TestTwoReplicasOnlyLeaderWrites(t *testing.T) {
	e := setup(t, withoutManager())
	ns := e.ns
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()

	le := []string{"--leader-elect", "--leader-election-namespace", ns}
	replicas := []*operatorProcess{newOperatorProcess(t, "a", ns, le...), newOperatorProcess(t, "b", ns, le...)}
	for _, r := range replicas {
		r.start()
	}
	// The product goes away with its finalizer, which needs a leader.
	t.Cleanup(func() { e.removeAll(t) })
	e.dumpOnFailure(t)

	// One of them leads.
	var leader, standby *operatorProcess
	testenv.WaitFor(ctx, t, "a leader", func(ctx context.Context) (bool, string, error) {
		var leaders []*operatorProcess
		for _, r := range replicas {
			if r.logContains(acquiredLease) {
				leaders = append(leaders, r)
			}
		}
		if len(leaders) > 1 {
			t.Fatal("both replicas acquired the lease")
		}
		if len(leaders) == 1 {
			leader = leaders[0]
		}
		return leader != nil, fmt.Sprintf("%d leaders", len(leaders)), nil
	})
	// Each found its chart renderer beside its binary (as in its image).
	// The standby may still be starting when the leader has the lease:
	// wait for its line as for the leader's.
	want := "charts of Helm sources are rendered by " + helmRenderer(t).Path
	for _, r := range replicas {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		testenv.WaitFor(wctx, t, "replica "+r.name+" logs "+want, func(ctx context.Context) (bool, string, error) {
			return r.logContains(want), "", nil
		})
		cancel()
	}
	standby = replicas[0]
	if leader == standby {
		standby = replicas[1]
	}
	holder := leaseHolder(ctx, t, e)

	e.create(ctx, t, "sample", sampleSpec("v1.0.0"))
	e.waitDeployed(ctx, t, "sample", "v1.0.0")

	// The leader did the work; the standby, alive, did nothing.
	// (A reconcile's duration is observed when it returns, just after it
	// wrote the status the test waited for: wait for the counters.)
	for _, m := range []string{"installstrategy_objects_total", "installstrategy_strategy_loads_total", "installstrategy_reconcile_duration_seconds_count"} {
		waitMetricPositive(ctx, t, leader, m)
	}
	for _, m := range []string{"installstrategy_reconcile_total", "installstrategy_objects_total", "installstrategy_strategy_loads_total"} {
		if n := metric(ctx, t, standby, m); n != 0 {
			t.Errorf("standby %s: %s = %v, want 0 (only the leader may reconcile)", standby.name, m, n)
		}
	}
	if standby.logContains(acquiredLease) {
		t.Fatalf("standby %s acquired the lease while %s holds it", standby.name, leader.name)
	}

	// The leader dies without giving the lease up; the standby takes over
	// once it expires and rolls the upgrade out.
	leader.kill()
	e.update(ctx, t, "sample", func(in *v1alpha1.Installation) { in.Spec.Version = "v1.1.0" })
	testenv.WaitFor(ctx, t, "standby "+standby.name+" takes the lease over", func(ctx context.Context) (bool, string, error) {
		return standby.logContains(acquiredLease), "", nil
	})
	if h := leaseHolder(ctx, t, e); h == holder {
		t.Errorf("lease still held by %q after the takeover", h)
	}
	e.waitDeployed(ctx, t, "sample", "v1.1.0")
	checkConverged(ctx, t, e, "v1.1.0")
	waitMetricPositive(ctx, t, standby, "installstrategy_objects_total")
}

// leaseHolder returns the holder of the operator's Lease.
func leaseHolder(ctx context.Context, t *testing.T, e *e2e) string {
	t.Helper()
	var lease coordinationv1.Lease
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: leaseName}, &lease); err != nil {
		t.Fatalf("lease: %v", err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Fatalf("lease %s has no holder", leaseName)
	}
	return *lease.Spec.HolderIdentity
}

// metric waits until p's metrics endpoint answers and returns the sum of
// name's samples.
func metric(ctx context.Context, t *testing.T, p *operatorProcess, name string) float64 {
	t.Helper()
	var sum float64
	testenv.WaitFor(ctx, t, "metrics of "+p.name, func(ctx context.Context) (bool, string, error) {
		s, ok, err := p.metricSum(ctx, name, "")
		sum = s
		return ok, "", err
	})
	return sum
}

// waitMetricPositive waits until the sum of name's samples on p is above 0.
func waitMetricPositive(ctx context.Context, t *testing.T, p *operatorProcess, name string) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	testenv.WaitFor(wctx, t, name+" of "+p.name+" above 0", func(ctx context.Context) (bool, string, error) {
		s, ok, err := p.metricSum(ctx, name, "")
		return ok && s > 0, fmt.Sprintf("%v (endpoint answered: %v)", s, ok), err
	})
}
