package testenv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/installstrategy/installstrategy/internal/localcluster"
)

// FaultProxy starts a proxy in front of the test cluster's API server
// that fails the share f.Rate of the requests (500, 503, 429, connection
// resets; see localcluster.Faults) and returns it; its Config reaches the
// cluster through it. It stops at the end of the test.
func (e *Env) FaultProxy(t testing.TB, f localcluster.Faults) *localcluster.FaultProxy {
	t.Helper()
	p, err := localcluster.StartFaultProxy(e.Config, f, rand.Uint64())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// restartMu serialises restarts of the test cluster's components.
var restartMu sync.Mutex

// Restart restarts a component of the test cluster (localcluster.Etcd,
// localcluster.KubeAPIServer, …), SIGKILLed when kill is set, and waits until
// it answers again. The cluster is the one of KubeconfigEnv: its state
// directory holds the kubeconfig. Other tests of the package must not run
// in parallel with a test that calls it.
func (e *Env) Restart(ctx context.Context, t testing.TB, component string, kill bool) {
	t.Helper()
	restartMu.Lock()
	defer restartMu.Unlock()
	dir := filepath.Dir(os.Getenv(KubeconfigEnv))
	if err := localcluster.Restart(ctx, dir, component, kill); err != nil {
		t.Fatal(err)
	}
}

// ReplayKwok restarts kwok, the test cluster's fake kubelets, once the API
// server is ready again after a restart of etcd. kwok drops a pod's stage
// whose write failed with an error it does not retry (v0.7.0 retries
// refused connections, timeouts, 503 and 429; the 500 "connection reset
// by peer" the API server answers while etcd restarts is dropped), so the
// pod stays not ready forever, where a real kubelet writes its pod's
// status again. A new kwok lists every pod and plays the stages each
// still needs.
func (e *Env) ReplayKwok(ctx context.Context, t testing.TB) {
	t.Helper()
	WaitFor(ctx, t, "the API server ready after the etcd restart", func(ctx context.Context) (bool, string, error) {
		body, err := e.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return false, fmt.Sprintf("GET /readyz: %v: %s", err, strings.TrimSpace(string(body))), nil
		}
		return true, "", nil
	})
	e.Restart(ctx, t, localcluster.Kwok, false)
}
