package localcluster

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// ListenClusterIP listens on a Service's loopback ClusterIP and port (0:
// any free port). The error of an address already held says what may
// hold it.
func ListenClusterIP(clusterIP string, port int) (net.Listener, error) {
	if ip := net.ParseIP(clusterIP); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("service ClusterIP %q is not loopback; refusing to listen on it", clusterIP)
	}
	addr := net.JoinHostPort(clusterIP, strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cannot listen on %s, the Service's ClusterIP: %w. Another helper of this cluster, or of a cluster whose service CIDR is the same /24 (clusters pick theirs by a hash of the state directory), probably holds this address (see `ss -ltnp`)", addr, err)
	}
	return ln, nil
}

// ServeClusterIP accepts TCP connections on a Service's loopback ClusterIP
// and port, and copies each to the address backend returns for it (a pod
// on the real node; backend is asked per connection, so a restarted pod is
// followed). It is the part of kube-proxy the local cluster lacks: the
// service CIDR is loopback, so the API server (calling a webhook) and
// processes on this machine reach the Service this way. Close stops it.
func ServeClusterIP(clusterIP string, port int, backend func() string) (io.Closer, error) {
	ln, err := ListenClusterIP(clusterIP, port)
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b, err := net.DialTimeout("tcp", backend(), 5*time.Second)
				if err != nil {
					return
				}
				defer b.Close()
				go func() { _, _ = io.Copy(b, c) }()
				_, _ = io.Copy(c, b)
			}()
		}
	}()
	return ln, nil
}
