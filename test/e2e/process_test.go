package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/installstrategy/installstrategy/internal/gobuild"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/render/helmexec"
)

// The operator binary, built once per test binary.
var (
	operatorBuild    sync.Once
	operatorBin      string
	operatorBuildErr error
)

// operatorBuildDir holds the built binary; TestMain removes it.
var operatorBuildDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if operatorBuildDir != "" {
		_ = os.RemoveAll(operatorBuildDir)
	}
	os.Exit(code)
}

// buildOperator builds cmd/installstrategy-operator and its chart
// renderer (cmd/installstrategy-helm-render) into a folder that lives as
// long as the test binary.
func buildOperator(t testing.TB) string {
	t.Helper()
	operatorBuild.Do(func() {
		dir, err := os.MkdirTemp("", "installstrategy-e2e-")
		if err != nil {
			operatorBuildErr = err
			return
		}
		operatorBuildDir = dir
		operatorBin = filepath.Join(dir, "installstrategy-operator")
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer cancel()
		// As its image is built (static, stripped): its memory is
		// measured. Its chart renderer beside it, where it looks first.
		for _, b := range []struct{ bin, pkg string }{
			{operatorBin, "github.com/installstrategy/installstrategy/cmd/installstrategy-operator"},
			{filepath.Join(dir, helmexec.HelperName), "github.com/installstrategy/installstrategy/cmd/installstrategy-helm-render"},
		} {
			if out, err := gobuild.Command(ctx, b.bin, b.pkg).CombinedOutput(); err != nil {
				operatorBuildErr = fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
				return
			}
		}
	})
	if operatorBuildErr != nil {
		t.Fatal(operatorBuildErr)
	}
	return operatorBin
}

// helmRenderer is the chart renderer buildOperator built: the in-process
// operators of the tests render charts as the operator process does.
func helmRenderer(t testing.TB) helmexec.Renderer {
	return helmexec.Renderer{Path: filepath.Join(filepath.Dir(buildOperator(t)), helmexec.HelperName)}
}

// operatorProcess is the real operator binary running as a process of its
// own, watching one namespace, with its log in a file and its metrics on a
// loopback port.
type operatorProcess struct {
	t       testing.TB
	name    string
	args    []string
	env     []string // added to the test's environment
	logPath string
	metrics string // host:port of /metrics

	mu     sync.Mutex
	cmd    *exec.Cmd
	log    *os.File
	exited chan struct{} // closed once the running process has exited
}

// keyNamespaces holds the operator's own namespace of each test (shared by
// its replicas).
var keyNamespaces sync.Map

// keyNamespace returns the test's operator namespace (signing key, trusted
// keys), made on first use.
func keyNamespace(t testing.TB) string {
	t.Helper()
	if ns, ok := keyNamespaces.Load(t.Name()); ok {
		return ns.(string)
	}
	ns := testenv.New(t).Namespace(t.Context(), t)
	keyNamespaces.Store(t.Name(), ns)
	return ns
}

// newOperatorProcess prepares (does not start) an operator watching ns;
// extra flags are appended. Whatever runs when the test ends is killed; a
// failed test logs the end of the operator's log.
func newOperatorProcess(t testing.TB, name, ns string, extra ...string) *operatorProcess {
	t.Helper()
	bin := buildOperator(t)
	port := freePort(t)
	p := &operatorProcess{t: t, name: name, logPath: filepath.Join(t.TempDir(), name+".log"), metrics: "127.0.0.1:" + strconv.Itoa(port)}
	p.args = append([]string{bin,
		"--kubeconfig", os.Getenv(testenv.KubeconfigEnv),
		"--namespace", ns,
		"--key-namespace", keyNamespace(t),
		"--metrics-bind-address", p.metrics, "--metrics-secure=false", // loopback, scraped by metricSum
		"--health-probe-bind-address", "0",
		"--registry", "registry.example/sample",
		"--stage-deadline", "90s",
		"--resync-period", "1m",
	}, extra...)
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			p.dumpLog(6000)
		}
	})
	return p
}

// start runs the operator; its output is appended to its log.
func (p *operatorProcess) start() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		p.t.Fatalf("operator %s already runs", p.name)
	}
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		p.t.Fatal(err)
	}
	fmt.Fprintf(f, "=== start %s\n", time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.args[0], p.args[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	if len(p.env) > 0 {
		cmd.Env = append(os.Environ(), p.env...)
	}
	// Its own process group, killed with the test binary even when that
	// dies without running cleanups (a go test -timeout panic).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		p.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	p.cmd, p.log, p.exited = cmd, f, exited
}

// kill sends SIGKILL (no shutdown, no lease release) and reaps the
// process; it does nothing when the operator is not running.
func (p *operatorProcess) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
	fmt.Fprintf(p.log, "=== killed %s\n", time.Now().Format(time.RFC3339Nano))
	_ = p.log.Close()
	p.cmd, p.log = nil, nil
}

// running reports whether the process was started and has not exited.
func (p *operatorProcess) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// mustRun fails the test at once when the operator has exited by itself.
func (p *operatorProcess) mustRun() {
	p.t.Helper()
	if !p.running() {
		p.dumpLog(4000)
		p.t.Fatalf("operator %s exited by itself", p.name)
	}
}

// ensureRunning starts the operator again when it is not running (never
// started, killed, or exited by itself).
func (p *operatorProcess) ensureRunning() {
	p.t.Helper()
	if p.running() {
		return
	}
	p.kill() // reap and close the log of one that exited by itself
	p.start()
}

func (p *operatorProcess) dumpLog(tail int) {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return
	}
	if len(b) > tail {
		b = b[len(b)-tail:]
	}
	p.t.Logf("operator %s log (end):\n%s", p.name, b)
}

// logSize is the length of the operator's log so far: an offset for
// stepsSince and logContainsSince.
func (p *operatorProcess) logSize() int64 {
	fi, err := os.Stat(p.logPath)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// logSince returns the operator's log from offset on.
func (p *operatorProcess) logSince(offset int64) []byte {
	b, err := os.ReadFile(p.logPath)
	if err != nil || int64(len(b)) < offset {
		return nil
	}
	return b[offset:]
}

// logContainsSince reports whether the log from offset on holds s.
func (p *operatorProcess) logContainsSince(offset int64, s string) bool {
	return bytes.Contains(p.logSince(offset), []byte(s))
}

// stepsSince lists the rollout step events the operator logged (at
// --log-verbosity 1) from offset on, as "started STEP" or "ready STEP".
func (p *operatorProcess) stepsSince(offset int64) []string {
	var out []string
	for line := range strings.SplitSeq(string(p.logSince(offset)), "\n") {
		for _, ev := range []string{"started", "ready"} {
			if strings.Contains(line, `"msg"="step `+ev+`"`) {
				_, step, _ := strings.Cut(line, `"step"="`)
				step, _, _ = strings.Cut(step, `"`)
				out = append(out, ev+" "+step)
			}
		}
	}
	return out
}

// logContains reports whether the operator's log holds s.
func (p *operatorProcess) logContains(s string) bool {
	b, err := os.ReadFile(p.logPath)
	return err == nil && bytes.Contains(b, []byte(s))
}

// metricSum scrapes the operator's /metrics and sums the samples of the
// named metric whose label set holds match (any labels when ""). ok is false
// when the endpoint does not answer.
func (p *operatorProcess) metricSum(ctx context.Context, name, match string) (sum float64, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.metrics+"/metrics", nil)
	if err != nil {
		return 0, false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false, nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, false, fmt.Errorf("metrics of %s: %s", p.name, resp.Status)
	}
	sum, err = testenv.SumSamples(resp.Body, name, match)
	return sum, true, err
}

// freePort returns a loopback TCP port nobody listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// dumpOnFailure logs the namespace's workloads when the test fails. Call it
// after registering the cleanup that removes the product: cleanups run last
// in, first out, so the state is logged before it is torn down.
func (e *e2e) dumpOnFailure(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() {
			e.dumpWorkloads(t)
		}
	})
}

// dumpWorkloads logs the state of the namespace's Deployments, DaemonSets,
// ReplicaSets and pods, the nodes' readiness and the latest Events: what is
// needed to tell why a rollout did not finish.
func (e *e2e) dumpWorkloads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 30*time.Second)
	defer cancel()
	var b strings.Builder
	var deps appsv1.DeploymentList
	if err := e.c.List(ctx, &deps, client.InNamespace(e.ns)); err == nil {
		for _, d := range deps.Items {
			fmt.Fprintf(&b, "deployment %s gen %d/%d replicas %d updated %d ready %d available %d deleting %v\n", d.Name, d.Status.ObservedGeneration, d.Generation,
				d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas, d.DeletionTimestamp != nil)
			for _, c := range d.Status.Conditions {
				fmt.Fprintf(&b, "  %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
			}
		}
	}
	var dss appsv1.DaemonSetList
	if err := e.c.List(ctx, &dss, client.InNamespace(e.ns)); err == nil {
		for _, d := range dss.Items {
			fmt.Fprintf(&b, "daemonset %s gen %d/%d desired %d updated %d ready %d available %d maxUnavailable %v\n", d.Name, d.Status.ObservedGeneration, d.Generation,
				d.Status.DesiredNumberScheduled, d.Status.UpdatedNumberScheduled, d.Status.NumberReady, d.Status.NumberAvailable, d.Spec.UpdateStrategy.RollingUpdate)
		}
	}
	var rss appsv1.ReplicaSetList
	if err := e.c.List(ctx, &rss, client.InNamespace(e.ns)); err == nil {
		for _, r := range rss.Items {
			fmt.Fprintf(&b, "replicaset %s revision %s replicas %d/%d ready %d available %d\n", r.Name, r.Annotations["deployment.kubernetes.io/revision"],
				r.Status.Replicas, ptrValue(r.Spec.Replicas), r.Status.ReadyReplicas, r.Status.AvailableReplicas)
		}
	}
	var pods corev1.PodList
	if err := e.c.List(ctx, &pods, client.InNamespace(e.ns)); err == nil {
		for _, p := range pods.Items {
			ready := "?"
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady {
					ready = string(c.Status)
				}
			}
			fmt.Fprintf(&b, "pod %s phase %s ready %s node %q deleting %v\n", p.Name, p.Status.Phase, ready, p.Spec.NodeName, p.DeletionTimestamp != nil)
		}
	}
	var nodes corev1.NodeList
	if err := e.c.List(ctx, &nodes); err == nil {
		for _, n := range nodes.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady {
					fmt.Fprintf(&b, "node %s Ready=%s since %s taints %v\n", n.Name, c.Status, c.LastTransitionTime.Format(time.RFC3339), n.Spec.Taints)
				}
			}
		}
	}
	var events corev1.EventList
	if err := e.c.List(ctx, &events, client.InNamespace(e.ns)); err == nil {
		items := events.Items
		slices.SortFunc(items, func(a, b corev1.Event) int { return a.LastTimestamp.Compare(b.LastTimestamp.Time) })
		if len(items) > 40 {
			items = items[len(items)-40:]
		}
		for _, ev := range items {
			fmt.Fprintf(&b, "event %s %s %s/%s %s: %s\n", ev.LastTimestamp.Format(time.RFC3339), ev.Type, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Reason, ev.Message)
		}
	}
	t.Logf("state of namespace %s:\n%s", e.ns, b.String())
}

func ptrValue[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
