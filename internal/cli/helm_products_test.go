package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/installstrategy/installstrategy/internal/productdata"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/render"
)

// helmCharts are the upstream charts of pkg/render/testdata/charts, two
// releases each, oldest first.
var helmCharts = []struct {
	name     string
	releases []string // file or folder names
}{
	{"metallb", []string{"metallb-v0.14.9", "metallb-v0.15.3"}},
	{"ingress-nginx", []string{"ingress-nginx-4.14.5.tgz", "ingress-nginx-4.15.1.tgz"}},
}

// TestClusterHelmCharts: each upstream chart, unedited, becomes a strategy
// with `encode --from-helm CHART -n NS` (version: the chart's), which
// installs with apply --wait, re-applies with no write at all, upgrades to
// the second release and rolls back with plan and diff --live clean after
// each, and uninstalls leaving nothing of its inventory.
func TestClusterHelmCharts(t *testing.T) {
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var report []string
	for _, c := range helmCharts {
		t.Run(c.name, func(t *testing.T) {
			ns := env.Namespace(ctx, t)
			pi := &productInstall{Product: productdata.Product{Name: c.name}, ns: ns, name: ns, encoded: map[string]string{}}
			for _, rel := range c.releases {
				// The cluster's version: inside a test binary Helm's
				// default is v1.20.0, which ingress-nginx refuses.
				code, out, errOut := run(t, nil, "encode", "--from-helm", filepath.Join(renderTestdata, "charts", rel), "-n", ns, "--kube-version", "v1.36.3")
				if code != 0 {
					t.Fatalf("encode --from-helm %s: exit %d: %s", rel, code, errOut)
				}
				text, ann := encodedText(t, out)
				v := ann["installstrategy.io/version"]
				if v == "" || v != ann[render.ChartVersionAnnotation] || !strings.Contains(text, "kind: Deployment") {
					t.Fatalf("encode --from-helm %s: version %q, chart version %q", rel, v, ann[render.ChartVersionAnnotation])
				}
				pi.Versions = append(pi.Versions, v)
				pi.encoded[v] = writeFile(t, c.name+"-"+v+".yaml", out)
			}
			pi.lifecycle(ctx, t, env)
			report = append(report, fmt.Sprintf("| %s (chart) | %s | %s |", c.name, strings.Join(pi.Versions, ", "), strings.Join(pi.timings, "; ")))
		})
	}
	t.Logf("chart timings:\n%s", strings.Join(report, "\n"))
}
