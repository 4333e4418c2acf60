package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// downWebhookProduct is a product whose validating webhook (failurePolicy
// Fail, no backend at all) guards the deletion of its custom resources and
// of every ConfigMap and Secret in namespace ns: while it is registered,
// none of them can be deleted.
func downWebhookProduct(ns, group string) string {
	return crdYAML(group, "gadget", "Gadget") + fmt.Sprintf(`---
apiVersion: v1
kind: Service
metadata: {name: hook, namespace: %[1]s}
spec:
  ports: [{port: 443, targetPort: 8443}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: %[1]s}
data: {k: v}
---
apiVersion: v1
kind: Secret
metadata: {name: hook-certs, namespace: %[1]s}
type: kubernetes.io/tls
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: down-%[1]s}
webhooks:
- name: gadgets.%[2]s
  clientConfig:
    service: {name: hook, namespace: %[1]s, path: /validate, port: 443}
  rules:
  - {apiGroups: [%[2]s], apiVersions: ["*"], operations: [DELETE], resources: [gadgets]}
  - {apiGroups: [""], apiVersions: ["*"], operations: [DELETE], resources: [configmaps, secrets]}
  namespaceSelector:
    matchLabels: {kubernetes.io/metadata.name: %[1]s}
  failurePolicy: Fail
  sideEffects: None
  admissionReviewVersions: [v1]
  timeoutSeconds: 2
---
apiVersion: %[2]s/v1
kind: Gadget
metadata: {name: first, namespace: %[1]s}
spec: {size: 1}
`, ns, group)
}

// TestClusterUninstallWithItsWebhookDown: the product's webhook is down and
// would refuse every delete of what it guards; uninstall removes the
// webhook first, so it completes and removes everything.
func TestClusterUninstallWithItsWebhookDown(t *testing.T) {
	env, ctx, ns := smallProduct(t)
	group := strings.TrimPrefix(ns, "t-") + ".example.com"
	t.Cleanup(func() {
		ctx := context.Background()
		_ = env.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "down-"+ns, metav1.DeleteOptions{})
		crd := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
		_ = env.Dynamic.Resource(crd).Delete(ctx, "gadgets."+group, metav1.DeleteOptions{})
	})
	file := writeFile(t, "down.yaml", downWebhookProduct(ns, group))
	if code, out, errOut := run(t, nil, "apply", file, "-n", ns, "--name", "down", "--version", "v1", "--kubeconfig", kubeconfigPath()); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, tail(out), errOut)
	}
	// The webhook is in force: a delete is refused.
	err := env.Kube.CoreV1().ConfigMaps(ns).Delete(ctx, "settings", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
	if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Fatalf("a delete with the webhook down: %v, want it refused by the webhook", err)
	}

	code, out, errOut := run(t, nil, "uninstall", "down", "-n", ns, "--wait", "--kubeconfig", kubeconfigPath())
	if code != 0 {
		t.Fatalf("uninstall with the webhook down: exit %d\n%s%s", code, out, errOut)
	}
	if i, j := strings.Index(out, "ValidatingWebhookConfiguration"), strings.Index(out, "Gadget."); i < 0 || j < 0 || i > j {
		t.Errorf("uninstall did not delete the webhook before the custom resource:\n%s", out)
	}
	if _, err := env.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "down-"+ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("webhook after uninstall: %v", err)
	}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("configmap settings after uninstall: %v", err)
	}
	secrets, err := env.Kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(secrets.Items) != 0 {
		t.Errorf("secrets after uninstall (the serving certificate's and the CA's must go): %v %v", secrets, err)
	}
	gadgets := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "gadgets"}
	if _, err := env.Dynamic.Resource(gadgets).Namespace(ns).Get(ctx, "first", metav1.GetOptions{}); err == nil {
		t.Error("gadget first after uninstall")
	}
}
