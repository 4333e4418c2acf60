package main

import (
	"os"
	"strings"
	"testing"
)

// A ClusterIP:443 that another process holds (another local cluster's
// helper, on the shared service CIDR) fails with a message that says so.
func TestListenClusterIPTakenSaysWhy(t *testing.T) {
	const ip = "127.0.99.77" // loopback, outside the clusters' 127.0.100.0/24
	first, err := listenClusterIP(ip, "first")
	if err != nil {
		// Port 443 needs root (or CAP_NET_BIND_SERVICE), as the harness does.
		if os.Getenv("CI") == "true" {
			t.Fatalf("cannot listen on %s:443: %v", ip, err)
		}
		t.Skipf("cannot listen on %s:443 here (not root?): %v", ip, err)
	}
	defer first.Close()
	second, err := listenClusterIP(ip, "fake virt-api")
	if err == nil {
		second.Close()
		t.Fatal("a second listener on the same ClusterIP:443 did not fail")
	}
	for _, want := range []string{"fake virt-api", ip + ":443", "127.0.100.0/24", "another engineer's cluster"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
