package engine_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// Certificates are kept while good, rotated before they expire; a
// rotation rolls the workloads that mount the certificate once (a new
// ReplicaSet whose pods carry the new certificate's hash), and a resync
// after it writes nothing (no restart loop).
func TestCertificatesRotateBeforeExpiry(t *testing.T) {
	se := newSampleEnv(t)
	ctx := t.Context()
	v1 := sample(t, se.ns, "v1.0.0")
	at := clockedCerts(engine.CertOptions{CertValidity: 10 * 24 * time.Hour, CertRenewBefore: 2 * 24 * time.Hour, CAValidity: 365 * 24 * time.Hour})
	cert := func() []byte { return se.secretData(t, "sample-api-certs")["tls.crt"] }
	template := func() string {
		d, err := se.env.Kube.AppsV1().Deployments(se.ns).Get(ctx, "sample-api", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// generation moves with spec changes only; resourceVersion also
		// with the deployment controller's status updates.
		return strconv.FormatInt(d.Generation, 10) + "/" + d.Spec.Template.String()
	}

	if _, err := se.run(v1, strategy.Identity{}, at(0)); err != nil {
		t.Fatal(err)
	}
	first, tmpl := cert(), template()

	// Five days later the certificate is still good: nothing is written.
	se.rec.Reset()
	if _, err := se.run(v1, v1.Identity, at(5*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if w := se.rec.Writes(); len(w) != 0 {
		t.Errorf("resync with a good certificate wrote %v", w)
	}
	// Nine days later it expires within the renewal window: rotated.
	if _, err := se.run(v1, v1.Identity, at(9*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	rotated := cert()
	if bytes.Equal(first, rotated) {
		t.Error("certificate not rotated inside the renewal window")
	}
	// Once rotated, a resync at the same time keeps it, and the workloads
	// were never touched.
	se.rec.Reset()
	if _, err := se.run(v1, v1.Identity, at(9*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if w := se.rec.Writes(); len(w) != 0 {
		t.Errorf("resync after rotation wrote %v", w)
	}
	if !bytes.Equal(rotated, cert()) {
		t.Error("certificate rotated twice")
	}
	if template() == tmpl {
		t.Error("certificate rotation did not change the api Deployment's pod template: its pods keep serving the old certificate")
	}
	d, err := se.env.Kube.AppsV1().Deployments(se.ns).Get(ctx, "sample-api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hash := d.Spec.Template.Annotations[metakeys.CertificateHashAnnotation]
	if hash == "" {
		t.Fatalf("sample-api's pod template has no %s", metakeys.CertificateHashAnnotation)
	}
	testenv.WaitFor(ctx, t, "a ReplicaSet of sample-api with the renewed certificate", func(ctx context.Context) (bool, string, error) {
		rss, err := se.env.Kube.AppsV1().ReplicaSets(se.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		var seen []string
		for _, rs := range rss.Items {
			if len(rs.OwnerReferences) == 1 && rs.OwnerReferences[0].Name == "sample-api" {
				h := rs.Spec.Template.Annotations[metakeys.CertificateHashAnnotation]
				seen = append(seen, rs.Name+"="+h)
				if h == hash {
					return true, "", nil
				}
			}
		}
		return false, fmt.Sprintf("replicasets %v", seen), nil
	})
}

// The CA is rotated by its own renew-before, not the serving certificates'
// (nor the default fifth of its validity), and a new CA reissues every
// certificate and the webhook's CA bundle.
func TestCARotatesByItsOwnRenewBefore(t *testing.T) {
	se := newSampleEnv(t)
	v1 := sample(t, se.ns, "v1.0.0")
	// CA: 30 days, renewed 12 days before expiry (the default would be 6).
	// Certificates: 10 days, renewed 1 day before expiry.
	at := clockedCerts(engine.CertOptions{
		CAValidity: 30 * 24 * time.Hour, CARenewBefore: 12 * 24 * time.Hour,
		CertValidity: 10 * 24 * time.Hour, CertRenewBefore: 24 * time.Hour,
	})
	caCert := func() []byte { return se.secretData(t, engine.DefaultCASecret)["tls.crt"] }

	if _, err := se.run(v1, strategy.Identity{}, at(0)); err != nil {
		t.Fatal(err)
	}
	first := caCert()
	firstBundle := webhookBundle(t, se)
	if !bytes.Equal(firstBundle, first) {
		t.Errorf("webhook bundle before any rotation:\n%s\nwant the CA alone", firstBundle)
	}
	// Day 17: the CA expires in 13 days, outside its renew-before.
	if _, err := se.run(v1, v1.Identity, at(17*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, caCert()) {
		t.Fatal("CA rotated on day 17, outside its 12-day renew-before")
	}
	// Day 19: it expires in 11 days, inside its renew-before (the serving
	// certificates' 1 day or a fifth of 30 days would keep it).
	se.rec.Reset()
	if _, err := se.run(v1, v1.Identity, at(19*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	rotated := caCert()
	// The new bundle was published before the certificate the new CA
	// signs (KubeVirt's order), and it still trusts the old CA.
	hookAt, certAt := -1, -1
	for i, w := range se.rec.Writes() {
		switch {
		case hookAt < 0 && strings.Contains(w.Path, "validatingwebhookconfigurations"):
			hookAt = i
		case certAt < 0 && strings.HasSuffix(w.Path, "/secrets/sample-api-certs"):
			certAt = i
		}
	}
	if hookAt < 0 || certAt < 0 || hookAt > certAt {
		t.Errorf("rotation writes %v: the webhook's bundle (write %d) must come before the serving certificate (write %d)", se.rec.Writes(), hookAt, certAt)
	}
	if b := webhookBundle(t, se); !bytes.Contains(b, rotated) || !bytes.Contains(b, first) {
		t.Errorf("webhook bundle after the CA rotation does not hold both the new and the old CA:\n%s", b)
	}
	if bytes.Equal(first, rotated) {
		t.Fatal("CA not rotated on day 19, inside its 12-day renew-before")
	}
	ca, err := x509.ParseCertificate(pemBlock(t, rotated))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ca.NotAfter.Sub(ca.NotBefore), 30*24*time.Hour; got < want-time.Hour || got > want+time.Hour {
		t.Errorf("new CA valid for %s, want %s", got, want)
	}
	// The serving certificate was reissued by the new CA and carries it.
	data := se.secretData(t, "sample-api-certs")
	if !bytes.Equal(data["ca.crt"], rotated) {
		t.Error("serving secret's ca.crt is not the new CA")
	}
	serving, err := x509.ParseCertificate(pemBlock(t, data["tls.crt"]))
	if err != nil {
		t.Fatal(err)
	}
	if err := serving.CheckSignatureFrom(ca); err != nil {
		t.Errorf("serving certificate not signed by the new CA: %v", err)
	}
}

// webhookBundle returns the CA bundle of the sample product's webhook.
func webhookBundle(t *testing.T, se *sampleEnv) []byte {
	t.Helper()
	hooks, err := se.env.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hooks.Items {
		for _, w := range h.Webhooks {
			if w.ClientConfig.Service != nil && w.ClientConfig.Service.Namespace == se.ns {
				return w.ClientConfig.CABundle
			}
		}
	}
	t.Fatal("no webhook of the sample product found")
	return nil
}

// A CA renew-before shorter than the serving certificates' must not make
// every run reissue them (a serving certificate ends with its CA, so it
// would always be "about to expire"): the CA is renewed by the longer one,
// and the next run writes nothing new.
func TestShortCARenewBeforeDoesNotChurnCertificates(t *testing.T) {
	se := newSampleEnv(t)
	v1 := sample(t, se.ns, "v1.0.0")
	// CA: 7 days, renewed 4 hours before expiry; certificates: 1 day,
	// renewed 8 hours before expiry.
	at := clockedCerts(engine.CertOptions{
		CAValidity: 7 * 24 * time.Hour, CARenewBefore: 4 * time.Hour,
		CertValidity: 24 * time.Hour, CertRenewBefore: 8 * time.Hour,
	})
	if _, err := se.run(v1, strategy.Identity{}, at(0)); err != nil {
		t.Fatal(err)
	}
	first := se.secretData(t, engine.DefaultCASecret)["tls.crt"]
	// 6 hours before the CA expires: outside its own 4 hours, inside the
	// certificates' 8.
	if _, err := se.run(v1, v1.Identity, at(7*24*time.Hour-6*time.Hour)); err != nil {
		t.Fatal(err)
	}
	ca := se.secretData(t, engine.DefaultCASecret)["tls.crt"]
	if bytes.Equal(first, ca) {
		t.Fatal("CA kept although every certificate it signs would expire within their renew-before")
	}
	serving := se.secretData(t, "sample-api-certs")["tls.crt"]
	if _, err := se.run(v1, v1.Identity, at(7*24*time.Hour-6*time.Hour+10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(serving, se.secretData(t, "sample-api-certs")["tls.crt"]) {
		t.Error("the serving certificate was reissued again 10 minutes later")
	}
}

// clockedCerts returns, for a time offset d from now, reconcile options
// with the certificate options c whose clock reads now + d.
func clockedCerts(c engine.CertOptions) func(d time.Duration) engine.Options {
	start := time.Now()
	return func(d time.Duration) engine.Options {
		c := c
		c.Now = func() time.Time { return start.Add(d) }
		return engine.Options{NoWait: true, Certificates: c}
	}
}

func (se *sampleEnv) secretData(t *testing.T, name string) map[string][]byte {
	t.Helper()
	sec, err := se.env.Kube.CoreV1().Secrets(se.ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sec.Data
}

func pemBlock(t *testing.T, data []byte) []byte {
	t.Helper()
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatal("not PEM")
	}
	return b.Bytes
}
