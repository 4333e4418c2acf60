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
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/render"
	"github.com/installstrategy/installstrategy/pkg/strategy"
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
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
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

// TestClusterHelmNotes: a chart's NOTES.txt (metallb 0.14.9's) travels in
// the encoded strategy's text as a Notes document, so under the digest a
// signature binds, is not applied, and apply prints it after the run as
// helm install does.
func TestClusterHelmNotes(t *testing.T) {
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	ns := env.Namespace(ctx, t)
	const want = "NOTES:\nMetalLB is now running in the cluster.\n\nNow you can configure it via its CRs."
	code, out, errOut := run(t, nil, "encode", "--from-helm", filepath.Join(renderTestdata, "charts", "metallb-v0.14.9"), "-n", ns, "--kube-version", "v1.36.3")
	if code != 0 {
		t.Fatalf("encode: exit %d: %s", code, errOut)
	}
	cms, err := codec.ReadConfigMaps("encode output", []byte(out))
	if err != nil || len(cms) != 1 {
		t.Fatalf("encode output: %v", err)
	}
	l, err := codec.LoadConfigMap("encode output", cms[0], codec.DecodeOptions{}, strategy.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if notes := l.Strategy.Notes(); !strings.Contains("NOTES:\n"+strings.TrimSpace(notes), want) {
		t.Fatalf("the strategy's notes %q, want metallb's NOTES.txt", notes)
	}
	if !strings.Contains(string(l.Text), "kind: Notes") || cms[0].Annotations[metakeys.DigestAnnotation] != codec.Digest(l.Text) {
		t.Errorf("the Notes document is not in the text under the strategy's digest %s", cms[0].Annotations[metakeys.DigestAnnotation])
	}
	pi := &productInstall{Product: productdata.Product{Name: "metallb"}, ns: ns, name: ns, encoded: map[string]string{"0.14.9": writeFile(t, "metallb.yaml", out)}}
	applied := pi.apply(t, "0.14.9")
	if !strings.Contains(applied, want) || strings.Contains(applied, "Notes/notes") {
		t.Errorf("apply printed no notes, or applied them:\n%s", tail(applied))
	}
	pi.step(t, "uninstall", 0, "uninstall", pi.name, "--wait")
}
