package plan_test

import (
	"fmt"

	"github.com/installstrategy/installstrategy/pkg/generate"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// Build orders a strategy without a cluster: an upgrade rolls the handler
// DaemonSet out first and the api last.
func ExampleBuild() {
	s, err := generate.Sample(&identity.Config{Namespace: "sample-system", Registry: "registry.example/sample", Version: "v1.1.0"}, generate.Options{})
	if err != nil {
		panic(err)
	}
	p := plan.Build(s, plan.Options{Observed: strategy.Identity{Version: "v1.0.0"}})
	fmt.Println("path:", p.Path)
	for _, st := range p.Steps {
		fmt.Println(st.Name, len(st.Items))
	}
	// Output:
	// path: update
	// crds 2
	// rbac 11
	// config 2
	// services 2
	// workloads/handler 1
	// workloads/controller 1
	// workloads/api 1
	// admission 1
}
