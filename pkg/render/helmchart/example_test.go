package helmchart_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/installstrategy/installstrategy/pkg/render"
	"github.com/installstrategy/installstrategy/pkg/render/helmchart"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// A chart rendered as helm template --include-crds renders it, with what
// became of each hook; the text becomes a strategy (objects in KubeVirt's
// kind order).
func ExampleHelm() {
	res, err := helmchart.Helm(context.Background(), "../testdata/hooks", render.HelmOptions{Namespace: "demo", Set: []string{"greeting=hi"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Chart.Name, res.Chart.Version, res.Chart.AppVersion)
	for _, h := range res.Hooks {
		fmt.Println(h.Kind, h.Name, strings.Join(h.Events, ","), h.Action)
	}
	s, _, err := strategy.Parse(res.Manifests, strategy.ParseOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, o := range s.Objects {
		fmt.Println(o.GetKind(), o.GetName())
	}
	// Output:
	// hooks 1.2.3 4.5
	// ConfigMap hooks-goodbye pre-delete kept
	// Pod hooks-test test dropped
	// Job hooks-setup pre-install,pre-upgrade kept
	// CustomResourceDefinition widgets.example.com
	// Job hooks-setup
	// ConfigMap hooks-config
	// ConfigMap hooks-goodbye
}
