package engine

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/certs"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// ServedCheck asks a run to check, once it has rolled out, the certificate
// each Service in front of a generated TLS Secret actually presents: a pod
// that kept an old certificate (it never restarted, or reloads nothing) is
// found there, not in the Secret. The Service is dialled at its ClusterIP,
// the way its clients reach it; a Service that cannot be reached from
// where the reconciler runs is reported as not checked.
type ServedCheck struct {
	// Enabled runs the check.
	Enabled bool
	// Dial opens a TCP connection to a Service's ClusterIP:port; nil means
	// a net.Dialer. Tests route a ClusterIP their cluster does not.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Timeout bounds each port's dial and TLS handshake; 0 means 2 s.
	Timeout time.Duration
}

// ServedState is the outcome of one Service port's check.
type ServedState string

const (
	// ServedMatch: the port presents the Secret's certificate.
	ServedMatch ServedState = "Match"
	// ServedMismatch: the port presents another certificate.
	ServedMismatch ServedState = "Mismatch"
	// ServedUnreachable: no TLS handshake could be made (no route to the
	// ClusterIP from here, no endpoint, a port that is not TLS).
	ServedUnreachable ServedState = "Unreachable"
)

// ServedCertificate is what one port of a Service presented.
type ServedCertificate struct {
	// Service is the Service checked, Port the port dialled.
	Service strategy.ObjectRef
	Port    int64
	// Secret is the TLS Secret (namespace/name) whose certificate the
	// Service's pods should serve.
	Secret string
	State  ServedState
	// Detail says what was served instead, or why nothing was checked.
	Detail string
}

func (c ServedCertificate) String() string {
	s := fmt.Sprintf("%s port %d: %s", c.Service, c.Port, c.State)
	if c.Detail != "" {
		s += " (" + c.Detail + ")"
	}
	return s
}

// checkServed dials every TCP port of the Services in front of each
// generated TLS Secret and compares the leaf certificate presented with
// the Secret's.
func (c *certState) checkServed(ctx context.Context, opts ServedCheck) ([]ServedCertificate, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Second
	}
	dial := opts.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	keys := make([]string, 0, len(c.servedBy))
	for k := range c.servedBy {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []ServedCertificate
	for _, key := range keys {
		ns, name, _ := strings.Cut(key, "/")
		p, err := c.pair(ctx, ns, name)
		if err != nil {
			return out, err
		}
		want := certs.Leaf(p.Cert)
		for _, svc := range c.servedBy[key] {
			live, err := c.r.a.Get(ctx, svc)
			if err != nil {
				return out, fmt.Errorf("check served certificates: %w", err)
			}
			ref := strategy.RefOf(svc)
			if live == nil {
				out = append(out, ServedCertificate{Service: ref, Secret: key, State: ServedUnreachable, Detail: "the Service does not exist"})
				continue
			}
			ip, _, _ := unstructured.NestedString(live.Object, "spec", "clusterIP")
			ports, _, _ := unstructured.NestedSlice(live.Object, "spec", "ports")
			for _, pt := range ports {
				m, _ := pt.(map[string]any)
				port, _, _ := unstructured.NestedInt64(m, "port")
				if proto, _, _ := unstructured.NestedString(m, "protocol"); proto != "" && proto != "TCP" {
					continue
				}
				res := ServedCertificate{Service: ref, Port: port, Secret: key}
				if ip == "" || ip == "None" {
					res.State, res.Detail = ServedUnreachable, "headless Service"
				} else {
					res.State, res.Detail = presented(ctx, dial, opts.Timeout, net.JoinHostPort(ip, strconv.FormatInt(port, 10)),
						svc.GetName()+"."+svc.GetNamespace()+".svc", want)
				}
				out = append(out, res)
			}
		}
	}
	return out, nil
}

// presented dials addr, makes a TLS handshake for serverName (without
// verifying: what is served is the question) and compares the leaf
// certificate with want.
func presented(ctx context.Context, dial func(context.Context, string, string) (net.Conn, error), timeout time.Duration, addr, serverName string, want *x509.Certificate) (ServedState, string) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	raw, err := dial(ctx, "tcp", addr)
	if err != nil {
		return ServedUnreachable, err.Error()
	}
	defer raw.Close()
	conn := tls.Client(raw, &tls.Config{ServerName: serverName, InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec // reads the served certificate, trusts nothing
	if err := conn.HandshakeContext(ctx); err != nil {
		return ServedUnreachable, "TLS handshake: " + err.Error()
	}
	peers := conn.ConnectionState().PeerCertificates
	if len(peers) == 0 {
		return ServedUnreachable, "no certificate presented"
	}
	got := peers[0]
	if want != nil && bytes.Equal(got.Raw, want.Raw) {
		return ServedMatch, ""
	}
	detail := fmt.Sprintf("serves serial %s (not after %s)", got.SerialNumber, got.NotAfter.UTC().Format(time.RFC3339))
	if want != nil {
		detail += fmt.Sprintf(", the Secret holds serial %s (not after %s)", want.SerialNumber, want.NotAfter.UTC().Format(time.RFC3339))
	}
	return ServedMismatch, detail
}
