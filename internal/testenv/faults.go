package testenv

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/installstrategy/installstrategy/hack/localcluster/cluster"
)

// FaultProxy starts a proxy in front of the test cluster's API server
// that fails the share f.Rate of the requests (500, 503, 429, connection
// resets; see cluster.Faults) and returns it; its Config reaches the
// cluster through it. It stops at the end of the test.
func (e *Env) FaultProxy(t testing.TB, f cluster.Faults) *cluster.FaultProxy {
	t.Helper()
	p, err := cluster.StartFaultProxy(e.Config, f, rand.Uint64())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// restartMu serialises restarts of the test cluster's components.
var restartMu sync.Mutex

// Restart restarts a component of the test cluster (cluster.Etcd,
// cluster.KubeAPIServer, …), SIGKILLed when kill is set, and waits until
// it answers again. The cluster is the one of KubeconfigEnv: its state
// directory holds the kubeconfig. Other tests of the package must not run
// in parallel with a test that calls it.
func (e *Env) Restart(ctx context.Context, t testing.TB, component string, kill bool) {
	t.Helper()
	restartMu.Lock()
	defer restartMu.Unlock()
	dir := filepath.Dir(os.Getenv(KubeconfigEnv))
	if err := cluster.Restart(ctx, dir, component, kill); err != nil {
		t.Fatal(err)
	}
}
