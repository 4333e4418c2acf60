package testenv

import "testing"

// Heavy marks t as a test of the heavy tier: it needs the local cluster, a
// cluster of its own, or setup of that cost. In -short mode (`make unit`)
// it skips t; otherwise it does nothing, so a missing cluster still fails
// the test under CI (New, ToolsDir, RealNode). New and ToolsDir call it, so
// every test that reaches the cluster through them is heavy already; call
// it directly in a test that is costly for another reason.
func Heavy(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("heavy test (needs a cluster or costly setup): skipped in -short mode (make unit); run it with make test")
	}
}
