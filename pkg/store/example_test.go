package store_test

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/client-go/rest"

	"github.com/installstrategy/installstrategy/pkg/generate"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// An operator stores the strategy it generated for a configuration, finds
// it again by identity, and garbage-collects the ones no longer in use.
//
// This example needs a cluster (cfg), so it is compiled but not run; the
// store's tests run the same calls against the local control plane.
func Example() {
	var (
		ctx context.Context
		cfg *rest.Config
	)
	conf := &identity.Config{Namespace: "sample-system", Registry: "registry.example/sample", Version: "v1.1.0"}
	s, err := generate.Sample(conf, generate.Options{})
	if err != nil {
		panic(err)
	}
	st, err := store.NewForConfig(cfg, store.Options{}) // native form, chunks over 900 KiB
	if err != nil {
		panic(err)
	}

	// Ensure publishes unless an equal strategy is stored already.
	e, published, err := st.Ensure(ctx, conf.Namespace, s)
	if err != nil {
		panic(err)
	}
	fmt.Println(e, published, len(e.Chunks))

	// Find matches on identifier (legacy: version + registry); the newest
	// wins. Load also reads, reassembles and verifies it.
	l, err := st.Load(ctx, conf.Namespace, s.Identity)
	switch {
	case errors.Is(err, store.ErrNotFound):
		fmt.Println("not stored: dump it (see pkg/loader)")
	case err != nil:
		panic(err)
	default:
		fmt.Println(l.Entry.Identity.Version, len(l.Strategy.Objects), len(l.Warnings))
	}

	// GC keeps the strategy in use and deletes the others of the namespace.
	res, err := st.GC(ctx, conf.Namespace, strategy.Identity{Identifier: s.Identity.Identifier})
	if err != nil {
		panic(err)
	}
	fmt.Println(len(res.Deleted), "deleted")
}
