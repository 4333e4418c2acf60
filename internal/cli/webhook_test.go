package cli

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/certs"
)

// TestClusterApplyWaitsForALateWebhook: a product's webhook guards its
// custom resources, and its backend starts 10 s after the webhook
// configuration is written (in a real cluster, its pods take a while).
// apply, without --wait, retries the custom resource until the webhook
// answers instead of failing at once.
func TestClusterApplyWaitsForALateWebhook(t *testing.T) {
	env, ctx, ns := smallProduct(t)
	group := strings.TrimPrefix(ns, "t-") + ".example.com"
	ca, err := certs.NewCA("late-webhook-test", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := certs.NewServing(ca, certs.ServiceDNSNames("hook", ns), time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	text := crdYAML(group, "gadget", "Gadget") + fmt.Sprintf(`---
apiVersion: v1
kind: Service
metadata: {name: hook, namespace: %[1]s}
spec:
  ports: [{port: 443, targetPort: 8443}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: hook-%[1]s}
webhooks:
- name: gadgets.%[2]s
  clientConfig:
    service: {name: hook, namespace: %[1]s, path: /validate, port: 443}
    caBundle: %[3]s
  rules:
  - {apiGroups: [%[2]s], apiVersions: ["*"], operations: [CREATE, UPDATE], resources: [gadgets]}
  failurePolicy: Fail
  sideEffects: None
  admissionReviewVersions: [v1]
  timeoutSeconds: 2
---
apiVersion: %[2]s/v1
kind: Gadget
metadata: {name: first, namespace: %[1]s}
spec: {size: 1}
`, ns, group, base64.StdEncoding.EncodeToString(ca.Cert))
	t.Cleanup(func() {
		ctx := context.Background()
		_ = env.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "hook-"+ns, metav1.DeleteOptions{})
		crd := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
		_ = env.Dynamic.Resource(crd).Delete(ctx, "gadgets."+group, metav1.DeleteOptions{})
	})
	// The backend: it starts listening 10 s after the webhook
	// configuration exists, and admits everything.
	var reviews atomic.Int32
	srv := &http.Server{Handler: admitAll(&reviews)}
	served := make(chan error, 1)
	go func() {
		var ip string
		err := testenv.Poll(ctx, "the webhook configuration and its Service", func(ctx context.Context) (bool, string, error) {
			if _, err := env.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "hook-"+ns, metav1.GetOptions{}); err != nil {
				return false, err.Error(), nil
			}
			svc, err := env.Kube.CoreV1().Services(ns).Get(ctx, "hook", metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			ip = svc.Spec.ClusterIP
			return true, "", nil
		})
		if err != nil {
			served <- err
			return
		}
		time.Sleep(10 * time.Second)
		pair, err := tls.X509KeyPair(serving.Cert, serving.Key)
		if err != nil {
			served <- err
			return
		}
		ln, err := listenLoopback(ip, pair)
		if err != nil {
			served <- err
			return
		}
		served <- nil
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() { _ = srv.Close() })

	file := writeFile(t, "late.yaml", text)
	code, out, errOut := run(t, nil, "apply", file, "-n", ns, "--version", "v1", "--timeout", "2m", "--kubeconfig", kubeconfigPath())
	if code != 0 {
		t.Fatalf("apply with a late webhook: exit %d\n%s%s", code, tail(out), errOut)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	gadgets := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "gadgets"}
	if _, err := env.Dynamic.Resource(gadgets).Namespace(ns).Get(ctx, "first", metav1.GetOptions{}); err != nil {
		t.Errorf("the custom resource behind the webhook: %v", err)
	}
	if reviews.Load() == 0 {
		t.Error("the webhook was never asked: the custom resource was not admitted by it")
	}
}
