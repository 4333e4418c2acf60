package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// fleetFigures is what one side of one size of BenchmarkOCIFleet measured.
type fleetFigures struct {
	installations int
	// first is the traffic from the first Installation (source) created
	// until all are at v1.0.0, firstTime that time.
	first     fleetTraffic
	firstTime time.Duration
	// idle is the traffic over idleWindow, idlePolls the polls in it.
	idle       fleetTraffic
	idlePolls  float64
	idleWindow time.Duration
	// move is the traffic from the tag's move to v1.1.0 until all are at
	// v1.1.0, moveTime that time.
	move     fleetTraffic
	moveTime time.Duration
}

// perInst divides by the number of Installations.
func (f fleetFigures) perInst(v float64) float64 { return v / float64(f.installations) }

// perPoll divides by the idle polls.
func (f fleetFigures) perPoll(v int) float64 { return float64(v) / f.idlePolls }

// report reports f as metrics of b.
func (f fleetFigures) report(b *testing.B) {
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(f.perInst(float64(f.first.bytes)), "B-first/inst")
	b.ReportMetric(float64(f.first.layers), "layer-gets-first")
	b.ReportMetric(f.firstTime.Seconds(), "s-first")
	b.ReportMetric(f.perInst(float64(f.move.bytes)), "B-move/inst")
	b.ReportMetric(float64(f.move.layers), "layer-gets-move")
	b.ReportMetric(f.moveTime.Seconds(), "s-move-to-all")
	b.ReportMetric(f.perPoll(f.idle.requests), "req/idle-poll")
	b.ReportMetric(f.perPoll(f.idle.heads), "heads/idle-poll")
	b.ReportMetric(f.perPoll(f.idle.manifests+f.idle.signatures+f.idle.layers+f.idle.otherBlobs), "gets/idle-poll")
	b.ReportMetric(f.perInst(f.idlePolls)/f.idleWindow.Seconds(), "polls/inst/s")
	b.Logf("%d: first %s in %.1f s; idle %.0f polls in %s: %s; move %s in %.1f s",
		f.installations, describeTraffic(f.first), f.firstTime.Seconds(), f.idlePolls, f.idleWindow, describeTraffic(f.idle), describeTraffic(f.move), f.moveTime.Seconds())
}

func describeTraffic(t fleetTraffic) string {
	return fmt.Sprintf("%d requests (%d HEAD, %d manifest GET, %d signature, %d layer GET of %d B, %d other blob), %d B",
		t.requests, t.heads, t.manifests, t.signatures, t.layers, t.layerBytes, t.otherBlobs, t.bytes)
}

// BenchmarkOCIFleet is issue #23 at fleet scale: one registry (in this
// process, on loopback) and N Installations, each in its own namespace
// with its own oci source, all tracking oci://HOST/acme/sample:stable
// (interval INSTALLSTRATEGY_FLEET_INTERVAL, default 2s), of a signed,
// namespace-free testenv.NamespacedProduct (16 objects, kwok pods), run by
// the real operator binary as a process of its own (a fresh one per size,
// so its artifact cache starts cold). For each N of
// INSTALLSTRATEGY_FLEET_SIZES (default "10,25") it measures, from the
// registry's side (every response body byte, by client): what the first
// install and the tag's move to the next signed release cost per
// Installation (the layer is cached by digest: N Installations should
// download it once, not N times), the time from the tag's move to all
// Installations Deployed at the new version, and the requests per idle
// poll over INSTALLSTRATEGY_FLEET_IDLE_POLLS (default 5) intervals. The
// baseline, measured first in the same run against the same registry, is
// what Flux's source-controller does for N OCIRepository objects with
// cosign verification (fluxBaseline: a HEAD per source per interval, and
// per source on change the signature and the artifact downloaded); the
// "ratio" sub-benchmark divides ours by it. Needs the test cluster and no
// other Installations in it; INSTALLSTRATEGY_FLEET_OPERATOR_FLAGS adds
// flags to the operator's (e.g. "--max-concurrent-reconciles 8"). Run with
// -benchtime 1x:
//
//	go test -run '^$' -bench OCIFleet -benchtime 1x -timeout 60m ./test/e2e
func BenchmarkOCIFleet(b *testing.B) {
	sizes := []int{10, 25}
	if v := os.Getenv("INSTALLSTRATEGY_FLEET_SIZES"); v != "" {
		sizes = nil
		for f := range strings.SplitSeq(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("INSTALLSTRATEGY_FLEET_SIZES=%q: want numbers of at least 1, comma-separated", v)
			}
			sizes = append(sizes, n)
		}
	}
	interval := 2 * time.Second
	if v := os.Getenv("INSTALLSTRATEGY_FLEET_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			b.Fatalf("INSTALLSTRATEGY_FLEET_INTERVAL=%q: want a duration of at least 1s", v)
		}
		interval = d
	}
	idlePolls := envInt(b, "INSTALLSTRATEGY_FLEET_IDLE_POLLS", 5, 1)
	env := testenv.New(b)
	lockSample(b) // the operator watches every namespace: no e2e test may run beside it
	env.InstallCRDFile(b.Context(), b, crdFile)
	type row struct{ base, ours fleetFigures }
	var rows []row
	for _, n := range sizes {
		var r row
		if !b.Run(fmt.Sprintf("installations-%d", n), func(b *testing.B) {
			ctx := b.Context()
			reg := newFleetRegistry(b)
			pub, err := oci.New(oci.Options{UserAgent: fleetPublisher})
			if err != nil {
				b.Fatal(err)
			}
			signer, err := trust.GenerateKey()
			if err != nil {
				b.Fatal(err)
			}
			rels := publishFleet(ctx, b, reg, pub, signer, "v1.0.0", "v1.1.0")
			run := func(name string, out *fleetFigures, measure func(*testing.B) fleetFigures) bool {
				return b.Run(name, func(b *testing.B) {
					for range b.N {
						moveTag(ctx, b, reg, pub, rels[0])
						*out = measure(b)
					}
					out.report(b)
				})
			}
			if !run("baseline", &r.base, func(b *testing.B) fleetFigures {
				return measureFluxFleet(b, reg, pub, rels, n, interval, idlePolls)
			}) || !run("ours", &r.ours, func(b *testing.B) fleetFigures {
				return measureOCIFleet(b, env, reg, pub, signer, rels, n, interval, idlePolls)
			}) {
				b.Fatal("a side failed")
			}
			b.Run("ratio", func(b *testing.B) {
				base, ours := r.base, r.ours
				b.ReportMetric(0, "ns/op")
				b.ReportMetric(float64(ours.first.bytes)/float64(base.first.bytes), "first-bytes-ratio")
				b.ReportMetric(float64(ours.move.bytes)/float64(base.move.bytes), "move-bytes-ratio")
				b.ReportMetric(float64(ours.move.layers)/float64(base.move.layers), "move-layer-gets-ratio")
				b.ReportMetric(ours.perPoll(ours.idle.requests)/base.perPoll(base.idle.requests), "idle-req-per-poll-ratio")
				b.ReportMetric(ours.perInst(ours.idlePolls)/base.perInst(base.idlePolls), "idle-poll-rate-ratio")
			})
		}) {
			b.Fatal("a size failed")
		}
		rows = append(rows, r)
	}
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "N\tside\tB/inst first\tlayer GETs first\tB/inst move\tlayer GETs move\tsig reqs move\ts move→all\treq/idle poll\tHEAD/idle poll\tGET/idle poll\tpolls/inst/interval\t\n")
	for _, r := range rows {
		for _, s := range []struct {
			name string
			f    fleetFigures
		}{{"flux", r.base}, {"ours", r.ours}} {
			f := s.f
			fmt.Fprintf(tw, "%d\t%s\t%.0f\t%d\t%.0f\t%d\t%d\t%.2f\t%.3f\t%.3f\t%.3f\t%.2f\t\n", f.installations, s.name,
				f.perInst(float64(f.first.bytes)), f.first.layers, f.perInst(float64(f.move.bytes)), f.move.layers, f.move.signatures+f.move.otherBlobs,
				f.moveTime.Seconds(), f.perPoll(f.idle.requests), f.perPoll(f.idle.heads),
				f.perPoll(f.idle.manifests+f.idle.signatures+f.idle.layers+f.idle.otherBlobs),
				f.perInst(f.idlePolls)/(f.idleWindow.Seconds()/interval.Seconds()))
		}
	}
	tw.Flush()
	b.Logf("interval %s, idle window %d intervals:\n%s", interval, idlePolls, sb.String())
}

// measureFluxFleet runs the baseline: n fluxBaseline sources, from their
// first poll until all pulled rels[0], idle polls, the tag moved to
// rels[1] until all pulled it.
func measureFluxFleet(b *testing.B, reg *fleetRegistry, pub *oci.Client, rels []fleetRelease, n int, interval time.Duration, idlePolls int) fleetFigures {
	b.StopTimer()
	ctx, cancel := context.WithTimeout(b.Context(), 10*time.Minute)
	defer cancel()
	f := fleetFigures{installations: n}
	flux := newFluxBaseline(b, reg, n, interval)
	t0 := reg.served(fluxUserAgent)
	start := time.Now()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		flux.run(runCtx)
	}()
	defer func() { stop(); <-done }()
	flux.waitAt(ctx, b, rels[0].digest)
	f.firstTime = time.Since(start)
	t1 := reg.served(fluxUserAgent)
	f.first = t1.minus(t0)

	time.Sleep(interval)
	f.idle, f.idlePolls, f.idleWindow = idleWindow(reg, fluxUserAgent, interval, idlePolls, func() float64 { return float64(flux.polls.Load()) })

	t2 := reg.served(fluxUserAgent)
	moveTag(ctx, b, reg, pub, rels[1])
	start = time.Now()
	flux.waitAt(ctx, b, rels[1].digest)
	f.moveTime = time.Since(start)
	f.move = reg.served(fluxUserAgent).minus(t2)
	return f
}

// idleWindow counts client's traffic and polls over idlePolls intervals.
func idleWindow(reg *fleetRegistry, client string, interval time.Duration, idlePolls int, polls func() float64) (fleetTraffic, float64, time.Duration) {
	t0, p0, start := reg.served(client), polls(), time.Now()
	time.Sleep(time.Duration(idlePolls) * interval)
	t1, p1 := reg.served(client), polls()
	return t1.minus(t0), p1 - p0, time.Since(start)
}

// operatorAgent is the first word of the operator's User-Agent towards
// registries (pkg/operator's ociClient).
const operatorAgent = "installstrategy-operator"

// measureOCIFleet runs our side: one operator process watching every
// namespace and n Installations of oci://…/acme/sample:stable, from the
// first created until all are Deployed at rels[0], idle polls (the
// operator's deployed reconciles), the tag moved to rels[1] until all are
// Deployed at it; it removes them again.
func measureOCIFleet(b *testing.B, env *testenv.Env, reg *fleetRegistry, pub *oci.Client, signer *trust.Signer, rels []fleetRelease, n int, interval time.Duration, idlePolls int) fleetFigures {
	b.StopTimer()
	ctx, cancel := context.WithTimeout(b.Context(), 30*time.Minute)
	defer cancel()
	f := fleetFigures{installations: n}
	namespaces, c := benchNamespaces(ctx, b, env, n)
	// The release key, trusted by a cluster admin (as e.trustReleaseKey).
	if _, err := env.Kube.CoreV1().ConfigMaps(keyNamespace(b)).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: trust.TrustedKeysConfigMap, Namespace: keyNamespace(b)},
		Data:       map[string]string{"release.pub": string(signer.PublicPEM())},
	}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	p := newOperatorProcess(b, fmt.Sprintf("fleet-%d", n), "", strings.Fields(os.Getenv("INSTALLSTRATEGY_FLEET_OPERATOR_FLAGS"))...)
	removed := false
	b.Cleanup(func() {
		if !removed {
			removeSynthetic(context.WithoutCancel(ctx), b, c, namespaces)
		}
	})
	p.start()
	testenv.WaitFor(ctx, b, "the operator's metrics", func(ctx context.Context) (bool, string, error) {
		p.mustRun()
		_, ok, err := p.metricSum(ctx, "rest_client_requests_total", "")
		return ok, "", err
	})

	t0, r0 := reg.served(operatorAgent), len(reg.readsOf(operatorAgent))
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, ns := range namespaces {
		g.Go(func() error {
			in := &v1alpha1.Installation{
				ObjectMeta: metav1.ObjectMeta{Name: syntheticName, Namespace: ns},
				Spec: v1alpha1.InstallationSpec{
					Registry: rels[0].meta.Registry,
					Strategy: &v1alpha1.StrategySource{OCI: &v1alpha1.OCIStrategySource{
						Reference: reg.Ref("acme/sample:stable"), Interval: &metav1.Duration{Duration: interval}}},
					UninstallStrategy: v1alpha1.UninstallRemoveWorkloads,
				},
			}
			if err := c.Create(gctx, in); err != nil {
				return fmt.Errorf("create installation in %s: %w", ns, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	waitAllDeployed(ctx, b, c, namespaces, rels[0].version)
	f.firstTime = time.Since(start)
	f.first = reg.served(operatorAgent).minus(t0)
	r1 := len(reg.readsOf(operatorAgent))

	// Settle (the reconciles that found each rollout done), then count.
	time.Sleep(2 * interval)
	f.idle, f.idlePolls, f.idleWindow = idleWindow(reg, operatorAgent, interval, idlePolls, func() float64 {
		return p.metric(ctx, "installstrategy_reconcile_total", `outcome="deployed"`)
	})

	t2, r2 := reg.served(operatorAgent), len(reg.readsOf(operatorAgent))
	moveTag(ctx, b, reg, pub, rels[1])
	start = time.Now()
	waitAllDeployed(ctx, b, c, namespaces, rels[1].version)
	f.moveTime = time.Since(start)
	f.move = reg.served(operatorAgent).minus(t2)
	reads := reg.readsOf(operatorAgent)
	b.Logf("%d: the operator's registry requests but manifest HEADs, first install:\n%s\nafter the tag's move (at +%.3fs):\n%s",
		n, strings.Join(reads[r0:r1], "\n"), start.Sub(reg.start).Seconds(), strings.Join(reads[r2:], "\n"))

	removeSynthetic(ctx, b, c, namespaces)
	removed = true
	return f
}
