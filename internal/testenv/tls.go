package testenv

import (
	"crypto/tls"
	"testing"
)

// ServeTLS serves TLS handshakes on a loopback port with the certificate
// current returns at each connection (a server that only presents a
// certificate) until the test ends, and returns its address.
func ServeTLS(t *testing.T, current func() *tls.Certificate) string {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return current(), nil },
		MinVersion:     tls.VersionTLS12,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).Handshake(); _ = c.Close() }()
		}
	}()
	return l.Addr().String()
}
