package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"k8s.io/client-go/rest"

	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/health"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// Run makes a cluster match a strategy; Plan says beforehand what it would
// do. Observed is the identity the cluster runs now (zero for a fresh
// install).
func ExampleRun() {
	var (
		ctx      context.Context
		cfg      *rest.Config
		s        *strategy.Strategy
		observed strategy.Identity
	)
	opts := engine.Options{
		Observed: observed,
		// The installation: its labels mark what Run applies, its
		// inventory ConfigMap in the namespace records it.
		Owner: inventory.Owner{Namespace: "sample", Name: "sample"},
		OnEvent: func(e engine.Event) {
			fmt.Println(e.Type, e.Step, e.Ref, e.Action, e.Reason)
		},
	}
	p, err := engine.Plan(ctx, cfg, s, opts)
	if err != nil {
		panic(err)
	}
	_ = p.Print(os.Stdout)

	res, err := engine.Run(ctx, cfg, s, opts)
	var degraded *health.DegradedError
	switch {
	case errors.As(err, &degraded):
		fmt.Println("degraded:", degraded.Reason, degraded)
	case err != nil:
		panic(err)
	default:
		fmt.Println("rolled over:", res.RolledOver, "pruned:", len(res.Pruned))
	}
}
