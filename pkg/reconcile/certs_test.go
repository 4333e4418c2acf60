package reconcile_test

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/pkg/reconcile"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// Certificates are kept while good, rotated before they expire, and a
// rotation changes no pod template (no restart loop).
func TestCertificatesRotateBeforeExpiry(t *testing.T) {
	se := newSampleEnv(t)
	ctx := t.Context()
	v1 := sample(t, se.ns, "v1.0.0")
	start := time.Now()
	at := func(d time.Duration) reconcile.Options {
		return reconcile.Options{NoWait: true, Certificates: reconcile.CertOptions{
			CertValidity: 10 * 24 * time.Hour, RenewBefore: 2 * 24 * time.Hour, CAValidity: 365 * 24 * time.Hour,
			Now: func() time.Time { return start.Add(d) },
		}}
	}
	cert := func() []byte {
		sec, err := se.env.Kube.CoreV1().Secrets(se.ns).Get(ctx, "sample-api-certs", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return sec.Data["tls.crt"]
	}
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
	if template() != tmpl {
		t.Error("certificate rotation changed the api Deployment")
	}
}
