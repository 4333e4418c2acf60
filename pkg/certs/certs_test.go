package certs

import (
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"
)

func TestIssueAndRenewal(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ca, err := NewCA("test-ca", now, 365*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	names := ServiceDNSNames("api", "ns")
	srv, err := NewServing(ca, names, now, 30*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(srv.Cert)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.Cert)
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: "api.ns.svc", Roots: pool, CurrentTime: now}); err != nil {
		t.Errorf("verify: %v", err)
	}
	other, _ := NewCA("other", now, time.Hour)
	for _, tc := range []struct {
		name string
		at   time.Time
		ca   *Pair
		dns  []string
		want string
	}{
		{"good", now, &ca, names, ""},
		{"within renew window", now.Add(25 * 24 * time.Hour), &ca, names, "expires"},
		{"other CA", now, &other, names, "not signed"},
		{"other names", now, &ca, []string{"x"}, "names"},
		{"same names in another order", now, &ca, []string{names[3], names[1], names[0], names[2]}, ""},
		{"a name fewer", now, &ca, names[1:], "names"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Renewal(srv, tc.ca, tc.dns, tc.at, 6*24*time.Hour)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("Renewal = %q, want %q", got, tc.want)
			}
		})
	}
	if got := Renewal(Pair{}, nil, nil, now, 0); got != "no certificate" {
		t.Errorf("empty: %q", got)
	}
}

func TestServingNeverOutlivesCA(t *testing.T) {
	now := time.Now()
	ca, _ := NewCA("ca", now, time.Hour)
	srv, err := NewServing(ca, []string{"a"}, now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got := Renewal(srv, &ca, nil, now, 2*time.Hour); !strings.Contains(got, "expires") {
		t.Errorf("Renewal = %q", got)
	}
}
