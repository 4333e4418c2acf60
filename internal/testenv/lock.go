package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Lock files of the shared test cluster's contended objects.
const (
	// SampleProductLock is held by tests that install the sample product,
	// whose CRDs, ClusterRoles and webhook have fixed names.
	SampleProductLock = "installstrategy-sample-product.lock"
	// KubeVirtLock is held by tests that install KubeVirt's strategies
	// (fixed cluster-scoped names, the kubevirt namespace).
	KubeVirtLock = "installstrategy-kubevirt.lock"
)

// Lock takes an exclusive lock on a file of that name in the temporary
// folder, across test binaries, until the test ends: tests that install
// objects with fixed cluster-scoped names take it so they never run at once
// on one cluster. The file is the cluster's (named after the kubeconfig of
// KubeconfigEnv): tests on two clusters (make test's shards) do not wait
// for each other.
func Lock(t testing.TB, name string) {
	t.Helper()
	sum := sha256.Sum256([]byte(os.Getenv(KubeconfigEnv)))
	f, err := os.OpenFile(filepath.Join(os.TempDir(), name+"."+hex.EncodeToString(sum[:6])), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("lock %s: %v", name, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("lock %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	})
}
