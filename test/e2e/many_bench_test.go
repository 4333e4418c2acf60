package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/testenv"
)

// manyResync is the operator's resync period in BenchmarkManyInstallations:
// short, so that the idle minute holds four resyncs of every Installation.
const manyResync = 15 * time.Second

// manyIdle is how long the idle requests are counted.
const manyIdle = time.Minute

// manyFigures is what one size of BenchmarkManyInstallations measured.
type manyFigures struct {
	installations  int
	deploy         time.Duration // first create to all Deployed
	peakRSS        float64       // MB, VmHWM at the end
	idleRSS        float64       // MB, VmRSS at the end of the idle minute
	deployCPU      float64       // CPU seconds from the operator's start to all Deployed
	deployRequests float64       // requests from the first create to all Deployed
	idleCPU        float64       // CPU seconds over the idle minute
	idleRequests   float64       // requests per idle minute
	idleWrites     float64       // write requests per idle minute
	resyncs        float64       // deployed reconciles per idle minute
	remove         time.Duration // delete of every Installation to all gone
}

// BenchmarkManyInstallations is issue #13 (d): the real operator binary,
// as a process of its own watching every namespace (--resync-period 15s),
// and Installations of testenv.NamespacedProduct (16 objects, 4 pods each
// on kwok), one per namespace, from their stored ConfigMaps pinned by
// digest. For 1 Installation (the baseline) and
// each size of INSTALLSTRATEGY_MANY_INSTALLATIONS (default 100; a comma
// list such as 10,100,1000 gives a curve), each with a fresh
// operator, it reports the time from the first create until every
// Installation is Deployed, the operator's peak RSS (VmHWM of
// /proc/PID/status), its CPU seconds while deploying and over one idle
// minute, and its API requests (client-go's rest_client_requests_total
// from its /metrics) and resyncs over that minute, counted from two
// resync periods after all are Deployed. Each "ratio-N" sub-benchmark divides
// the N by the one: per-installation ratios near 1 mean the cost grows
// linearly, below 1 that it is shared. One round is minutes of work:
// run with -benchtime 1x. INSTALLSTRATEGY_MANY_OPERATOR_FLAGS adds flags
// to the operator's (e.g. "--max-concurrent-reconciles 16 --kube-api-qps
// 1000"). Needs the test cluster, and no other
// Installations in it (the operator watches every namespace).
//
//	go test -run '^$' -bench ManyInstallations -benchtime 1x -timeout 60m ./test/e2e
func BenchmarkManyInstallations(b *testing.B) {
	sizes := envInts(b, "INSTALLSTRATEGY_MANY_INSTALLATIONS", []int{100}, 2)
	env := testenv.New(b)
	lockSample(b) // the operator watches every namespace: no e2e test may run beside it
	env.InstallCRDFile(b.Context(), b, crdFile)
	figures := map[int]*manyFigures{}
	for _, n := range append([]int{1}, sizes...) {
		f := &manyFigures{}
		figures[n] = f
		if !b.Run(fmt.Sprintf("installations-%d", n), func(b *testing.B) {
			for range b.N {
				*f = measureMany(b, env, n)
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(f.deploy.Seconds(), "s-to-deployed")
			b.ReportMetric(f.peakRSS, "MB-peak-rss")
			b.ReportMetric(f.idleRSS, "MB-idle-rss")
			b.ReportMetric(f.deployCPU, "cpu-s-deploy")
			b.ReportMetric(f.deployRequests, "req-to-deployed")
			b.ReportMetric(f.deployRequests/f.deploy.Seconds(), "req/s-deploying")
			b.ReportMetric(f.idleCPU, "cpu-s/idle-min")
			b.ReportMetric(f.idleRequests, "req/idle-min")
			b.ReportMetric(f.idleWrites, "writes/idle-min")
			b.ReportMetric(f.resyncs, "resyncs/idle-min")
			b.ReportMetric(f.idleRequests/f.resyncs, "req/resync")
			b.ReportMetric(f.remove.Seconds(), "s-to-removed")
		}) {
			b.Fatal("a size failed")
		}
	}
	// One ratio per size against the single Installation of this run: the
	// cost curve (make bench-scale runs 10, 100 and 1,000).
	one := figures[1]
	for _, n := range sizes {
		lots := figures[n]
		b.Run(fmt.Sprintf("ratio-%d", n), func(b *testing.B) {
			per := float64(lots.installations) / float64(one.installations)
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(lots.deploy.Seconds()/one.deploy.Seconds()/per, "deploy-time-per-inst-ratio")
			b.ReportMetric(lots.peakRSS/one.peakRSS, "peak-rss-ratio")
			b.ReportMetric((lots.peakRSS-one.peakRSS)/float64(lots.installations-one.installations), "MB-rss/extra-inst")
			b.ReportMetric(lots.idleRequests/one.idleRequests/per, "idle-req-per-inst-ratio")
			b.ReportMetric((lots.idleRequests/lots.resyncs)/(one.idleRequests/one.resyncs), "req-per-resync-ratio")
			b.ReportMetric(lots.idleCPU/one.idleCPU/per, "idle-cpu-per-inst-ratio")
			b.Logf("%d vs %d installations: deployed in %.1f s vs %.1f s, peak RSS %.1f MB vs %.1f MB, %.0f vs %.0f requests per idle minute (%.0f vs %.0f resyncs), %.2f vs %.2f CPU s per idle minute",
				lots.installations, one.installations, lots.deploy.Seconds(), one.deploy.Seconds(), lots.peakRSS, one.peakRSS,
				lots.idleRequests, one.idleRequests, lots.resyncs, one.resyncs, lots.idleCPU, one.idleCPU)
		})
	}
}

// envInts is the comma-separated whole numbers in the environment variable
// name, def when it is unset; a value below least fails the benchmark.
func envInts(b *testing.B, name string, def []int, least int) []int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < least {
			b.Fatalf("%s=%q: want numbers of at least %d, separated by commas", name, v, least)
		}
		out = append(out, n)
	}
	return out
}

// envInt is the whole number in the environment variable name, def when
// it is unset; a value below least fails the benchmark.
func envInt(b *testing.B, name string, def, least int) int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < least {
		b.Fatalf("%s=%q: want a number of at least %d", name, v, least)
	}
	return n
}

// benchNamespaces makes n namespaces and a direct client for a benchmark
// whose operator watches every namespace, and fails when the cluster
// holds another Installation (its resyncs would add to the figures).
// Namespaces come first: their cleanups (deletion) run after the
// operator's (kill), which runs after the Installations' removal.
func benchNamespaces(ctx context.Context, b *testing.B, env *testenv.Env, n int) ([]string, client.Client) {
	b.Helper()
	namespaces := make([]string, n)
	for i := range namespaces {
		namespaces[i] = env.Namespace(ctx, b)
	}
	_, c := directClient(b, env)
	var others v1alpha1.InstallationList
	if err := c.List(ctx, &others); err != nil {
		b.Fatal(err)
	}
	for _, in := range others.Items {
		b.Fatalf("Installation %s/%s exists: the benchmark needs a cluster without other Installations", in.Namespace, in.Name)
	}
	return namespaces, c
}

// measureMany runs one operator process, installs n Installations and
// measures them (see BenchmarkManyInstallations); it removes them again.
func measureMany(b *testing.B, env *testenv.Env, n int) manyFigures {
	b.StopTimer()
	ctx, cancel := context.WithTimeout(b.Context(), 30*time.Minute)
	defer cancel()
	f := manyFigures{installations: n}
	namespaces, c := benchNamespaces(ctx, b, env, n)
	flags := append([]string{"--resync-period", manyResync.String()}, strings.Fields(os.Getenv("INSTALLSTRATEGY_MANY_OPERATOR_FLAGS"))...)
	p := newOperatorProcess(b, fmt.Sprintf("operator-%d", n), "", flags...)
	removed := false
	b.Cleanup(func() {
		if !removed {
			removeSynthetic(context.WithoutCancel(ctx), b, c, namespaces)
		}
	})
	p.start()
	pid := p.pid()
	testenv.WaitFor(ctx, b, "the operator's metrics", func(ctx context.Context) (bool, string, error) {
		p.mustRun()
		_, ok, err := p.metricSum(ctx, "rest_client_requests_total", "")
		return ok, "", err
	})

	entries := publishSynthetic(ctx, b, env, namespaces, "v1.0.0")
	before := p.metric(ctx, "rest_client_requests_total", "")
	start := time.Now()
	createSynthetic(ctx, b, c, namespaces, entries)
	waitAllDeployed(ctx, b, c, namespaces, "v1.0.0")
	f.deploy = time.Since(start)
	f.deployCPU = cpuSeconds(b, pid)
	f.deployRequests = p.metric(ctx, "rest_client_requests_total", "") - before

	// Settle (the reconciles that found each rollout done), then count.
	time.Sleep(2 * manyResync)
	scrape := func() (requests, writes, resyncs float64) {
		b.Helper()
		requests = p.metric(ctx, "rest_client_requests_total", "")
		for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
			writes += p.metric(ctx, "rest_client_requests_total", `method="`+m+`"`)
		}
		resyncs = p.metric(ctx, "installstrategy_reconcile_total", `outcome="deployed"`)
		return
	}
	req0, w0, r0 := scrape()
	cpu0 := cpuSeconds(b, pid)
	time.Sleep(manyIdle)
	req1, w1, r1 := scrape()
	minutes := manyIdle.Minutes()
	f.idleCPU = (cpuSeconds(b, pid) - cpu0) / minutes
	f.idleRequests, f.idleWrites, f.resyncs = (req1-req0)/minutes, (w1-w0)/minutes, (r1-r0)/minutes
	f.peakRSS, f.idleRSS = memoryMB(b, pid, "VmHWM"), memoryMB(b, pid, "VmRSS")
	if got, _, _, err := deployedAmong(ctx, c, namespaces, "v1.0.0"); err != nil || got != n {
		b.Fatalf("after the idle minute %d of %d installations are deployed (%v)", got, n, err)
	}

	start = time.Now()
	removeSynthetic(ctx, b, c, namespaces)
	f.remove, removed = time.Since(start), true
	b.Logf("%d installations: deployed in %.1f s (%.0f requests); peak RSS %.1f MB, idle %.1f MB; CPU %.1f s to deployed, %.2f s per idle minute; per idle minute %.0f requests (%.0f writes) over %.0f resyncs; removed in %.1f s",
		n, f.deploy.Seconds(), f.deployRequests, f.peakRSS, f.idleRSS, f.deployCPU, f.idleCPU, f.idleRequests, f.idleWrites, f.resyncs, f.remove.Seconds())
	return f
}

// removeSynthetic deletes the Installation of every namespace and waits
// until they are gone (the operator removes what they installed).
func removeSynthetic(ctx context.Context, tb testing.TB, c client.Client, namespaces []string) {
	tb.Helper()
	for _, ns := range namespaces {
		in := &v1alpha1.Installation{}
		in.Namespace, in.Name = ns, syntheticName
		if err := c.Delete(ctx, in); err != nil && !apierrors.IsNotFound(err) {
			tb.Errorf("delete %s/%s: %v", ns, syntheticName, err)
		}
	}
	testenv.WaitFor(ctx, tb, "installations removed", func(ctx context.Context) (bool, string, error) {
		_, left, _, err := deployedAmong(ctx, c, namespaces, "")
		return left == 0, fmt.Sprintf("%d left", left), err
	})
}

// pid is the process id of the running operator.
func (p *operatorProcess) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		p.t.Fatalf("operator %s does not run", p.name)
	}
	return p.cmd.Process.Pid
}

// metric is metricSum that fails when the operator does not answer.
func (p *operatorProcess) metric(ctx context.Context, name, match string) float64 {
	p.t.Helper()
	v, ok, err := p.metricSum(ctx, name, match)
	if err != nil || !ok {
		p.t.Fatalf("metric %s{%s} of %s: answered %v, %v", name, match, p.name, ok, err)
	}
	return v
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// cpuSeconds is the user and system CPU time process pid has used.
func cpuSeconds(tb testing.TB, pid int) float64 {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	// Fields after "(comm)": state is field 3, utime 14, stime 15.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		tb.Fatalf("/proc/%d/stat: %q", pid, s)
	}
	var ticks float64
	for _, f := range fields[11:13] {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			tb.Fatalf("/proc/%d/stat: %v", pid, err)
		}
		ticks += v
	}
	return ticks / clockTicks
}

// memoryMB is a field of /proc/PID/status (VmHWM, VmRSS) in MB (10^6
// bytes).
func memoryMB(tb testing.TB, pid int, field string) float64 {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			// "   123456 kB"
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				tb.Fatalf("/proc/%d/status %s: %v", pid, field, err)
			}
			return kb * 1024 / 1e6
		}
	}
	tb.Fatalf("/proc/%d/status has no %s", pid, field)
	return 0
}
