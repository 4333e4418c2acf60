package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/generate"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// crashRounds is how often the operator is killed mid-upgrade; make soak
// raises it with INSTALLSTRATEGY_CRASH_ROUNDS.
const crashRounds = 10

// TestOperatorKilledMidUpgradeConverges runs the real operator binary,
// upgrades and downgrades the sample product, and SIGKILLs the operator at a
// random moment of each rollout before starting it again. Every round must
// converge to its target: every object of the target strategy present and
// ours, none of the other version's left, one stored strategy per identity.
func TestOperatorKilledMidUpgradeConverges(t *testing.T) {
	e := setup(t, withoutManager())
	ns := e.ns
	rounds := envRounds(t, "INSTALLSTRATEGY_CRASH_ROUNDS", crashRounds)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute+time.Duration(rounds)*time.Minute)
	defer cancel()

	// Verbosity 1 logs every step of a rollout, so a kill can aim at one.
	// No periodic resync (its steps would be logged too): every step event
	// after an update belongs to that update's rollout.
	op := newOperatorProcess(t, "operator", ns, "--log-verbosity", "1", "--resync-period", "1h")
	op.start()
	// The product goes away with its finalizer, which needs the operator.
	t.Cleanup(func() {
		op.ensureRunning()
		e.removeAll(t)
	})
	e.dumpOnFailure(t)

	from := op.logSize()
	e.create(ctx, t, "sample", sampleSpec("v1.0.0"))
	e.waitDeployed(ctx, t, "sample", "v1.0.0")
	// A rollout's step events: each step starts and becomes ready once
	// (the install may have run its steps more than once).
	distinct := map[string]bool{}
	for _, ev := range op.stepsSince(from) {
		distinct[ev] = true
	}
	steps := len(distinct)
	if steps < 4 {
		t.Fatalf("the install logged %d step events; want the steps of a rollout at verbosity 1", steps)
	}

	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 1))
	t.Logf("random seed %d; an install logs %d step events", seed, steps)
	for round := range rounds {
		target := []string{"v1.1.0", "v1.0.0"}[round%2]
		// Aim at a random step event of the rollout (a step starting or
		// becoming ready), then up to 300 ms more; a rollout that ends
		// first is killed when it is done.
		aim := rng.IntN(steps)
		jitter := time.Duration(rng.IntN(300)) * time.Millisecond
		from := op.logSize()
		e.update(ctx, t, "sample", func(in *v1alpha1.Installation) { in.Spec.Version = target })
		at := "the rollout's end"
		testenv.WaitFor(ctx, t, fmt.Sprintf("step event %d of the rollout to %s", aim+1, target), func(context.Context) (bool, string, error) {
			seen := op.stepsSince(from)
			if len(seen) > aim {
				at = seen[aim]
				return true, "", nil
			}
			return op.logContainsSince(from, `"msg"="rollout finished"`), fmt.Sprintf("%d step events", len(seen)), nil
		})
		time.Sleep(jitter)
		op.kill()
		op.start()
		// A round is bounded on its own, so that a stuck one fails with
		// the cluster state of its moment rather than at the test's end.
		rctx, rcancel := context.WithTimeout(ctx, 4*time.Minute)
		e.waitDeployedWhile(rctx, t, "sample", target, op.mustRun)
		rcancel()
		checkConverged(ctx, t, e, target)
		t.Logf("round %d: killed %s after %s of the rollout to %s; converged", round+1, jitter, at, target)
	}
}

// checkConverged asserts that the namespace holds exactly the target
// strategy's objects of each namespaced kind, all marked ours, and that the
// store keeps one strategy for the target identity.
func checkConverged(ctx context.Context, t *testing.T, e *e2e, version string) {
	t.Helper()
	owner := inventory.Owner{Namespace: e.ns, Name: "sample", Kind: inventory.KindInstallation}
	// Every kind either version has, namespaced or cluster-scoped: a
	// leftover of the other version counts as much as a missing object.
	// The target's objects are the ones wanted.
	var id string
	want := map[schema.GroupKind]map[string]*unstructured.Unstructured{}
	for _, v := range []string{"v1.0.0", "v1.1.0"} {
		vid, vcfg := expectedIdentity(t, e.ns, v, nil)
		vs, err := generate.Sample(vcfg, generate.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range vs.Objects {
			gk := o.GroupVersionKind().GroupKind()
			if want[gk] == nil {
				want[gk] = map[string]*unstructured.Unstructured{}
			}
			if v == version {
				want[gk][o.GetName()] = o
			}
		}
		if v == version {
			id = vid
		}
	}
	if id == "" {
		t.Fatalf("checkConverged: %s is not a version of the loop", version)
	}
	for gk, names := range want {
		info, _ := kinds.Lookup(gk)
		gvr := info.GroupVersionKind().GroupVersion().WithResource(info.Resource)
		var res dynamic.ResourceInterface = e.env.Dynamic.Resource(gvr)
		if info.Namespaced {
			res = e.env.Dynamic.Resource(gvr).Namespace(e.ns)
		}
		list, err := res.List(ctx, metav1.ListOptions{LabelSelector: owner.Selector()})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, item := range list.Items {
			got[item.GetName()] = true
			if gk.Kind == "Secret" && item.GetName() == engine.DefaultCASecret {
				continue // the reconciler's CA: ours, not a strategy object
			}
			if gk.Kind == "ConfigMap" && item.GetName() == inventory.ConfigMapName(owner) {
				continue // the installation's inventory: ours, not a strategy object
			}
			desired := names[item.GetName()]
			if desired == nil {
				t.Errorf("%s %s: %s is ours but not in the strategy", version, gk, objectName(&item))
				continue
			}
			// A kill between the canary's maxUnavailable patch and its
			// restore, or mid-rollout, must not leave the workload off
			// the strategy.
			if w, g := convergedFields(info, desired), convergedFields(info, &item); w != g {
				t.Errorf("%s %s %s: live %s, the strategy says %s", version, gk, item.GetName(), g, w)
			}
		}
		for name := range names {
			if !got[name] {
				t.Errorf("%s %s: %s of the strategy is missing (or not ours)", version, gk, objectName(names[name]))
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

// convergedFields prints the fields of a workload that must equal the
// strategy's once a rollout is done: its containers' images (its version)
// and its update strategy's maxUnavailable (which the DaemonSet canary
// changes and restores). It is "" for kinds without pods.
func convergedFields(info kinds.Info, obj *unstructured.Unstructured) string {
	if info.PodTemplate == nil {
		return ""
	}
	containers, _, _ := unstructured.NestedSlice(obj.Object, append(slices.Clone(info.PodTemplate), "spec", "containers")...)
	var images []string
	for _, c := range containers {
		m, _ := c.(map[string]any)
		images = append(images, fmt.Sprint(m["image"]))
	}
	maxUnavailable, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "updateStrategy", "rollingUpdate", "maxUnavailable")
	return fmt.Sprintf("images %v maxUnavailable %v", images, maxUnavailable)
}

// objectName is namespace/name, or name for a cluster-scoped object.
func objectName(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}
