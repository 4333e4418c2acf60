package cluster

import (
	"fmt"
	"io"
	"net"
	"time"
)

// ServeClusterIP accepts TCP connections on a Service's loopback ClusterIP
// and port, and copies each to the address backend returns for it (a pod
// on the real node; backend is asked per connection, so a restarted pod is
// followed). It is the part of kube-proxy the local cluster lacks: the
// service CIDR is loopback, so the API server (calling a webhook) and
// processes on this machine reach the Service this way. Close stops it.
func ServeClusterIP(clusterIP string, port int, backend func() string) (io.Closer, error) {
	if ip := net.ParseIP(clusterIP); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("service ClusterIP %q is not loopback; refusing to listen on it", clusterIP)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(clusterIP, fmt.Sprint(port)))
	if err != nil {
		return nil, fmt.Errorf("serve ClusterIP %s:%d: %w (another local cluster's helper may hold it: every local cluster uses the same service CIDR)", clusterIP, port, err)
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
