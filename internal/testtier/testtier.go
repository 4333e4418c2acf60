// Package testtier tells a test which tier it runs in: `make unit` (go test
// -short, no cluster) or `make test` (everything). It is a leaf package, so
// a unit test that marks itself heavy does not link internal/testenv and
// what that reaches (the local cluster library, client-go's typed clients).
package testtier

import "testing"

// Heavy marks t as a test of the heavy tier: it needs the local cluster, a
// cluster of its own, or setup of that cost. In -short mode (`make unit`)
// it skips t; otherwise it does nothing, so a missing cluster still fails
// the test under CI (testenv's New, ToolsDir, RealNode). testenv.New and
// testenv.ToolsDir call it, so
// every test that reaches the cluster through them is heavy already; call
// it directly in a test that is costly for another reason.
func Heavy(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("heavy test (needs a cluster or costly setup): skipped in -short mode (make unit); run it with make test")
	}
}
