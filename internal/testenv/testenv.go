// Package testenv connects tests to the real local control plane started by
// `make test` or `make cluster-up` (hack/localcluster): clients for it, a
// fresh namespace per test, and waits on cluster conditions with clear
// failure messages.
//
// The cluster is found only through INSTALLSTRATEGY_TEST_KUBECONFIG (never
// KUBECONFIG), so a test cannot touch a user's real cluster by accident;
// its API server must also be on a loopback address. When the cluster is
// unavailable, tests fail under CI=true and skip otherwise, both with a
// message that says how to start it.
//
// Pods of kwok's fake nodes follow a normal lifecycle (Running and Ready at
// once, Job pods Succeed about a second later) unless they carry
// BehaviourLabel; see the Behaviour constants.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/installstrategy/installstrategy/internal/localcluster"
	"github.com/installstrategy/installstrategy/internal/testtier"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
)

// KubeconfigEnv names the environment variable with the kubeconfig of the
// local test cluster. `make test` sets it; after `make cluster-up`, run
// `eval "$(make -s cluster-env)"`.
const KubeconfigEnv = "INSTALLSTRATEGY_TEST_KUBECONFIG"

// ToolsDirEnv names the environment variable with the directory of the
// control-plane binaries (make tools); tests that start a cluster of their
// own need it. The Makefile exports it.
const ToolsDirEnv = "TOOLS_DIR"

// BehaviourLabel is the pod label that selects a simulated failure on the
// fake nodes.
const BehaviourLabel = metakeys.TestBehaviourLabel

// Behaviour is a value of BehaviourLabel.
type Behaviour = localcluster.Behaviour

// Simulated pod behaviours; put them on a pod template with BehaviourLabels.
const (
	// BehaviourFail: containers start, exit 1 about a second later, and the
	// pod ends in phase Failed (so a Job using it fails once its
	// backoffLimit is used up).
	BehaviourFail = localcluster.BehaviourFail
	// BehaviourCrashLoop: the pod is Running, not Ready, its containers wait
	// in CrashLoopBackOff and restartCount rises every ~2 s.
	BehaviourCrashLoop = localcluster.BehaviourCrashLoop
	// BehaviourNeverReady: the pod is Running with containers that never
	// become ready.
	BehaviourNeverReady = localcluster.BehaviourNeverReady
	// BehaviourFlapping: Ready for ~3 s after each start, then ~5 s in
	// CrashLoopBackOff (a probe-less container that crashes soon after
	// it starts).
	BehaviourFlapping = localcluster.BehaviourFlapping
	// BehaviourAwaitResult: a Job's pod runs until it carries
	// TerminationMessageAnnotation, then succeeds with it as its
	// termination message (RunDumpJob sets it).
	BehaviourAwaitResult = localcluster.BehaviourAwaitResult
)

// TerminationMessageAnnotation: see BehaviourAwaitResult.
const TerminationMessageAnnotation = metakeys.TestTerminationMessageAnnotation

// BehaviourLabels returns the pod labels that select b.
func BehaviourLabels(b Behaviour) map[string]string {
	return map[string]string{BehaviourLabel: string(b)}
}

// Env gives a test clients for the running local cluster.
type Env struct {
	// Config is the admin REST config (user in system:masters).
	Config *rest.Config
	// Kube is a typed clientset.
	Kube kubernetes.Interface
	// Dynamic is a dynamic client.
	Dynamic dynamic.Interface
	// Client is a controller-runtime client whose scheme has the client-go
	// kinds and apiextensions.k8s.io/v1; it reads from the API server, not a
	// cache.
	Client client.Client
	// Scheme is Client's scheme.
	Scheme *runtime.Scheme
}

var (
	connectOnce sync.Once
	connected   *Env
	connectErr  error
)

// New returns the Env of the local test cluster, connecting once per test
// binary. When there is no usable cluster, the test fails under CI=true
// and is skipped otherwise, with a message saying how to start one.
func New(t testing.TB) *Env {
	t.Helper()
	testtier.Heavy(t)
	connectOnce.Do(func() { connected, connectErr = connect(t.Context()) })
	if connectErr != nil {
		unavailable(t, connectErr.Error())
	}
	return connected
}

// InCI reports whether the tests run under CI (CI set to anything but
// "", "0" or "false"), where a missing cluster is a failure, not a skip.
func InCI() bool {
	v := strings.ToLower(os.Getenv("CI"))
	return v != "" && v != "0" && v != "false"
}

// unavailable fails (CI) or skips the test with how to start the cluster.
func unavailable(t testing.TB, reason string) {
	t.Helper()
	msg := fmt.Sprintf("local test cluster unavailable: %s\n"+
		"start one with:\n"+
		"  make cluster-up\n"+
		"  export %s=<the kubeconfig path it prints>   # or: eval \"$(make -s cluster-env)\"\n"+
		"or run the whole suite with a cluster of its own: make test", reason, KubeconfigEnv)
	if InCI() {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// ToolsDir returns the directory of the control-plane binaries, for tests
// that start a cluster of their own; like New it fails under CI and skips
// otherwise when the binaries are missing.
func ToolsDir(t testing.TB) string {
	t.Helper()
	testtier.Heavy(t)
	dir := os.Getenv(ToolsDirEnv)
	reason := ""
	switch {
	case dir == "":
		reason = ToolsDirEnv + " is not set"
	default:
		for _, name := range localcluster.Components {
			if _, err := os.Stat(dir + "/" + name); err != nil {
				reason = fmt.Sprintf("%s: %v", ToolsDirEnv, err)
				break
			}
		}
	}
	if reason != "" {
		msg := fmt.Sprintf("control-plane binaries unavailable: %s\n"+
			"build them with `make tools` and export %s=\"$(hack/tools.sh dir)\", or run `make test`", reason, ToolsDirEnv)
		if InCI() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return dir
}

func connect(ctx context.Context) (*Env, error) {
	path := os.Getenv(KubeconfigEnv)
	if path == "" {
		return nil, errors.New(KubeconfigEnv + " is not set")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("%s=%s: %w", KubeconfigEnv, path, err)
	}
	if err := requireLoopback(cfg.Host); err != nil {
		return nil, fmt.Errorf("%s=%s: %w", KubeconfigEnv, path, err)
	}
	// Tests create and watch many objects at once; client-go's default of
	// 5 QPS would make them slow for no gain against a private cluster.
	cfg.QPS, cfg.Burst = 200, 400
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("clientset: %w", err)
	}
	// One quick check, so an unreachable cluster is reported once and
	// clearly rather than as a timeout in every test.
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if body, err := kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		return nil, fmt.Errorf("API server %s is not ready: %w: %s", cfg.Host, err, strings.TrimSpace(string(body)))
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("scheme: %w", err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("scheme: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("controller-runtime client: %w", err)
	}
	return &Env{Config: cfg, Kube: kube, Dynamic: dyn, Client: c, Scheme: scheme}, nil
}

// requireLoopback refuses an API server that is not on a loopback address.
func requireLoopback(host string) error {
	u, err := url.Parse(host)
	if err != nil {
		return fmt.Errorf("server %q: %w", host, err)
	}
	h := u.Hostname()
	if h == "localhost" {
		return nil
	}
	if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("server %s is not on loopback: refusing to run tests against a cluster that is not the local test cluster", host)
}
