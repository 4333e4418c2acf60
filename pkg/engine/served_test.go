package engine_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/certs"
	"github.com/installstrategy/installstrategy/pkg/engine"
)

// A run that checks served certificates dials the Service in front of a
// generated TLS Secret and compares what it presents with the Secret: the
// generated certificate matches, another one (a pod that kept an old
// certificate) is reported with both serials, and a ClusterIP that cannot
// be reached is reported as not checked. The ClusterIP is routed here to a
// real TLS server (no kube-proxy on this cluster).
func TestServedCertificatesAreChecked(t *testing.T) {
	se := newSampleEnv(t)
	ctx := t.Context()
	v1 := sample(t, se.ns, "v1.0.0")
	if _, err := se.run(v1, v1.Identity, engine.Options{NoWait: true}); err != nil {
		t.Fatal(err)
	}
	svc, err := se.env.Kube.CoreV1().Services(se.ns).Get(ctx, "sample-api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data := se.secretData(t, "sample-api-certs")
	generated, err := tls.X509KeyPair(data[certs.CertKey], data[certs.KeyKey])
	if err != nil {
		t.Fatal(err)
	}
	ca, err := certs.NewCA("someone else", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	otherPair, err := certs.NewServing(ca, []string{"sample-api." + se.ns + ".svc"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, err := tls.X509KeyPair(otherPair.Cert, otherPair.Key)
	if err != nil {
		t.Fatal(err)
	}
	var serving atomic.Pointer[tls.Certificate]
	serving.Store(&generated)
	server := testenv.ServeTLS(t, serving.Load)
	service := net.JoinHostPort(svc.Spec.ClusterIP, "443")
	route := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == service {
			addr = server
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	check := func(dial func(context.Context, string, string) (net.Conn, error)) engine.ServedCertificate {
		t.Helper()
		res, err := se.run(v1, v1.Identity, engine.Options{NoWait: true, ServedCertificates: engine.ServedCheck{Enabled: true, Dial: dial, Timeout: time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range res.ServedCertificates {
			if c.Service.Name == "sample-api" && c.Port == 443 {
				return c
			}
		}
		t.Fatalf("sample-api:443 not checked: %v", res.ServedCertificates)
		return engine.ServedCertificate{}
	}
	if c := check(route); c.State != engine.ServedMatch || c.Secret != se.ns+"/sample-api-certs" {
		t.Errorf("the generated certificate served: %v", c)
	}
	serving.Store(&other)
	if c := check(route); c.State != engine.ServedMismatch || !strings.Contains(c.Detail, "the Secret holds serial") {
		t.Errorf("another certificate served: %v", c)
	}
	refused := func(ctx context.Context, network, addr string) (net.Conn, error) {
		return nil, errors.New("dial " + addr + ": connection refused")
	}
	if c := check(refused); c.State != engine.ServedUnreachable {
		t.Errorf("an unreachable Service: %v", c)
	}
}
