package operator

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/certs"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

const checkStrategy = `---
apiVersion: v1
kind: Service
metadata: {name: op-webhook, namespace: prod}
spec:
  selector: {app: op}
  ports: [{name: https, port: 443, targetPort: webhooks}]
---
apiVersion: v1
kind: Secret
metadata: {name: op-certs, namespace: prod}
type: kubernetes.io/tls
---
apiVersion: v1
kind: Secret
metadata: {name: opaque, namespace: prod}
type: Opaque
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: op-validator}
webhooks:
- name: a.example.com
  clientConfig: {service: {name: op-webhook, namespace: prod, path: /a}}
- name: b.example.com
  clientConfig: {service: {name: op-webhook, namespace: prod, path: /b}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: elsewhere}
webhooks:
- name: url.example.com
  clientConfig: {url: https://example.com/x}
- name: other-ns.example.com
  clientConfig: {service: {name: op-webhook, namespace: other, path: /a}}
- name: missing.example.com
  clientConfig: {service: {name: nowhere, namespace: prod, path: /a}}
`

// TestWebhooksCheck: Check passes when the strategy sends each webhook to
// the operator's pod, and names every way it does not.
func TestWebhooksCheck(t *testing.T) {
	s, _, err := strategy.Parse([]byte(checkStrategy), strategy.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := admission.HandlerFunc(func(context.Context, admission.Request) admission.Response { return admission.Allowed("") })
	pod := func() *corev1.PodTemplateSpec {
		return &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "op", "extra": "x"}}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "op", Ports: []corev1.ContainerPort{{Name: "webhooks", ContainerPort: 8444}}}},
			Volumes:    []corev1.Volume{{Name: "c", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "op-certs"}}}},
		}}
	}
	good := Webhooks{Configuration: "op-validator", Namespace: "prod", Secret: "op-certs", Port: 8444, Handlers: map[string]admission.Handler{"/a": h, "/b": h}}
	if err := good.Check(s, pod()); err != nil {
		t.Fatalf("check of a pod the strategy serves: %v", err)
	}
	for _, tc := range []struct {
		name string
		w    func(*Webhooks)
		pod  func(*corev1.PodTemplateSpec)
		want []string
	}{
		{"no such configuration", func(w *Webhooks) { w.Configuration = "nope" }, nil, []string{`"nope": no such webhook configuration`}},
		{"a path without handler, a handler not dialed", func(w *Webhooks) { w.Handlers = map[string]admission.Handler{"/a": h, "/c": h} }, nil,
			[]string{`dials path "/b", which no handler serves`, `handler "/c": no webhook of the configuration dials it`}},
		{"URL, other namespace, missing Service", func(w *Webhooks) { w.Configuration = "elsewhere" }, nil,
			[]string{"dials a URL", "dials Service other/op-webhook, not one of prod", "service prod/nowhere: not in the strategy"}},
		{"secret not TLS", func(w *Webhooks) { w.Secret = "opaque" }, func(p *corev1.PodTemplateSpec) { p.Spec.Volumes[0].Secret.SecretName = "opaque" },
			[]string{"secret prod/opaque: not a TLS Secret"}},
		{"another port", func(w *Webhooks) { w.Port = 0 }, nil, []string{"targets port webhooks, which is not the operator's container port 9443 (found [8444])"}},
		{"labels not selected, secret not mounted", nil, func(p *corev1.PodTemplateSpec) { p.Labels = map[string]string{"app": "other"}; p.Spec.Volumes = nil },
			[]string{"selects map[app:op], not the operator's pod", "mounts no volume of secret op-certs"}},
		{"port by number", nil, func(p *corev1.PodTemplateSpec) { p.Spec.Containers[0].Ports[0].Name = "other" }, []string{"targets port webhooks"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, p := good, pod()
			if tc.w != nil {
				tc.w(&w)
			}
			if tc.pod != nil {
				tc.pod(p)
			}
			err := w.Check(s, p)
			for _, want := range tc.want {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("check: %v; want it to say %q", err, want)
				}
			}
		})
	}
	if err := (Webhooks{Configuration: "op-validator"}).Check(s, pod()); err == nil || !strings.Contains(err.Error(), "no handlers") {
		t.Errorf("check of webhooks without handlers or secret: %v", err)
	}
}

// TestServeWebhooksFollowsTheSecret: ServeWebhooks serves the handlers
// over TLS with the certificate of the Secret, refuses handshakes while
// the Secret holds none, and presents the new certificate once the Secret
// is rotated (another CA: the old one no longer verifies).
func TestServeWebhooksFollowsTheSecret(t *testing.T) {
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	ns := env.Namespace(ctx, t)
	const host = "op-webhook.prod.svc"
	issue := func() (ca, serving certs.Pair) {
		ca, err := certs.NewCA("test-ca", time.Now(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		serving, err = certs.NewServing(ca, []string{host}, time.Now(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return ca, serving
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "op-certs", Namespace: ns}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: nil, corev1.TLSPrivateKeyKey: nil}}
	sec, err := env.Kube.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	skip := true
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: &skip}})
	if err != nil {
		t.Fatal(err)
	}
	deny := admission.HandlerFunc(func(_ context.Context, req admission.Request) admission.Response {
		return admission.Denied("no " + req.Name)
	})
	if _, err := ServeWebhooks(mgr, Webhooks{Configuration: "op-validator", Namespace: ns, Secret: "op-certs", Host: "127.0.0.1", Port: port,
		Handlers: map[string]admission.Handler{"/deny": deny}}); err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() { stop(); <-done }()

	addr := fmt.Sprintf("127.0.0.1:%d", port)
	review := func(ctx context.Context, ca certs.Pair) (string, error) {
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(ca.Cert)
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{ServerName: host, RootCAs: roots, MinVersion: tls.VersionTLS12}}}
		body, _ := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{UID: types.UID("1"), Name: "thing", Operation: admissionv1.Delete}})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+"/deny", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(b, &out); err != nil || out.Response == nil {
			return "", fmt.Errorf("answer %s: %v", b, err)
		}
		if out.Response.Allowed || out.Response.Result == nil {
			return "", fmt.Errorf("answer %s", b)
		}
		return out.Response.Result.Message, nil
	}

	// Listening, but no certificate to present yet.
	caA, servingA := issue()
	testenv.WaitFor(ctx, t, "the server listening", func(context.Context) (bool, string, error) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false, err.Error(), nil
		}
		_ = c.Close()
		return true, "", nil
	})
	if _, err := review(ctx, caA); err == nil || !strings.Contains(err.Error(), "tls") {
		t.Errorf("a review while the Secret holds no certificate: %v, want a failed handshake", err)
	}

	caB, servingB := issue()
	for i, pair := range []struct{ ca, serving certs.Pair }{{caA, servingA}, {caB, servingB}} {
		sec.Data = map[string][]byte{corev1.TLSCertKey: pair.serving.Cert, corev1.TLSPrivateKeyKey: pair.serving.Key}
		if sec, err = env.Kube.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(ctx, t, fmt.Sprintf("the handler answering with certificate %d", i), func(ctx context.Context) (bool, string, error) {
			msg, err := review(ctx, pair.ca)
			if err != nil {
				return false, err.Error(), nil
			}
			return msg == "no thing", msg, nil
		})
		if i == 1 {
			if _, err := review(ctx, caA); err == nil {
				t.Error("the first CA still verifies the server after the Secret was rotated to another")
			}
		}
	}
}
