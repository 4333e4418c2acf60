package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
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
		{[]string{"--metrics-cert-path=" + os.TempDir()}, "--metrics-cert-path " + os.TempDir() + ": stat " + os.TempDir() + "/tls.crt: no such file"},
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
	cms, err := env.Kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: metakeys.KubeVirtStrategyLabel})
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
			probeAddr: "0", metricsAddr: "0", qps: 50, burst: 100, skipNameValidation: true,
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

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestMetricsAuth: the manager serves /metrics over HTTPS to callers the
// API server authenticates and authorizes only: no token (or another
// scheme, or a token the API server does not know) 401, a token without
// the metrics-reader role (or with a role for another path) 403, with it
// 200 and metrics; the reader's token on another path 403; plain HTTP
// gets nothing; the health probes stay plain HTTP.
func TestMetricsAuth(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	env.InstallCRDFile(ctx, t, "../../config/crd/bases/installstrategy.io_installations.yaml")
	addr, probe := freeAddr(t), freeAddr(t)
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- runManager(mctx, logr.Discard(), env.Config, managerOptions{
			leaderElectionNamespace: ns, namespace: ns, keyNamespace: env.Namespace(ctx, t), probeAddr: probe, metricsAddr: addr, qps: 50, burst: 100, skipNameValidation: true,
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	token := func(name string) string {
		if _, err := env.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := env.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	reader, other, healthz := token("reader"), token("other"), token("healthz")
	// The rule of config/rbac/metrics_reader_role.yaml (a copy under a
	// name of this test's), and one for another path.
	bind := func(sa, path string) {
		name := ns + "-" + sa
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
			Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{path}, Verbs: []string{"get"}}}}
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}}}
		if _, err := env.Kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = env.Kube.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
		})
		if _, err := env.Kube.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = env.Kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
		})
	}
	bind("reader", "/metrics")
	bind("healthz", "/healthz")
	// The server's certificate is self-signed: the test checks who may
	// read, not the certificate.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	getPath := func(path, auth string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+path, nil)
		if err != nil {
			return 0, "", err
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	testenv.WaitFor(ctx, t, "the metrics server", func(ctx context.Context) (bool, string, error) {
		select {
		case err := <-done:
			t.Fatalf("manager: %v", err)
		default:
		}
		code, _, err := getPath("/metrics", "")
		return err == nil, fmt.Sprint(code, err), nil
	})
	for _, tt := range []struct {
		who, path, auth string
		want            int
	}{
		{"no token", "/metrics", "", http.StatusUnauthorized},
		{"a bad token", "/metrics", "Bearer not-a-token", http.StatusUnauthorized},
		{"basic auth", "/metrics", "Basic cmVhZGVyOnJlYWRlcg==", http.StatusUnauthorized},
		{"the reader's token as basic", "/metrics", "Basic " + reader, http.StatusUnauthorized},
		{"no role", "/metrics", "Bearer " + other, http.StatusForbidden},
		{"a role for another path", "/metrics", "Bearer " + healthz, http.StatusForbidden},
		// Only /metrics is served (behind the filter); another path is
		// not found, whoever asks.
		{"another path", "/debug/pprof/heap", "", http.StatusNotFound},
		{"metrics-reader", "/metrics", "Bearer " + reader, http.StatusOK},
		{"metrics-reader, scheme in lower case", "/metrics", "bearer " + reader, http.StatusOK},
	} {
		// A binding takes effect when the API server's RBAC cache has it:
		// waited for, not assumed.
		testenv.WaitFor(ctx, t, tt.who, func(ctx context.Context) (bool, string, error) {
			select {
			case err := <-done:
				t.Fatalf("manager: %v", err)
			default:
			}
			code, body, err := getPath(tt.path, tt.auth)
			if err != nil {
				return false, "", err
			}
			if code == http.StatusOK && !strings.Contains(body, "controller_runtime_") {
				t.Fatalf("%s: 200 without metrics: %.200s", tt.who, body)
			}
			return code == tt.want, fmt.Sprintf("status %d, want %d", code, tt.want), nil
		})
	}
	// Plain HTTP gets no metrics: the TLS server answers it 400.
	resp, err := http.Get("http://" + addr + "/metrics")
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK || strings.Contains(string(body), "controller_runtime_") {
			t.Errorf("plain HTTP: %s, %.200s", resp.Status, body)
		}
	}
	// HTTP/2 is not offered (--enable-http2 is off).
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	if p := conn.ConnectionState().NegotiatedProtocol; p == "h2" {
		t.Error("the metrics server speaks HTTP/2")
	}
	conn.Close()
	// The probes stay plain HTTP, for the kubelet.
	testenv.WaitFor(ctx, t, "the health probe", func(ctx context.Context) (bool, string, error) {
		resp, err := http.Get("http://" + probe + "/healthz")
		if err != nil {
			return false, err.Error(), nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status, nil
	})
}

// TestMetricsInsecure: --metrics-secure=false serves plain HTTP to anyone
// (for a loopback address in development), as before.
func TestMetricsInsecure(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	env.InstallCRDFile(ctx, t, "../../config/crd/bases/installstrategy.io_installations.yaml")
	addr := freeAddr(t)
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- runManager(mctx, logr.Discard(), env.Config, managerOptions{
			leaderElectionNamespace: ns, namespace: ns, keyNamespace: env.Namespace(ctx, t), probeAddr: "0", metricsAddr: addr, metricsInsecure: true, qps: 50, burst: 100, skipNameValidation: true,
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	testenv.WaitFor(ctx, t, "plain metrics", func(ctx context.Context) (bool, string, error) {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false, err.Error(), nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && strings.Contains(string(b), "controller_runtime_"), resp.Status, nil
	})
}

// TestAllNamespacesCacheExcludesKeyNamespace: watching every namespace,
// the manager's cache holds nothing of the key namespace (its Secrets and
// ConfigMaps are the operator's trust, read directly, never through what
// a tenant's watch could fill), and everything of the other namespaces.
func TestAllNamespacesCacheExcludesKeyNamespace(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	keys, tenant := env.Namespace(ctx, t), env.Namespace(ctx, t)
	mgr, err := newManager(logr.Discard(), env.Config, managerOptions{
		keyNamespace: keys, leaderElectionNamespace: keys, probeAddr: "0", metricsAddr: "0", qps: 50, burst: 100, skipNameValidation: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.GetCache().Start(cctx) }()
	t.Cleanup(func() { cancel(); <-done })
	strategyCM := func(ns string) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "strategy", Namespace: ns, Labels: map[string]string{metakeys.StrategyLabel: ""}}}
		if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	strategyCM(keys)
	strategyCM(tenant)
	testenv.WaitFor(ctx, t, "the tenant's strategy ConfigMap in the cache", func(ctx context.Context) (bool, string, error) {
		var l corev1.ConfigMapList
		if err := mgr.GetCache().List(ctx, &l, client.InNamespace(tenant)); err != nil {
			return false, "", err
		}
		return len(l.Items) == 1, fmt.Sprintf("%d ConfigMaps", len(l.Items)), nil
	})
	var l corev1.ConfigMapList
	if err := mgr.GetCache().List(ctx, &l, client.InNamespace(keys)); err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 0 {
		t.Errorf("the cache holds %d ConfigMaps of the key namespace %s", len(l.Items), keys)
	}
	if err := mgr.GetCache().List(ctx, &l); err != nil {
		t.Fatal(err)
	}
	for _, cm := range l.Items {
		if cm.Namespace == keys {
			t.Errorf("the cache lists %s/%s of the key namespace", cm.Namespace, cm.Name)
		}
	}
}
