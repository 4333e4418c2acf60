package e2e

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/installstrategy/installstrategy/internal/testenv"
)

// readmeBlock is a shell block of a README, with the output it must
// print (the text block right after it, if any).
type readmeBlock struct {
	line   int
	script string
	want   []string
}

// background says the block runs until stopped, in its own terminal.
func (b readmeBlock) background() bool {
	return strings.HasPrefix(b.script, "# In its own terminal")
}

// mustFail says the block must fail: it begins with "# Refused".
func (b readmeBlock) mustFail() bool {
	return strings.HasPrefix(b.script, "# Refused")
}

// readmeBlocks reads the ```sh blocks of a Markdown file, each with the
// lines of the ```text block that follows it (only blank lines between).
func readmeBlocks(t *testing.T, path string) []readmeBlock {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks []readmeBlock
	var lines []string
	fence, n, start := "", 0, 0
	// afterSh: the last block closed was a shell block, and only blank
	// lines followed it.
	afterSh := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case fence == "" && strings.HasPrefix(line, "```"):
			fence, lines, start = strings.TrimPrefix(line, "```"), nil, n
		case fence != "" && line == "```":
			switch {
			case fence == "sh":
				blocks = append(blocks, readmeBlock{line: start, script: strings.Join(lines, "\n")})
				afterSh = true
			case fence == "text" && afterSh:
				blocks[len(blocks)-1].want = lines
				afterSh = false
			default:
				afterSh = false
			}
			fence = ""
		case fence != "":
			lines = append(lines, line)
		case strings.TrimSpace(line) != "":
			afterSh = false
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return blocks
}

// TestKubeVirtOperatorREADME runs every shell block of
// examples/kubevirt-operator/README.md, in order, against the local
// cluster, from the repository's root: the example operator (built and
// run by the README's own `go run`) installs KubeVirt v1.8.4 as shipped
// (virt-operator's and virt-api's webhooks failurePolicy Fail), answers
// virt-operator-validator through the Service the strategy makes, on the
// certificate the engine issued for it (a bad edit and a second KubeVirt
// refused with virt-operator's words, good edits and the upgrade to
// v1.9.0 by imageTag admitted), refuses the delete while a
// VirtualMachineInstance exists and uninstalls once it is gone. What kwok
// cannot run, the test plays: the dump Jobs' work (KubeVirt's real
// strategies, as shipped) and a stand-in for virt-api's webhooks.
func TestKubeVirtOperatorREADME(t *testing.T) {
	testenv.Lock(t, testenv.KubeVirtLock)
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 25*time.Minute)
	defer cancel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	blocks := readmeBlocks(t, filepath.Join(root, "examples/kubevirt-operator/README.md"))
	var bg, fg, refused int
	for _, b := range blocks {
		switch {
		case b.background():
			bg++
		case b.mustFail():
			refused++
		default:
			fg++
		}
	}
	if bg != 2 || refused < 3 || fg < 5 {
		t.Fatalf("README has %d background, %d refused and %d other blocks; want the operator and the bridge, the refusals and the steps", bg, refused, fg)
	}

	// What kwok cannot run.
	mctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		serveKubeVirtDumps(mctx, t, env, "kubevirt", testenv.KubeVirtStrategyAsShipped)
	}()
	t.Cleanup(func() { stop(); wg.Wait() })
	env.ServeWebhookStandIn(ctx, t, "kubevirt", "virt-api", "kubevirt-virt-api-certs")

	environ := append(os.Environ(), "KUBECONFIG="+os.Getenv(testenv.KubeconfigEnv))
	type proc struct {
		cmd  *exec.Cmd
		out  *testenv.SyncBuffer
		done chan struct{}
		line int
	}
	var procs []*proc
	t.Cleanup(func() {
		for _, p := range procs {
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(30 * time.Second):
				_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
				<-p.done
			}
			t.Logf("README line %d (background) printed:\n%s", p.line, p.out.String())
		}
	})
	// Registered after the processes' stop: runs before it, so that the
	// operator still removes what a failed run left.
	vmis := env.Dynamic.Resource(schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstances"}).Namespace("default")
	kvs := env.Dynamic.Resource(kubevirtsGVR)
	t.Cleanup(func() {
		cctx := context.WithoutCancel(ctx)
		_ = vmis.Delete(cctx, "testvmi", metav1.DeleteOptions{})
		_ = kvs.Namespace("default").Delete(cctx, "second", metav1.DeleteOptions{})
		kubeVirtGone(cctx, t, env, kvs.Namespace("kubevirt"), "kubevirt")
		// config/operator.yaml, had the README not removed it.
		_ = env.Kube.AppsV1().Deployments("kubevirt").Delete(cctx, "kubevirt-installstrategy-operator", metav1.DeleteOptions{})
		_ = env.Kube.CoreV1().ServiceAccounts("kubevirt").Delete(cctx, "kubevirt-installstrategy-operator", metav1.DeleteOptions{})
		_ = env.Kube.RbacV1().ClusterRoleBindings().Delete(cctx, "kubevirt-installstrategy-operator", metav1.DeleteOptions{})
	})

	for _, b := range blocks {
		if b.background() {
			p := &proc{cmd: exec.Command("bash", "-euo", "pipefail", "-c", b.script), out: &testenv.SyncBuffer{}, done: make(chan struct{}), line: b.line}
			p.cmd.Dir, p.cmd.Env, p.cmd.Stdout, p.cmd.Stderr = root, environ, p.out, p.out
			p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
			if err := p.cmd.Start(); err != nil {
				t.Fatalf("README line %d: %v", b.line, err)
			}
			go func() { _ = p.cmd.Wait(); close(p.done) }()
			procs = append(procs, p)
			continue
		}
		cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", b.script)
		cmd.Dir, cmd.Env = root, environ
		out, err := cmd.CombinedOutput()
		t.Logf("README line %d:\n%s\n-> %v\n%s", b.line, b.script, err, out)
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("README line %d: %v", b.line, err)
		}
		if b.mustFail() != (err != nil) {
			t.Fatalf("README line %d: exit %v, want failure %v:\n%s", b.line, err, b.mustFail(), out)
		}
		for _, w := range b.want {
			if !strings.Contains(string(out), strings.TrimSpace(w)) {
				t.Fatalf("README line %d printed\n%s\nwithout %q", b.line, out, w)
			}
		}
		for _, p := range procs {
			select {
			case <-p.done:
				t.Fatalf("README line %d (background) ended:\n%s", p.line, p.out.String())
			default:
			}
		}
	}

	// The README's end state: the KubeVirt, KubeVirt's components and the
	// operator's Deployment are gone.
	if _, err := kvs.Namespace("kubevirt").Get(ctx, "kubevirt", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the KubeVirt after the README: %v", err)
	}
	for _, name := range []string{"virt-api", "kubevirt-installstrategy-operator"} {
		if _, err := env.Kube.AppsV1().Deployments("kubevirt").Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("Deployment %s after the README: %v", name, err)
		}
	}
}
