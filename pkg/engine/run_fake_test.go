package engine

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// A whole Run over the fake cluster of applier_fake_test.go: what a first
// run writes, that a second one writes nothing, what a run of a strategy
// that dropped an object prunes, and that another installation's object
// is a conflict that keeps prune from running. The cluster tests of
// reconcile_test.go show the same against a real API server.
func TestRunWithFakes(t *testing.T) {
	ctx := t.Context()
	owner := inventory.Owner{Namespace: "app", Name: "demo", Kind: inventory.KindInstallation}
	id := strategy.Identity{Registry: "example.com/demo", Version: "v1", Identifier: "id1"}
	settings, worker := obj("v1", "ConfigMap", "app", "settings"), obj("v1", "ServiceAccount", "app", "worker")
	settings.Object["data"] = map[string]any{"mode": "fast"}
	theirs := obj("v1", "ConfigMap", "app", "theirs")
	theirs.SetLabels(inventory.Owner{Namespace: "ops", Name: "other", Kind: inventory.KindInstallation}.Labels())
	opts := Options{Owner: owner}
	c := newFakeCluster(t, nil, nil, theirs.DeepCopy())
	rc := c.reconciler()
	run := func(objs ...*unstructured.Unstructured) (*Result, error) {
		t.Helper()
		s := &strategy.Strategy{Identity: id}
		for _, o := range objs {
			s.Objects = append(s.Objects, o.DeepCopy())
		}
		return rc.Run(ctx, s, opts)
	}
	inventoried := func() []string {
		t.Helper()
		inv, err := inventory.NewStore(c.kube).Get(ctx, owner)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range inv.Refs() {
			out = append(out, r.String())
		}
		return out
	}

	// A first run creates the namespace and the objects, and records
	// them in the inventory.
	res, err := run(settings, worker)
	if err != nil {
		t.Fatalf("first run: %v", err)
	}
	want := map[string]apply.Action{"Namespace/app": apply.ActionCreate, "ConfigMap/app/settings": apply.ActionCreate, "ServiceAccount/app/worker": apply.ActionCreate}
	if got := actionsOf(res); !maps.Equal(got, want) || !res.RolledOver {
		t.Errorf("first run: actions %v (rolled over %t), want %v", got, res.RolledOver, want)
	}
	if got := c.writes(); !slices.Contains(got, "create configmaps app/settings") || !slices.Contains(got, "create serviceaccounts app/worker") || !slices.Contains(got, "create namespaces app") {
		t.Errorf("first run wrote %q", got)
	}
	live := c.live(t, settings)
	if live == nil || !apply.IsOurs(live, owner) {
		t.Fatalf("the ConfigMap is not the installation's: %v", live)
	}
	if got := inventoried(); !slices.Contains(got, "ConfigMap/app/settings") || !slices.Contains(got, "ServiceAccount/app/worker") {
		t.Errorf("inventory after the first run: %v", got)
	}

	// The same strategy again writes nothing.
	res, err = run(settings, worker)
	if err != nil {
		t.Fatalf("second run: %v", err)
	}
	if res.Count(apply.ActionUnchanged) != 3 || len(res.Pruned) != 0 {
		t.Errorf("second run: actions %v, pruned %v", actionsOf(res), res.Pruned)
	}
	if got := c.writes(); len(got) != 0 {
		t.Errorf("second run wrote %q", got)
	}

	// Drift is written back.
	drifted := live.DeepCopy()
	drifted.Object["data"] = map[string]any{"mode": "slow"}
	if _, err := c.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("app").Update(ctx, drifted, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.writes()
	res, err = run(settings, worker)
	if err != nil {
		t.Fatalf("run after drift: %v", err)
	}
	if got := actionsOf(res)["ConfigMap/app/settings"]; got != apply.ActionUpdate {
		t.Errorf("drifted ConfigMap: %s, want %s", got, apply.ActionUpdate)
	}
	if mode, _, _ := unstructured.NestedString(c.live(t, settings).Object, "data", "mode"); mode != "fast" {
		t.Errorf("drift not written back: mode %q", mode)
	}
	c.writes()

	// Another installation's object is a conflict: the rest is applied,
	// nothing is pruned.
	res, err = run(worker, theirs)
	var conflict *apply.ConflictError
	if !errors.As(err, &conflict) || conflict.Ref != strategy.RefOf(theirs) {
		t.Fatalf("run over another installation's object: %v, want a conflict on %s", err, strategy.RefOf(theirs))
	}
	if res.RolledOver || len(res.Pruned) != 0 || c.live(t, settings) == nil {
		t.Errorf("a run with a conflict pruned: %v (rolled over %t)", res.Pruned, res.RolledOver)
	}
	if got := c.writes(); slices.ContainsFunc(got, func(w string) bool { return strings.HasPrefix(w, "delete") }) || slices.Contains(got, "update configmaps app/theirs") {
		t.Errorf("a run with a conflict wrote %q", got)
	}

	// A strategy that drops the ConfigMap prunes it.
	res, err = run(worker)
	if err != nil {
		t.Fatalf("run without the ConfigMap: %v", err)
	}
	if !slices.Contains(res.Pruned, strategy.RefOf(settings)) || c.live(t, settings) != nil {
		t.Errorf("the dropped ConfigMap was not pruned: pruned %v", res.Pruned)
	}
	if got := inventoried(); slices.Contains(got, "ConfigMap/app/settings") {
		t.Errorf("the pruned ConfigMap is still in the inventory: %v", got)
	}
	if c.live(t, theirs) == nil {
		t.Error("prune deleted another installation's object")
	}
}

// A Run over the fake cluster of a strategy with an empty TLS Secret and
// a webhook calling the Service in front of it: the Secret is filled with
// a certificate the CA bundle injected into the webhook verifies, the CA
// is kept in its Secret, and a second run changes nothing (no certificate
// is reissued). The cluster tests of certs_test.go show the same, with
// rotation, against a real API server.
func TestRunCertificatesWithFakes(t *testing.T) {
	ctx := t.Context()
	owner := inventory.Owner{Namespace: "app", Name: "demo", Kind: inventory.KindInstallation}
	s, _, err := strategy.Parse([]byte(`
apiVersion: v1
kind: Secret
metadata: {name: hook-tls, namespace: app}
type: kubernetes.io/tls
---
apiVersion: v1
kind: Service
metadata: {name: hook, namespace: app}
spec:
  selector: {app: hook}
  ports: [{port: 443, targetPort: 8443}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: hook, namespace: app}
spec:
  selector: {matchLabels: {app: hook}}
  template:
    metadata: {labels: {app: hook}}
    spec:
      containers: [{name: hook, image: hook:v1, volumeMounts: [{name: tls, mountPath: /tls}]}]
      volumes: [{name: tls, secret: {secretName: hook-tls}}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: demo-hook}
webhooks:
- name: check.example.com
  clientConfig: {service: {namespace: app, name: hook, path: /check}}
  admissionReviewVersions: [v1]
  sideEffects: None
`), strategy.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Identity = strategy.Identity{Registry: "example.com/demo", Version: "v1", Identifier: "id1"}
	c := newFakeCluster(t, nil, nil)
	rc := c.reconciler()
	// The fake cluster has no Deployment controller: the step's wait is
	// not asked for.
	opts := Options{Owner: owner, NoWait: true}
	if _, err := rc.Run(ctx, s, opts); err != nil {
		t.Fatalf("first run: %v", err)
	}
	secret := c.live(t, obj("v1", "Secret", "app", "hook-tls"))
	webhook := c.live(t, obj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "demo-hook"))
	if secret == nil || webhook == nil {
		t.Fatalf("secret %v, webhook %v", secret, webhook)
	}
	crtB64, _, _ := unstructured.NestedString(secret.Object, "data", "tls.crt")
	crt, err := base64.StdEncoding.DecodeString(crtB64)
	if err != nil || len(crt) == 0 {
		t.Fatalf("the TLS Secret holds no certificate: %q %v", crtB64, err)
	}
	hooks, _, _ := unstructured.NestedSlice(webhook.Object, "webhooks")
	bundleB64, _, _ := unstructured.NestedString(hooks[0].(map[string]any), "clientConfig", "caBundle")
	bundle, err := base64.StdEncoding.DecodeString(bundleB64)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		t.Fatalf("the webhook's caBundle holds no certificate: %q", bundleB64)
	}
	block, _ := pem.Decode(crt)
	if block == nil {
		t.Fatalf("tls.crt is not PEM: %q", crt)
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "hook.app.svc"}); err != nil {
		t.Errorf("the webhook's CA bundle does not verify the Secret's certificate for hook.app.svc: %v", err)
	}
	cas, err := c.kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + DefaultCASecret})
	if err != nil || len(cas.Items) != 1 {
		t.Fatalf("CA Secrets %v: %v", cas, err)
	}
	c.writes()

	res, err := rc.Run(ctx, s, opts)
	if err != nil {
		t.Fatalf("second run: %v", err)
	}
	if got := c.writes(); len(got) != 0 || res.Count(apply.ActionUnchanged) != len(res.Applied) {
		t.Errorf("second run wrote %q (actions %v)", got, actionsOf(res))
	}
	if again := c.live(t, secret); !reflect.DeepEqual(again.Object["data"], secret.Object["data"]) {
		t.Error("the second run reissued the certificate")
	}
}

// actionsOf returns what a run did to each object, by ref.
func actionsOf(res *Result) map[string]apply.Action {
	out := map[string]apply.Action{}
	for _, a := range res.Applied {
		out[a.Ref.String()] = a.Action
	}
	return out
}
