package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/internal/benchcmp"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/apply/applytest"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// BenchmarkIdleResync is the cost of one resync of an installed, unchanged
// strategy: the baseline reads every live object from the API server (a
// Reconciler without cache, as every Run did before), ours reads from the
// informer cache. Each side reports requests, reads and writes per run and
// per object. Strategies: KubeVirt v1.9.0 (246 objects with its
// PriorityClass) and a synthetic product of 5,000 ConfigMaps. Needs the
// test cluster; installs and removes both (untimed).
//
//	go test -run '^$' -bench IdleResync -benchtime 3x ./pkg/engine
func BenchmarkIdleResync(b *testing.B) {
	env := testenv.New(b)
	testenv.Lock(b, testenv.KubeVirtLock)
	serveVirtAPI(b, env)
	ctx := b.Context()
	for _, bc := range []struct {
		name  string
		s     *strategy.Strategy
		owner inventory.Owner
	}{
		{"kubevirt-v1.9.0", kubevirtStrategy(b, "v1.9.0"), kubevirtOwner},
		{"synthetic-5000", syntheticStrategy(env.Namespace(ctx, b), 5000), inventory.Owner{}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			owner := bc.owner
			if owner.Name == "" {
				owner = inventory.Owner{Namespace: bc.s.Objects[0].GetNamespace(), Name: "synthetic"}
			}
			opts := engine.Options{Owner: owner, Observed: bc.s.Identity, Interval: 100 * time.Millisecond, StageDeadline: 3 * time.Minute}
			cfg, rec := applytest.Record(env.Config)
			direct, err := engine.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := direct.Run(ctx, bc.s, engine.Options{Owner: owner, NoWait: true, StageDeadline: 3 * time.Minute}); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				if _, err := engine.Uninstall(context.WithoutCancel(ctx), env.Config, engine.UninstallOptions{Owner: owner, Wait: true}); err != nil {
					b.Error(err)
				}
			})
			live := applytest.StartCache(b, cfg)
			cached := direct.WithCache(live)
			// Warm the informers (one list and watch per kind).
			if _, err := cached.Run(ctx, bc.s, opts); err != nil {
				b.Fatal(err)
			}
			idle := func(rc *engine.Reconciler) benchcmp.Func {
				return func(b *testing.B, n int) {
					rec.Reset()
					for range n {
						res, err := rc.Run(ctx, bc.s, opts)
						if err != nil {
							b.Fatal(err)
						}
						if u := res.Count(apply.ActionUnchanged); u != len(res.Applied)-res.Count(apply.ActionSkip) {
							b.Fatalf("idle run changed objects: %d of %d unchanged", u, len(res.Applied))
						}
					}
					b.StopTimer()
					reads, writes := len(rec.Reads()), len(rec.Writes())
					b.ReportMetric(float64(reads)/float64(n), "reads/op")
					b.ReportMetric(float64(writes)/float64(n), "writes/op")
					b.ReportMetric(float64(reads)/float64(n)/float64(len(bc.s.Objects)), "reads/object")
				}
			}
			benchcmp.Compare(b, 0, idle(direct), idle(cached))
		})
	}
}

// syntheticStrategy is a product of n ConfigMaps in namespace ns.
func syntheticStrategy(ns string, n int) *strategy.Strategy {
	s := &strategy.Strategy{Identity: strategy.Identity{Version: "v1.0.0", Registry: "registry.example/synthetic"}}
	for i := range n {
		s.Objects = append(s.Objects, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": fmt.Sprintf("synthetic-%05d", i), "namespace": ns},
			"data":     map[string]any{"index": fmt.Sprint(i)},
		}})
	}
	s.Sort()
	return s
}
