package main

import (
	"net"
	"strconv"
	"strings"
	"testing"
)

// A ClusterIP and port that another process holds (another helper) fails
// with a message that says so.
func TestListenClusterIPTakenSaysWhy(t *testing.T) {
	const ip = "127.0.99.77" // loopback, outside the clusters' 127.100-199.x.0/24
	first, err := listenClusterIP(ip, 0, "first")
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	port := first.Addr().(*net.TCPAddr).Port
	second, err := listenClusterIP(ip, port, "fake virt-api")
	if err == nil {
		second.Close()
		t.Fatal("a second listener on the same ClusterIP and port did not fail")
	}
	for _, want := range []string{"fake virt-api", net.JoinHostPort(ip, strconv.Itoa(port)), "service CIDR", "ss -ltnp"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
