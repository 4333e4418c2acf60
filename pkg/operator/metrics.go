package operator

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/loader"
)

// Metrics are the operator's Prometheus metrics.
type Metrics struct {
	// Reconciles counts reconciles by outcome (see Outcomes).
	Reconciles *prometheus.CounterVec
	// Phase is 1 for the current phase of each Installation, 0 for the
	// others.
	Phase *prometheus.GaugeVec
	// Objects counts objects applied (by action) and pruned, by kind.
	Objects *prometheus.CounterVec
	// RolloutSeconds is the duration of engine.Run calls that rolled a
	// new strategy out.
	RolloutSeconds *prometheus.HistogramVec
	// ReconcileSeconds is the duration of reconciles, by outcome.
	ReconcileSeconds *prometheus.HistogramVec
	// StrategyLoads counts where loaded strategies came from (see
	// LoadSources).
	StrategyLoads *prometheus.CounterVec
	// UntrustedStrategies counts strategy ConfigMaps named by an
	// Installation that the trust policy refused (source "configmap").
	// Untrusted stored copies of the operator's own strategies are not
	// counted: they are skipped and regenerated.
	UntrustedStrategies *prometheus.CounterVec
}

// LoadSources are the values of the strategy load counter's source label:
// the loader's memory cache, a stored ConfigMap found by identity
// ("store"), a ConfigMap named by the Installation ("configmap"), the
// operator's own product (generated, or found stored: "product"), and
// "job" for each reconcile that waited on a dump Job.
var LoadSources = []string{string(loader.SourceCache), string(loader.SourceStore), "configmap", "product", "job"}

var (
	defaultMetrics     *Metrics
	defaultMetricsOnce sync.Once
)

// DefaultMetrics returns the metrics registered once in controller-runtime's
// metrics.Registry (served by the manager's metrics server).
func DefaultMetrics() *Metrics {
	defaultMetricsOnce.Do(func() {
		defaultMetrics = NewMetrics()
		defaultMetrics.MustRegister(metrics.Registry)
	})
	return defaultMetrics
}

// Outcomes are the values of the reconcile counter's outcome label.
var Outcomes = []string{"deployed", "pending", "degraded", "inactive", "blocked", "deleted", "error"}

// NewMetrics returns unregistered metrics; the reconcile counter starts at
// zero for every outcome, so it is served before the first reconcile.
func NewMetrics() *Metrics {
	m := newMetrics()
	for _, o := range Outcomes {
		m.Reconciles.WithLabelValues(o)
	}
	for _, src := range LoadSources {
		m.StrategyLoads.WithLabelValues(src)
	}
	m.UntrustedStrategies.WithLabelValues("configmap")
	return m
}

func newMetrics() *Metrics {
	return &Metrics{
		Reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "installstrategy_reconcile_total",
			Help: "Reconciles of Installations by outcome.",
		}, []string{"outcome"}),
		Phase: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "installstrategy_installation_phase",
			Help: "1 for the current phase of an Installation, 0 for the other phases.",
		}, []string{"namespace", "name", "phase"}),
		Objects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "installstrategy_objects_total",
			Help: "Strategy objects written by action (create, update, recreate, unchanged, skip, conflict, delete), by kind.",
		}, []string{"kind", "action"}),
		RolloutSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "installstrategy_rollout_duration_seconds",
			Help:    "Duration of rollouts of a new strategy, by outcome.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12),
		}, []string{"outcome"}),
		ReconcileSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "installstrategy_reconcile_duration_seconds",
			Help:    "Duration of reconciles of Installations, by outcome.",
			Buckets: prometheus.ExponentialBuckets(0.01, 3, 10),
		}, []string{"outcome"}),
		StrategyLoads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "installstrategy_strategy_loads_total",
			Help: "Strategies loaded, by source (cache, store, configmap, product; job counts reconciles that waited on a dump Job).",
		}, []string{"source"}),
		UntrustedStrategies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "installstrategy_untrusted_strategies_total",
			Help: "Strategies refused by the trust policy (not signed by a trusted key, digest not pinned), by source.",
		}, []string{"source"}),
	}
}

// MustRegister registers the metrics with r.
func (m *Metrics) MustRegister(r prometheus.Registerer) {
	r.MustRegister(m.Reconciles, m.Phase, m.Objects, m.RolloutSeconds, m.ReconcileSeconds, m.StrategyLoads, m.UntrustedStrategies)
}

var phases = []v1alpha1.InstallationPhase{v1alpha1.PhaseDeploying, v1alpha1.PhaseDeployed, v1alpha1.PhaseDeleting, v1alpha1.PhaseDeleted, v1alpha1.PhaseFailed}

func (m *Metrics) setPhase(namespace, name string, phase v1alpha1.InstallationPhase) {
	for _, p := range phases {
		v := 0.0
		if p == phase {
			v = 1
		}
		m.Phase.WithLabelValues(namespace, name, string(p)).Set(v)
	}
}

func (m *Metrics) forget(namespace, name string) {
	for _, p := range phases {
		m.Phase.DeleteLabelValues(namespace, name, string(p))
	}
}
