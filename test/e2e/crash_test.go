package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/controller"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/generate"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/reconcile"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// crashRounds is how often the operator is killed mid-upgrade.
const crashRounds = 10

// TestOperatorKilledMidUpgradeConverges runs the real operator binary,
// upgrades and downgrades the sample product, and SIGKILLs the operator at a
// random moment of each rollout before starting it again. Every round must
// converge to its target: every object of the target strategy present and
// ours, none of the other version's left, one stored strategy per identity.
func TestOperatorKilledMidUpgradeConverges(t *testing.T) {
	e, _ := newE2E(t)
	ns := e.ns
	ctx, cancel := context.WithTimeout(t.Context(), 12*time.Minute)
	defer cancel()

	op := newOperatorProcess(t, "operator", ns)
	op.start()
	// The product goes away with its finalizer, which needs the operator.
	t.Cleanup(func() {
		if !op.running() {
			op.start()
		}
		e.removeAll(t)
	})
	e.dumpOnFailure(t)

	e.create(ctx, t, "sample", sampleSpec("v1.0.0"))
	e.waitDeployed(ctx, t, "sample", "v1.0.0")

	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 1))
	t.Logf("random seed %d", seed)
	for round := range crashRounds {
		target := []string{"v1.1.0", "v1.0.0"}[round%2]
		e.update(ctx, t, "sample", func(in *v1alpha1.Installation) { in.Spec.Version = target })
		delay := time.Duration(rng.IntN(4000)) * time.Millisecond
		time.Sleep(delay)
		op.kill()
		op.start()
		// A round is bounded on its own, so that a stuck one fails with
		// the cluster state of its moment rather than at the test's end.
		rctx, rcancel := context.WithTimeout(ctx, 4*time.Minute)
		e.waitDeployed(rctx, t, "sample", target)
		rcancel()
		checkConverged(ctx, t, e, target)
		t.Logf("round %d: killed %s into the rollout to %s; converged", round+1, delay, target)
	}
}

// checkConverged asserts that the namespace holds exactly the target
// strategy's objects of each namespaced kind, all marked ours, and that the
// store keeps one strategy for the target identity.
func checkConverged(ctx context.Context, t *testing.T, e *e2e, version string) {
	t.Helper()
	id, cfg := expectedIdentity(t, e.ns, version, nil)
	s, err := generate.Sample(cfg, generate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	managedBy := controller.ManagedBy(e.ns, "sample")
	want := map[schema.GroupKind]map[string]bool{}
	for _, o := range s.Objects {
		if o.GetNamespace() == e.ns {
			gk := o.GroupVersionKind().GroupKind()
			if want[gk] == nil {
				want[gk] = map[string]bool{}
			}
			want[gk][o.GetName()] = true
		}
	}
	for gk, names := range want {
		info, _ := kinds.Lookup(gk)
		gvr := info.GroupVersionKind().GroupVersion().WithResource(info.Resource)
		list, err := e.env.Dynamic.Resource(gvr).Namespace(e.ns).List(ctx, metav1.ListOptions{LabelSelector: apply.ManagedByLabel + "=" + managedBy})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, item := range list.Items {
			got[item.GetName()] = true
			if gk.Kind == "Secret" && item.GetName() == reconcile.DefaultCASecret {
				continue // the reconciler's CA: ours, not a strategy object
			}
			if !names[item.GetName()] {
				t.Errorf("%s %s: %s/%s is ours but not in the strategy", version, gk, e.ns, item.GetName())
			}
		}
		for name := range names {
			if !got[name] {
				t.Errorf("%s %s: %s/%s of the strategy is missing (or not ours)", version, gk, e.ns, name)
			}
		}
	}
	st, err := store.New(e.env.Kube, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(ctx, t, "one stored strategy for "+version, func(ctx context.Context) (bool, string, error) {
		entries, err := st.List(ctx, e.ns)
		if err != nil {
			return false, "", err
		}
		n := 0
		for _, en := range entries {
			if en.Matches(strategy.Identity{Identifier: id}) {
				n++
			}
		}
		return n == 1, fmt.Sprintf("%d stored strategies for %s", n, id), nil
	})
}
