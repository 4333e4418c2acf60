package e2e

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/localcluster"
	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/generate"
	"github.com/installstrategy/installstrategy/pkg/operator"
)

// envRounds returns how many rounds a loop test runs: n, or the number in
// the environment variable name (make soak raises them).
func envRounds(t *testing.T, name string, n int) int {
	if s := os.Getenv(name); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("%s=%q: want a positive number", name, s)
		}
		return v
	}
	return n
}

// faultRounds returns how many upgrades a fault test runs: n, or
// $INSTALLSTRATEGY_FAULT_ROUNDS.
func faultRounds(t *testing.T, n int) int { return envRounds(t, "INSTALLSTRATEGY_FAULT_ROUNDS", n) }

// checkPlanClean asserts that a plan of the version's strategy against the
// cluster has nothing to do: every object unchanged, nothing to prune.
func checkPlanClean(ctx context.Context, t *testing.T, e *e2e, version string) {
	t.Helper()
	_, cfg := expectedIdentity(t, e.ns, version, nil)
	s, err := generate.Sample(cfg, generate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in, err := e.get(ctx, "sample")
	if err != nil {
		t.Fatal(err)
	}
	// The operator's certificate lifetimes, so that its certificates are
	// the ones wanted.
	caLife, serverLife := in.Spec.CertificateLifetimes()
	p, err := engine.Plan(ctx, e.env.Config, s, engine.Options{Owner: operator.Owner(in), Observed: s.Identity,
		Certificates: engine.CertOptions{CAValidity: caLife.Duration, CARenewBefore: caLife.RenewBefore,
			CertValidity: serverLife.Duration, CertRenewBefore: serverLife.RenewBefore}})
	if err != nil {
		t.Fatalf("plan of %s: %v", version, err)
	}
	for _, st := range p.Steps {
		for _, it := range st.Items {
			if it.Action != apply.ActionUnchanged {
				t.Errorf("plan of %s after convergence: %s %s %s (%s)", version, st.Name, it.Action, it.Ref, it.Reason)
			}
		}
	}
	for _, it := range p.Prune {
		t.Errorf("plan of %s after convergence: prune %s (%s)", version, it.Ref, it.Reason)
	}
}

// upgradeRounds upgrades and downgrades the sample product rounds times;
// during each rollout, disturb runs (with the round number) and the round
// must converge: the target's objects, nothing else, and a clean plan.
func upgradeRounds(ctx context.Context, t *testing.T, e *e2e, rounds int, disturb func(round int)) {
	t.Helper()
	for round := range rounds {
		target := []string{"v1.1.0", "v1.0.0"}[round%2]
		e.update(ctx, t, "sample", func(in *v1alpha1.Installation) { in.Spec.Version = target })
		disturb(round)
		rctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
		e.waitDeployed(rctx, t, "sample", target)
		cancel()
		checkConverged(ctx, t, e, target)
		checkPlanClean(ctx, t, e, target)
		t.Logf("round %d: converged to %s", round+1, target)
	}
}

// kube-apiserver is SIGKILLed and started again at a random moment of
// each rollout, and etcd once: every round converges, the target's objects
// present and nothing else, and a plan is clean.
func TestUpgradesSurviveAPIServerAndEtcdRestarts(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	e.create(ctx, t, "sample", sampleSpec("v1.0.0"))
	e.waitDeployed(ctx, t, "sample", "v1.0.0")
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 2))
	rounds := faultRounds(t, 1)
	t.Logf("random seed %d", seed)
	upgradeRounds(ctx, t, e, rounds+1, func(round int) {
		component := localcluster.KubeAPIServer
		if round == rounds {
			component = localcluster.Etcd
		}
		// An install of the sample takes a few seconds: aim within them.
		wait := time.Duration(rng.IntN(3000)) * time.Millisecond
		time.Sleep(wait)
		e.env.Restart(ctx, t, component, true)
		t.Logf("round %d: %s killed and restarted %s into the rollout", round+1, component, wait)
		if component == localcluster.Etcd {
			// kwok may have dropped a pod's readiness meanwhile, which
			// no real kubelet does (see ReplayKwok).
			e.env.ReplayKwok(ctx, t)
		}
	})
}

// 10% of the operator's requests fail at random (500, 503, 429,
// connection resets) during upgrades: every round converges.
func TestUpgradesConvergeThroughFaults(t *testing.T) {
	var proxy *localcluster.FaultProxy
	e := setup(t, withConfig(func(cfg *rest.Config) *rest.Config {
		p, err := localcluster.StartFaultProxy(cfg, localcluster.Faults{}, rand.Uint64())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		proxy = p
		return p.Config
	}))
	ctx := t.Context()
	e.create(ctx, t, "sample", sampleSpec("v1.0.0"))
	e.waitDeployed(ctx, t, "sample", "v1.0.0")
	proxy.SetFaults(localcluster.Faults{Rate: 0.1, Latency: 50 * time.Millisecond})
	upgradeRounds(ctx, t, e, faultRounds(t, 2), func(int) {})
	injected, passed := proxy.Injected()
	total := 0
	for _, n := range injected {
		total += n
	}
	t.Logf("faults injected %v (%d), requests forwarded %d", injected, total, passed)
	if total == 0 {
		t.Error("no fault was injected: the operator's requests did not go through the proxy")
	}
	proxy.SetFaults(localcluster.Faults{})
}
