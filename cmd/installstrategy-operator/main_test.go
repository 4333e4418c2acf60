package main

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/operator"
)

func discard(int) logr.Logger { return logr.Discard() }

func TestFlags(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	tests := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--kubeconfig=/does/not/exist"}, "kubeconfig /does/not/exist"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"--no-such-flag"}, "flag provided but not defined"},
		{[]string{"--stage-deadline=-1s"}, "--stage-deadline -1s: must be positive"},
		{[]string{"--max-concurrent-reconciles=-1"}, "--max-concurrent-reconciles -1: must not be negative"},
		{[]string{"--dump-install-strategy", "--strategy-format=yaml"}, `unknown format "yaml"`},
		{[]string{"--dump-install-strategy"}, "not running in a cluster"},
		{[]string{"--dump-install-strategy", "--kubeconfig=/does/not/exist"}, "kubeconfig /does/not/exist"},
		{[]string{"--dump-pod-env=NOVALUE"}, `"NOVALUE" is not k=v`},
		{[]string{"--helm-renderer=/does/not/exist"}, "--helm-renderer /does/not/exist: stat /does/not/exist: no such file"},
		{[]string{"--helm-renderer=" + os.TempDir()}, "--helm-renderer " + os.TempDir() + ": not an executable file"},
		{[]string{"--dump-pod-node-selector==x"}, `"=x" is not k=v`},
		{[]string{"--dump-pod-tolerations=key=value"}, `"key=value" is not key[=value]:Effect`},
	}
	for _, tt := range tests {
		err := run(discard, tt.args)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("run(%q) = %v, want an error containing %q", tt.args, err, tt.wantErr)
		}
	}
}

func TestExitCode(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	for _, tt := range []struct {
		args []string
		want int
	}{
		{[]string{"--help"}, 0},
		{[]string{"-h"}, 0},
		{[]string{"--no-such-flag"}, 1},
		{[]string{"--kubeconfig=/does/not/exist"}, 1},
	} {
		if got := exitCode(discard, tt.args); got != tt.want {
			t.Errorf("exitCode(%q) = %d, want %d", tt.args, got, tt.want)
		}
	}
}

// TestDumpMode runs the dump mode in-process against the cluster, in
// KubeVirt's form, twice: one strategy ConfigMap results.
func TestDumpMode(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	cfg := &identity.Config{Namespace: ns, Registry: "registry.example/sample", Version: "v1.0.0"}
	text, _ := cfg.JSON()
	t.Setenv(identity.EnvVar, string(text))
	args := []string{"--dump-install-strategy", "--kubeconfig=" + os.Getenv(testenv.KubeconfigEnv), "--strategy-format=kubevirt"}
	for range 2 {
		if err := run(discard, args); err != nil {
			t.Fatal(err)
		}
	}
	cms, err := env.Kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: codec.KubeVirtStrategyLabel})
	if err != nil || len(cms.Items) != 1 {
		t.Fatalf("strategy configmaps: %v, %v; want one", cms, err)
	}
	id, _ := cfg.Identity(nil)
	if got := codec.DescribeConfigMap(&cms.Items[0]).Identity; got != id {
		t.Fatalf("identity %+v, want %+v", got, id)
	}
}

// TestManagerMode runs the manager with leader election in a test
// namespace until it holds the lease, then stops it.
func TestManagerMode(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- runManager(mctx, logr.Discard(), env.Config, managerOptions{
			leaderElect: true, leaderElectionNamespace: ns, namespace: ns, keyNamespace: ns + "-keys",
			probeAddr: "0", metricsAddr: "0", qps: 50, burst: 100,
		})
	}()
	testenv.WaitFor(ctx, t, "leader election lease", func(ctx context.Context) (bool, string, error) {
		l, err := env.Kube.CoordinationV1().Leases(ns).Get(ctx, leaderElectionID, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		holder := ""
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		return holder != "", "holder " + holder, nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("manager: %v", err)
	}
}

// TestVersionFlag: --version prints the build's version and exits 0
// without a cluster. (The release test checks a stamped build.)
func TestVersionFlag(t *testing.T) {
	var b strings.Builder
	stdout = &b
	t.Cleanup(func() { stdout = os.Stdout })
	if got := exitCode(discard, []string{"--version"}); got != 0 {
		t.Fatalf("exit %d", got)
	}
	if !strings.HasPrefix(b.String(), "installstrategy-operator (devel) (") && !strings.HasPrefix(b.String(), "installstrategy-operator v") {
		t.Fatalf("--version printed %q", b.String())
	}
}

// The operator refuses to start when its key namespace is the namespace
// it watches, named or by default (--leader-election-namespace), before
// it connects to anything.
func TestKeyNamespaceMustNotBeWatched(t *testing.T) {
	for _, o := range []managerOptions{
		{namespace: "tenant", keyNamespace: "tenant"},
		{namespace: "tenant", leaderElectionNamespace: "tenant"},
	} {
		_, err := newManager(logr.Discard(), &rest.Config{Host: "https://127.0.0.1:1"}, o)
		if !errors.Is(err, operator.ErrKeyNamespaceWatched) {
			t.Errorf("%+v: %v, want %v", o, err, operator.ErrKeyNamespaceWatched)
		}
	}
	if code := exitCode(discard, []string{"--kubeconfig", "/nonexistent", "--namespace", "x", "--key-namespace", "x"}); code == 0 {
		t.Error("exit code 0")
	}
}
