package render_test

import (
	"bytes"
	"context"
	"fmt"
	"os"

	"github.com/installstrategy/installstrategy/pkg/render"
)

// A packaged chart rendered as `helm template` would, with one value
// set: the manifests, the chart's name and version, and what became of
// each of its hooks.
func ExampleHelmArchive() {
	archive, err := os.ReadFile("testdata/charts/velero-12.1.0.tgz")
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := render.HelmArchive(context.Background(), "velero", archive,
		map[string]any{"kubectl": map[string]any{"image": map[string]any{"tag": "1.36"}}},
		render.HelmOptions{ReleaseName: "velero", Namespace: "velero", KubeVersion: "v1.36.0"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Chart.Name, res.Chart.Version)
	fmt.Println("documents:", bytes.Count(res.Manifests, []byte("\n---\n"))+1)
	for _, h := range res.Hooks {
		fmt.Println(h.Kind, h.Name, h.Events, h.Action)
	}
	// Output:
	// velero 12.1.0
	// documents: 40
	// ServiceAccount velero-server-upgrade-crds [pre-install pre-upgrade pre-rollback] kept
	// ClusterRole velero-upgrade-crds [pre-install pre-upgrade pre-rollback] kept
	// ClusterRoleBinding velero-upgrade-crds [pre-install pre-upgrade pre-rollback] kept
	// Job velero-upgrade-crds [pre-install pre-upgrade pre-rollback] kept
}
