package localcluster_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/installstrategy/installstrategy/internal/localcluster"
	"github.com/installstrategy/installstrategy/internal/testenv"
)

// TestUpDownLifecycle starts a second, one-node cluster of its own (other
// ports, a temporary state directory), with a real node of its own as
// root, crashes one component, checks that the next Up cleans the crashed
// run up, and that Down leaves no process (and no bridge).
func TestUpDownLifecycle(t *testing.T) {
	bin := testenv.ToolsDir(t)
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "state")
	opts := localcluster.Options{StateDir: dir, BinDir: bin, Nodes: 1, Log: testWriter{t}, RealNode: os.Geteuid() == 0}
	t.Cleanup(func() {
		// Leave nothing running even when the test fails half way.
		if err := localcluster.Down(context.WithoutCancel(ctx), dir, nil); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})

	first, err := localcluster.Up(ctx, opts)
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	requireAlive(t, first.PIDs)
	if len(first.Nodes) != 1 {
		t.Fatalf("nodes = %v, want 1", first.Nodes)
	}
	env := first.Env()
	if !strings.HasSuffix(env, "export KUBECONFIG="+first.Kubeconfig+"\n") {
		t.Fatalf("env does not end with the KUBECONFIG export:\n%s", env)
	}
	// Its Services' ClusterIPs are not the test cluster's: a helper serving
	// one cluster's webhook would answer the other's API server.
	mine, theirs := kubernetesClusterIP(ctx, t, first.Kubeconfig), kubernetesClusterIP(ctx, t, "")
	if mine == theirs {
		t.Errorf("the second cluster's kubernetes Service has the test cluster's ClusterIP %s", mine)
	}

	// A second Up of a healthy cluster keeps it.
	again, err := localcluster.Up(ctx, opts)
	if err != nil {
		t.Fatalf("up of a running cluster: %v", err)
	}
	if again.PIDs[localcluster.KubeAPIServer] != first.PIDs[localcluster.KubeAPIServer] {
		t.Fatalf("up of a running cluster restarted it: apiserver pid %d, was %d", again.PIDs[localcluster.KubeAPIServer], first.PIDs[localcluster.KubeAPIServer])
	}

	// Crash the scheduler: the cluster is no longer running, and the next Up
	// stops the rest of the crashed run and starts afresh.
	if err := syscall.Kill(first.PIDs[localcluster.KubeScheduler], syscall.SIGKILL); err != nil {
		t.Fatalf("kill scheduler: %v", err)
	}
	testenv.WaitFor(ctx, t, "scheduler gone", func(ctx context.Context) (bool, string, error) {
		_, err := localcluster.Load(dir)
		return errors.Is(err, localcluster.ErrNotRunning), "cluster still reported as running", nil
	})
	second, err := localcluster.Up(ctx, opts)
	if err != nil {
		t.Fatalf("up after a crash: %v", err)
	}
	requireGone(t, first.PIDs)
	requireAlive(t, second.PIDs)

	if err := localcluster.Down(ctx, dir, testWriter{t}); err != nil {
		t.Fatalf("down: %v", err)
	}
	requireGone(t, second.PIDs)
	if second.RealNode != nil {
		if out, err := exec.Command("ip", "-o", "link").Output(); err != nil || strings.Contains(string(out), " isrn"+strconv.Itoa(second.RealNode.Slot)+":") {
			t.Errorf("the real node's bridge is left after down (err %v):\n%s", err, out)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("state dir after down: %v, want it removed", err)
	}
	// Down of a cluster that is gone is a no-op.
	if err := localcluster.Down(ctx, dir, nil); err != nil {
		t.Fatalf("second down: %v", err)
	}
}

func TestDownRefusesForeignDirectory(t *testing.T) {
	dir := t.TempDir()
	keep := filepath.Join(dir, "precious")
	if err := os.WriteFile(keep, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := localcluster.Down(t.Context(), dir, nil)
	if err == nil || !strings.Contains(err.Error(), "marker") {
		t.Fatalf("down of a directory that is no cluster state: err = %v, want a refusal", err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("down removed a foreign file: %v", err)
	}
}

func TestUpRequiresBinaries(t *testing.T) {
	_, err := localcluster.Up(t.Context(), localcluster.Options{StateDir: t.TempDir(), BinDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "make tools") {
		t.Fatalf("up without binaries: err = %v, want one that says to run make tools", err)
	}
}

// TestUpReportsAFailingComponent starts a "cluster" whose etcd exits at once:
// Up must fail, name the component, show the end of its log, and leave no
// state behind.
func TestUpReportsAFailingComponent(t *testing.T) {
	bin := t.TempDir()
	for _, name := range localcluster.Components {
		script := "#!/bin/sh\nexec sleep 600\n"
		if name == localcluster.Etcd {
			script = "#!/bin/sh\necho 'etcd: fake failure for the test' >&2\nexit 3\n"
		}
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(t.TempDir(), "state")
	_, err := localcluster.Up(t.Context(), localcluster.Options{StateDir: dir, BinDir: bin, Nodes: 1})
	if err == nil {
		t.Fatal("up with a failing etcd succeeded")
	}
	for _, want := range []string{"etcd did not become ready", "exit status 3", "etcd: fake failure for the test"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not contain %q:\n%v", want, err)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state dir after a failed up: %v, want it removed", err)
	}
}

func requireAlive(t *testing.T, pids map[string]int) {
	t.Helper()
	for _, name := range localcluster.Components {
		if _, ok := pids[name]; !ok {
			t.Fatalf("pids = %v, want one per component %v", pids, localcluster.Components)
		}
	}
	for name, pid := range pids {
		if !processAlive(pid) {
			t.Errorf("%s (pid %d) is not running", name, pid)
		}
	}
}

func requireGone(t *testing.T, pids map[string]int) {
	t.Helper()
	for name, pid := range pids {
		if processAlive(pid) {
			t.Errorf("%s (pid %d) is still running", name, pid)
		}
	}
}

// processAlive reports whether pid exists and is not a zombie.
func processAlive(pid int) bool {
	status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return false
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if state, ok := strings.CutPrefix(line, "State:"); ok {
			return !strings.Contains(state, "Z")
		}
	}
	return false
}

// testWriter sends progress messages to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// kubernetesClusterIP returns the kubernetes Service's ClusterIP in the
// cluster of kubeconfig ("": the test cluster).
func kubernetesClusterIP(ctx context.Context, t *testing.T, kubeconfig string) string {
	t.Helper()
	kube := testenv.New(t).Kube
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		if kube, err = kubernetes.NewForConfig(cfg); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := kube.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc.Spec.ClusterIP
}
