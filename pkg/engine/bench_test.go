package engine_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/installstrategy/installstrategy/internal/benchcmp"
	"github.com/installstrategy/installstrategy/internal/gobuild"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/render"
	"github.com/installstrategy/installstrategy/pkg/render/helmchart"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// BenchmarkApply applies a product to an empty cluster with three programs,
// each run as a child process so that its peak memory (getrusage) is
// measured alike: `kubectl apply --server-side` of the product's text, Helm 4
// (hack/benchhelm: `helm install` through the v4.3.1 SDK) of the same
// objects as a chart, and our plugin `kubectl installstrategy apply` of the
// text (hack/benchapply: the plugin with its requests counted). None waits
// for rollouts; CRDs are waited for until Established by Helm (they are in
// the chart's crds/) and by ours, not by kubectl. Each round starts from an
// empty cluster (untimed). Products: the objects of the KubeVirt v1.9.0
// strategy that kubectl can apply to this cluster (found by one untimed
// kubectl apply of the whole strategy; Helm refuses a chart whose kinds the
// cluster does not serve), and a synthetic product of 5,000 ConfigMaps (or of each size of
// INSTALLSTRATEGY_BENCH_SYNTHETIC_SIZES: the cost curve of make bench-scale).
// Helm gets the plugin's default client limits (HELM_QPS=1000,
// HELM_BURST_LIMIT=1000); kubectl has no flag for them and keeps
// client-go's 5 QPS.
// INSTALLSTRATEGY_BENCH_PLUGIN_FLAGS adds flags to the plugin's command
// (e.g. --kube-api-qps=-1: no client-side limit).
//
// It needs kubectl on PATH, the Go toolchain (it builds both helpers; Helm's
// once per pin, into the user cache folder) and the test cluster.
//
//	go test -run '^$' -bench 'Apply$' -benchtime 1x -count 2 -timeout 120m ./pkg/engine
func BenchmarkApply(b *testing.B) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		msg := "BenchmarkApply compares with kubectl, which is not on PATH: install kubectl (any recent version) first"
		if testenv.InCI() {
			b.Fatal(msg)
		}
		b.Skip(msg)
	}
	env := testenv.New(b)
	testenv.Lock(b, testenv.KubeVirtLock)
	ours := buildBenchApply(b)
	helm := buildBenchHelm(b)
	b.Run("kubevirt-v1.9.0", func(b *testing.B) {
		// kubectl issues no certificates, so no stand-in could serve
		// KubeVirt's webhooks for the baseline: they are set to Ignore
		// (the one edit of the product left; see testenv.KubeVirtStrategy).
		s := testenv.KubeVirtStrategy(b, "v1.9.0")
		p := newApplyProduct(b, env, kubectl, "kubevirt", s)
		p.keepApplied(p.kubectlApply(b, p.write(b, "whole.yaml", s.Objects)))
		p.compare(b, ours, helm)
	})
	b.Run("metallb-chart-0.15.3", func(b *testing.B) {
		// A real chart, rendered by pkg/render as helm template does:
		// Helm installs the same objects (as a chart of them), we apply
		// them as a strategy.
		const ns = "bench-apply-metallb"
		res, err := helmchart.Helm(b.Context(), filepath.Join("..", "render", "testdata", "charts", "metallb-v0.15.3"), render.HelmOptions{Namespace: ns, KubeVersion: "v1.36.0"})
		if err != nil {
			b.Fatal(err)
		}
		s, _, err := strategy.Parse(res.Manifests, strategy.ParseOptions{})
		if err != nil {
			b.Fatal(err)
		}
		s.Identity = strategy.Identity{Version: res.Chart.Version}
		newApplyProduct(b, env, kubectl, ns, s).compare(b, ours, helm)
	})
	for _, n := range syntheticSizes(b) {
		b.Run(fmt.Sprintf("synthetic-%d", n), func(b *testing.B) {
			const ns = "bench-apply-synthetic"
			p := newApplyProduct(b, env, kubectl, ns, syntheticStrategy(ns, n))
			p.compare(b, ours, helm)
		})
	}
}

// syntheticSizes are the sizes of BenchmarkApply's synthetic products:
// INSTALLSTRATEGY_BENCH_SYNTHETIC_SIZES, comma-separated numbers of
// ConfigMaps (make bench-scale: 1000,5000,20000), else 5,000.
func syntheticSizes(b *testing.B) []int {
	b.Helper()
	v := os.Getenv("INSTALLSTRATEGY_BENCH_SYNTHETIC_SIZES")
	if v == "" {
		return []int{5000}
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("INSTALLSTRATEGY_BENCH_SYNTHETIC_SIZES=%q: want numbers of ConfigMaps separated by commas", v)
		}
		out = append(out, n)
	}
	return out
}

// applyProduct is one product of BenchmarkApply: its objects, written as
// a text and as a chart, and how to remove them.
type applyProduct struct {
	env        *testenv.Env
	kubectl    string
	kubeconfig string
	namespace  string
	s          *strategy.Strategy
	dir        string
	// whole is every object applied to the cluster so far, removed by clean.
	whole []*unstructured.Unstructured
}

func newApplyProduct(b *testing.B, env *testenv.Env, kubectl, namespace string, s *strategy.Strategy) *applyProduct {
	p := &applyProduct{env: env, kubectl: kubectl, kubeconfig: os.Getenv(testenv.KubeconfigEnv), namespace: namespace, s: s, dir: b.TempDir(), whole: s.Objects}
	p.clean(b)
	b.Cleanup(func() { p.clean(b) })
	return p
}

// write writes objects as one text into the product's folder.
func (p *applyProduct) write(b *testing.B, name string, objects []*unstructured.Unstructured) string {
	b.Helper()
	text, err := (&strategy.Strategy{Objects: objects}).Serialize()
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, text, 0o644); err != nil {
		b.Fatal(err)
	}
	return path
}

// clean removes every object of the product and its namespace (with what
// Helm and the plugin keep there), waits until they are gone, and creates
// the namespace again, empty: the product texts do not hold it, and all
// three programs install into an existing namespace.
func (p *applyProduct) clean(b *testing.B) {
	b.Helper()
	ctx := context.WithoutCancel(b.Context())
	var outside []*unstructured.Unstructured
	for _, o := range p.whole {
		if o.GetNamespace() != p.namespace {
			outside = append(outside, o)
		}
	}
	if len(outside) > 0 {
		// The custom resources of each CRD are listed from the API
		// server's cache first, as the plugin's uninstall does
		// (readyCustomResources): a CRD whose kind's storage the cleanup
		// finalizer creates itself is otherwise kept for minutes at times.
		quiet := rest.CopyConfig(p.env.Config)
		quiet.WarningHandler = rest.NoWarnings{} // deprecated versions
		dyn, err := dynamic.NewForConfig(quiet)
		if err != nil {
			b.Fatal(err)
		}
		for _, o := range outside {
			if gvr, ok := strategy.DefinedResource(o); ok {
				_, _ = dyn.Resource(gvr).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
			}
		}
		path := p.write(b, "clean.yaml", outside)
		var stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, p.kubectl, "--kubeconfig", p.kubeconfig, "delete", "-f", path, "--ignore-not-found", "--wait=true")
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			// Objects of kinds the cluster does not serve (now) do not exist.
			for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
				if !strings.HasPrefix(line, "resource mapping not found") && line != "ensure CRDs are installed first" && !strings.HasPrefix(line, "Warning:") {
					b.Fatalf("kubectl delete: %v\n%s", err, tail(stderr.Bytes()))
				}
			}
		}
	}
	// kubectl delete --wait does not wait when some kinds of the text are
	// not served (the custom resources once their CRD is gone): a CRD
	// still being deleted (its finalizer removing the custom resources)
	// would be found by the next round.
	crds := p.env.Dynamic.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	crdCtx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	for _, o := range outside {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		if err := testenv.Poll(crdCtx, "CRD "+o.GetName()+" gone", func(ctx context.Context) (bool, string, error) {
			_, err := crds.Get(ctx, o.GetName(), metav1.GetOptions{})
			return apierrors.IsNotFound(err), "", nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	if err := p.env.Kube.CoreV1().Namespaces().Delete(ctx, p.namespace, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		b.Fatal(err)
	}
	if err := testenv.Poll(ctx, "namespace "+p.namespace+" gone", func(ctx context.Context) (bool, string, error) {
		_, err := p.env.Kube.CoreV1().Namespaces().Get(ctx, p.namespace, metav1.GetOptions{})
		return apierrors.IsNotFound(err), "", nil
	}); err != nil {
		b.Fatal(err)
	}
	if _, err := p.env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.namespace}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
}

// serverCPU is the API server's CPU time so far (its
// process_cpu_seconds_total metric).
func (p *applyProduct) serverCPU(b *testing.B) time.Duration {
	b.Helper()
	raw, err := p.env.Kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.WithoutCancel(b.Context()))
	if err != nil {
		b.Fatalf("read the API server's metrics: %v", err)
	}
	cpu, err := testenv.SumSamples(bytes.NewReader(raw), "process_cpu_seconds_total", "")
	if err != nil || cpu == 0 {
		b.Fatalf("the API server's process_cpu_seconds_total: %v, %v", cpu, err)
	}
	return time.Duration(cpu * float64(time.Second))
}

// settle waits, untimed, until the API server is idle (under 0.25 s of CPU
// in a second, reading its metrics included; an idle local cluster's takes
// 0.1-0.15 s; at most a minute): the previous round's cleanup goes on in it
// after the objects are gone (each CRD deleted rebuilds its OpenAPI
// documents), and would otherwise be counted to the side that runs next.
func (p *applyProduct) settle(b *testing.B) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for last := p.serverCPU(b); ; {
		time.Sleep(time.Second)
		now := p.serverCPU(b)
		if now-last < 250*time.Millisecond {
			return
		}
		if time.Now().After(deadline) {
			b.Logf("the API server is still busy after a minute (%.2f s of CPU in the last second); measuring anyway", (now - last).Seconds())
			return
		}
		last = now
	}
}

// kubectlApply applies the text at path with kubectl (untimed) and returns
// what kubectl printed it applied, "kind.group/name" each.
func (p *applyProduct) kubectlApply(b *testing.B, path string) map[string]bool {
	b.Helper()
	out, _ := exec.CommandContext(b.Context(), p.kubectl, "--kubeconfig", p.kubeconfig, "apply", "--server-side", "-f", path).Output() // fails for the objects it cannot apply
	applied := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if ref, ok := strings.CutSuffix(line, " serverside-applied"); ok {
			applied[ref] = true
		}
	}
	p.clean(b)
	return applied
}

// keepApplied keeps only the product's objects kubectl applied.
func (p *applyProduct) keepApplied(applied map[string]bool) {
	common := &strategy.Strategy{Identity: p.s.Identity}
	for _, o := range p.s.Objects {
		ref := strings.ToLower(o.GetKind())
		if g := o.GroupVersionKind().Group; g != "" {
			ref += "." + g
		}
		if applied[ref+"/"+o.GetName()] {
			common.Objects = append(common.Objects, o)
		}
	}
	p.s = common
}

// chart writes the product's objects as a chart: CRDs (by the kind table's
// health rule) in crds/, as Helm wants them, every other object in a
// template of its own.
func (p *applyProduct) chart(b *testing.B) string {
	b.Helper()
	dir := filepath.Join(p.dir, "chart")
	for _, sub := range []string{"crds", "templates"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte("apiVersion: v2\nname: bench-product\nversion: 1.0.0\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	for i, o := range p.s.Objects {
		data, err := strategy.MarshalObject(o)
		if err != nil {
			b.Fatal(err)
		}
		sub := "templates"
		if info, ok := kinds.Lookup(o.GroupVersionKind().GroupKind()); ok && info.Health == kinds.HealthCRD {
			sub = "crds"
		} else {
			// Templates are Go templates: keep any "{{" of the object as text.
			data = bytes.ReplaceAll(data, []byte("{{"), []byte(`{{ "{{" }}`))
		}
		if err := os.WriteFile(filepath.Join(dir, sub, fmt.Sprintf("%05d.yaml", i)), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

// compare runs kubectl, Helm and ours on the product, each from an empty
// cluster.
func (p *applyProduct) compare(b *testing.B, ours, helm string) {
	text := p.write(b, "product.yaml", p.s.Objects)
	chart := p.chart(b)
	n := len(p.s.Objects)
	b.Logf("%d objects, text %s, chart %s", n, text, chart)
	// run runs one side; a peer (kubectl, Helm) that fails is recorded as
	// failed, ours fails the benchmark.
	run := func(b *testing.B, peer bool, cmd *exec.Cmd, requests func(stdout, stderr string) int, objects func(stdout string) int) benchcmp.Process {
		b.Helper()
		p.clean(b)
		p.settle(b)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		before := p.serverCPU(b)
		res, err := benchcmp.RunProcess(cmd)
		res.ServerCPU = p.serverCPU(b) - before
		if err != nil {
			err = fmt.Errorf("%s: %v\n%s\n%s", strings.Join(cmd.Args, " "), err, tail(stdout.Bytes()), tail(stderr.Bytes()))
			if !peer {
				b.Fatal(err)
			}
			res.Failed = err
			if lines := strings.Split(strings.TrimSpace(stderr.String()), "\n"); strings.HasPrefix(lines[len(lines)-1], "requests ") {
				res.Requests = requests(stdout.String(), stderr.String())
			}
			return res
		}
		res.Requests = requests(stdout.String(), stderr.String())
		res.Objects = objects(stdout.String())
		if res.Objects != n {
			b.Fatalf("%s applied %d of %d objects\n%s", cmd.Args[0], res.Objects, n, tail(stdout.Bytes()))
		}
		return res
	}
	all := func(string) int { return n }
	peers := map[string]benchcmp.ProcessSide{
		"kubectl": {Name: "kubectl", Run: func(b *testing.B) benchcmp.Process {
			cmd := exec.CommandContext(b.Context(), p.kubectl, "--kubeconfig", p.kubeconfig, "--cache-dir", b.TempDir(), "-v=6", "apply", "--server-side", "-f", text)
			return run(b, true, cmd, func(_, stderr string) int { return strings.Count(stderr, "round_trippers.go") },
				func(stdout string) int { return strings.Count(stdout, " serverside-applied") })
		}},
		"helm": {Name: "helm", Run: func(b *testing.B) benchcmp.Process {
			cmd := exec.CommandContext(b.Context(), helm, "--kubeconfig", p.kubeconfig, "--namespace", p.namespace, "--release", "bench-product", chart)
			cmd.Env = append(os.Environ(), "HELM_QPS=1000", "HELM_BURST_LIMIT=1000", "HELM_CACHE_HOME="+b.TempDir(), "HELM_CONFIG_HOME="+b.TempDir())
			return run(b, true, cmd, reportedRequests(b), all)
		}},
	}
	// The peers, kubectl and helm unless INSTALLSTRATEGY_BENCH_PEERS names
	// others (e.g. "helm" to leave out kubectl's 40 minutes at 20,000).
	var sides []benchcmp.ProcessSide
	for _, name := range strings.Split(cmp.Or(os.Getenv("INSTALLSTRATEGY_BENCH_PEERS"), "kubectl,helm"), ",") {
		side, ok := peers[strings.TrimSpace(name)]
		if !ok {
			b.Fatalf("INSTALLSTRATEGY_BENCH_PEERS: no peer %q (kubectl, helm)", name)
		}
		sides = append(sides, side)
	}
	sides = append(sides, benchcmp.ProcessSide{Name: "installstrategy", Run: func(b *testing.B) benchcmp.Process {
		args := []string{"apply", text, "--kubeconfig", p.kubeconfig, "-n", p.namespace,
			"--version", p.s.Identity.Version, "--registry", p.s.Identity.Registry, "--identifier", p.s.Identity.Identifier}
		// e.g. INSTALLSTRATEGY_BENCH_PLUGIN_FLAGS=--kube-api-qps=-1
		args = append(args, strings.Fields(os.Getenv("INSTALLSTRATEGY_BENCH_PLUGIN_FLAGS"))...)
		cmd := exec.CommandContext(b.Context(), ours, args...)
		return run(b, false, cmd, reportedRequests(b), writtenObjects)
	}})
	benchcmp.CompareProcesses(b, sides...)
}

// writtenObjects reads the objects the plugin wrote from its summary line
// ("summary: N created, N updated, N recreated, ...").
func writtenObjects(stdout string) int {
	_, line, _ := strings.Cut(stdout, "\nsummary: ")
	var created, updated, recreated int
	if _, err := fmt.Sscanf(line, "%d created, %d updated, %d recreated", &created, &updated, &recreated); err != nil {
		return -1
	}
	return created + updated + recreated
}

// reportedRequests reads the "requests N" last line of standard error of
// hack/benchapply and hack/benchhelm.
func reportedRequests(b *testing.B) func(_, stderr string) int {
	return func(_, stderr string) int {
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		n, err := strconv.Atoi(strings.TrimPrefix(lines[len(lines)-1], "requests "))
		if err != nil {
			b.Fatalf("no request count at the end of standard error: %q", lines[len(lines)-1])
		}
		return n
	}
}

// buildBenchApply builds hack/benchapply (the plugin with its requests
// counted) into a temporary folder, as the plugin's release is built
// (internal/gobuild: static, stripped).
func buildBenchApply(b *testing.B) string {
	b.Helper()
	out := filepath.Join(b.TempDir(), "benchapply")
	if msg, err := gobuild.Command(b.Context(), out, "github.com/installstrategy/installstrategy/hack/benchapply").CombinedOutput(); err != nil {
		b.Fatalf("go build hack/benchapply: %v\n%s", err, msg)
	}
	return out
}

// buildBenchHelm builds hack/benchhelm, a module of its own, into the user
// cache folder under a key of its sources and of how it is built, so that
// Helm's dependencies are compiled once per pin. It is built as Helm's
// releases are (static, stripped: internal/gobuild), as ours is.
func buildBenchHelm(b *testing.B) string {
	b.Helper()
	src := filepath.Join("..", "..", "hack", "benchhelm")
	h := sha256.New()
	for _, name := range []string{"go.mod", "go.sum", "main.go"} {
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(h, "%s %d\n", name, len(data))
		h.Write(data)
	}
	fmt.Fprintf(h, "build %q\n", gobuild.Env)
	cache, err := os.UserCacheDir()
	if err != nil {
		b.Fatal(err)
	}
	out := filepath.Join(cache, "installstrategy", "benchhelm", hex.EncodeToString(h.Sum(nil))[:16], "benchhelm")
	if _, err := os.Stat(out); err == nil {
		return out
	}
	b.Logf("building %s (Helm 4 SDK; the first build takes minutes)", out)
	cmd := gobuild.Command(b.Context(), out+".tmp", ".")
	cmd.Dir = src
	cmd.Env = append(cmd.Env, "GOWORK=off")
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build hack/benchhelm: %v\n%s", err, msg)
	}
	if err := os.Rename(out+".tmp", out); err != nil {
		b.Fatal(err)
	}
	return out
}

// tail is the end of a program's output, for a failure message.
func tail(out []byte) string {
	const limit = 4000
	if len(out) > limit {
		return "..." + string(out[len(out)-limit:])
	}
	return string(out)
}
