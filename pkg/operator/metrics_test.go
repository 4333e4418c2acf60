package operator

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
)

func TestMetrics(t *testing.T) {
	m := DefaultMetrics()
	if DefaultMetrics() != m {
		t.Fatal("DefaultMetrics is not registered once")
	}
	m.setPhase("ns", "a", v1alpha1.PhaseDeploying)
	m.setPhase("ns", "a", v1alpha1.PhaseDeployed)
	if v := testutil.ToFloat64(m.Phase.WithLabelValues("ns", "a", "Deployed")); v != 1 {
		t.Errorf("Deployed = %v", v)
	}
	if v := testutil.ToFloat64(m.Phase.WithLabelValues("ns", "a", "Deploying")); v != 0 {
		t.Errorf("Deploying = %v", v)
	}
	m.Reconciles.WithLabelValues("deployed").Inc()
	m.Objects.WithLabelValues("Deployment", "create").Inc()
	m.RolloutSeconds.WithLabelValues("deployed").Observe(3)
	m.ReconcileSeconds.WithLabelValues("deployed").Observe(0.2)
	m.StrategyLoads.WithLabelValues("product").Inc()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, f := range families {
		found[f.GetName()] = true
	}
	for _, name := range []string{"installstrategy_reconcile_total", "installstrategy_installation_phase", "installstrategy_objects_total", "installstrategy_rollout_duration_seconds",
		"installstrategy_reconcile_duration_seconds", "installstrategy_strategy_loads_total", "installstrategy_untrusted_strategies_total"} {
		if !found[name] {
			t.Errorf("%s is not served by the manager's registry", name)
		}
	}
	m.forget("ns", "a")
	if n := testutil.CollectAndCount(m.Phase); n != 0 {
		t.Errorf("%d phase series left after forget", n)
	}
}
