package kustomize_test

import (
	"fmt"

	"github.com/installstrategy/installstrategy/pkg/render/kustomize"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// A kustomize overlay built as kubectl kustomize builds it, then parsed
// into a strategy (which orders objects by KubeVirt's kind order).
func ExampleBuild() {
	text, err := kustomize.Build("testdata/kustomize/overlay")
	if err != nil {
		fmt.Println(err)
		return
	}
	s, _, err := strategy.Parse(text, strategy.ParseOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, o := range s.Objects {
		fmt.Println(o.GetKind(), o.GetNamespace(), o.GetName())
	}
	// Output:
	// Namespace  shop
	// Service shop prod-web
	// Deployment shop prod-web
	// ConfigMap shop prod-web-settings-tmk75tcf47
}
