package loader_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/loader"
	"github.com/installstrategy/installstrategy/pkg/store"
)

// A reconciler asks the loader for the strategy of its target
// configuration on every pass: from the cache, else the store, else a dump
// Job runs the target version's operator image, and the result says when
// to ask again. A failed Job is a *JobError with the pod's reason.
//
// This example needs a cluster (kube), so it is compiled but not run; the
// loader's tests run it against the local control plane, dump Jobs
// included.
func Example() {
	var (
		ctx  context.Context
		kube kubernetes.Interface
	)
	st, err := store.New(kube, store.Options{})
	if err != nil {
		panic(err)
	}
	l, err := loader.New(loader.Options{Store: st, Kube: kube})
	if err != nil {
		panic(err)
	}
	req := loader.Request{
		Config: &identity.Config{Namespace: "sample-system", Registry: "registry.example/sample", Version: "v1.1.0"},
		Image:  "registry.example/sample/sample-operator:v1.1.0",
	}
	for {
		res, err := l.Load(ctx, req)
		var jobErr *loader.JobError
		switch {
		case errors.As(err, &jobErr):
			fmt.Println("dump job failed:", jobErr) // retried after a backoff
			return
		case err != nil:
			panic(err)
		case res.Pending():
			fmt.Println("dumping in", res.Job) // a controller returns RequeueAfter instead
			time.Sleep(res.RequeueAfter)
			continue
		}
		fmt.Println(res.Source, len(res.Strategy.Objects))
		return
	}
}
