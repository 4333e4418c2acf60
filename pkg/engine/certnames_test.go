package engine_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/installstrategy/installstrategy/internal/kubevirtdata"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// virtOperatorPod is a pod of virt-operator's own Deployment as KubeVirt
// ships it (kubevirt-operator.yaml, NewOperatorDeployment): outside the
// strategy, labelled kubevirt.io=virt-operator (what the strategy's
// kubevirt-operator-webhook Service selects), mounting
// kubevirt-operator-certs.
func virtOperatorPod(name string) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kubevirt", Labels: map[string]string{"kubevirt.io": "virt-operator"}},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "kubevirt-operator-certs", VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: "kubevirt-operator-certs", Optional: new(true)},
		}}}},
	}
}

// podsFrom answers pod lookups from pods, as the API server would (label
// selector, namespace), recording each lookup.
func podsFrom(pods []corev1.Pod, asked *[]string) func(context.Context, string, string, int64) ([]corev1.Pod, error) {
	return func(_ context.Context, ns, selector string, limit int64) ([]corev1.Pod, error) {
		*asked = append(*asked, ns+"|"+selector)
		sel, err := labels.Parse(selector)
		if err != nil {
			return nil, err
		}
		var out []corev1.Pod
		for _, p := range pods {
			if p.Namespace == ns && sel.Matches(labels.Set(p.Labels)) && int64(len(out)) < limit {
				out = append(out, p)
			}
		}
		return out, nil
	}
}

// kubevirtVersions returns every KubeVirt version in the shared testdata.
func kubevirtVersions(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(kubevirtdata.Dir(t), "kubevirt-*.manifests.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no KubeVirt strategies in the testdata: %v", err)
	}
	var out []string
	for _, f := range files {
		out = append(out, strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "kubevirt-"), ".manifests.yaml"))
	}
	for _, v := range kubevirtdata.Versions {
		if !slices.Contains(out, v) {
			t.Fatalf("version %s missing from the testdata (%v)", v, out)
		}
	}
	return out
}

// rawKubeVirt is KubeVirt's strategy exactly as its dump writes it.
func rawKubeVirt(t *testing.T, version string) *strategy.Strategy {
	t.Helper()
	s, _, err := strategy.Parse(kubevirtdata.Read(t, version, "manifests.yaml"), strategy.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// dialedBackends returns, for every Service a webhook configuration or
// APIService of s dials, the TLS Secrets (namespace/name) of s that the
// pods behind it mount — the strategy's workloads' and the given pods
// outside it — worked out here from the objects themselves.
func dialedBackends(t *testing.T, s *strategy.Strategy, outside []corev1.Pod) map[string][]string {
	t.Helper()
	tlsSecrets, services := map[string]bool{}, map[string]*unstructured.Unstructured{}
	var dialed []string
	type pod struct {
		ns     string
		labels map[string]string
		vols   []any
	}
	var pods []pod
	for _, o := range s.Objects {
		switch o.GetKind() {
		case "Secret":
			if typ, _, _ := unstructured.NestedString(o.Object, "type"); typ == "kubernetes.io/tls" {
				tlsSecrets[o.GetNamespace()+"/"+o.GetName()] = true
			}
		case "Service":
			services[o.GetNamespace()+"/"+o.GetName()] = o
		case "Deployment", "DaemonSet", "StatefulSet":
			l, _, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels")
			v, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "volumes")
			pods = append(pods, pod{o.GetNamespace(), l, v})
		case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
			hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
			for _, h := range hooks {
				ns, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "service", "namespace")
				name, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "service", "name")
				dialed = append(dialed, ns+"/"+name)
			}
		case "APIService":
			ns, _, _ := unstructured.NestedString(o.Object, "spec", "service", "namespace")
			name, _, _ := unstructured.NestedString(o.Object, "spec", "service", "name")
			dialed = append(dialed, ns+"/"+name)
		}
	}
	for _, p := range outside {
		var vols []any
		for _, v := range p.Spec.Volumes {
			if v.Secret != nil {
				vols = append(vols, map[string]any{"secret": map[string]any{"secretName": v.Secret.SecretName}})
			}
		}
		pods = append(pods, pod{p.Namespace, p.Labels, vols})
	}
	out := map[string][]string{}
	for _, key := range dialed {
		svc := services[key]
		if svc == nil {
			t.Fatalf("%s is dialed but not in the strategy", key)
		}
		sel, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
		for _, p := range pods {
			if p.ns != svc.GetNamespace() || len(sel) == 0 || !labels.SelectorFromSet(sel).Matches(labels.Set(p.labels)) {
				continue
			}
			for _, v := range p.vols {
				name, _, _ := unstructured.NestedString(v.(map[string]any), "secret", "secretName")
				if sk := p.ns + "/" + name; tlsSecrets[sk] && !slices.Contains(out[key], sk) {
					out[key] = append(out[key], sk)
				}
			}
		}
	}
	return out
}

// The certificate of every serving Secret of KubeVirt's real strategies
// (every version in the testdata) names every Service a webhook
// configuration or APIService of the strategy dials and whose pods mount
// the Secret, under each name its clients use — including virt-operator's
// own validator, whose Service kubevirt-operator-webhook selects
// virt-operator's pods (outside the strategy), which mount
// kubevirt-operator-certs. KubeVirt's own pairing of Secret and Service
// (populationStrategy in components/secrets.go) is checked as well.
func TestKubeVirtServingCertificatesNameTheirServices(t *testing.T) {
	// Secret -> the Service virt-operator issues its certificate for.
	kubevirtPairs := map[string]string{
		"kubevirt-operator-certs":              "kubevirt-operator-webhook",
		"kubevirt-virt-api-certs":              "virt-api",
		"kubevirt-exportproxy-certs":           "virt-exportproxy",
		"kubevirt-virt-template-api-certs":     "virt-template-api-service",
		"kubevirt-virt-template-webhook-certs": "virt-template-webhook-service",
	}
	for _, version := range kubevirtVersions(t) {
		t.Run(version, func(t *testing.T) {
			s := rawKubeVirt(t, version)
			outside := []corev1.Pod{virtOperatorPod("virt-operator-1"), virtOperatorPod("virt-operator-2")}
			var asked []string
			names, err := engine.ServingDNSNames(t.Context(), s, podsFrom(outside, &asked))
			if err != nil {
				t.Fatal(err)
			}
			// Only the Service no workload of the strategy backs is looked
			// up live.
			if !slices.Equal(asked, []string{"kubevirt|kubevirt.io=virt-operator"}) {
				t.Errorf("pods looked up: %v, want only those behind kubevirt-operator-webhook", asked)
			}
			backends := dialedBackends(t, s, outside)
			if len(backends) == 0 {
				t.Fatal("no dialed Service is backed by a TLS Secret: the test shows nothing")
			}
			for svc, secrets := range backends {
				ns, name, _ := strings.Cut(svc, "/")
				for _, sec := range secrets {
					for _, want := range []string{name, name + "." + ns, name + "." + ns + ".svc", name + "." + ns + ".svc.cluster.local"} {
						if !slices.Contains(names[sec], want) {
							t.Errorf("%s serves %s, but its certificate names %v, not %s", sec, svc, names[sec], want)
						}
					}
				}
			}
			if !slices.Contains(backends["kubevirt/kubevirt-operator-webhook"], "kubevirt/kubevirt-operator-certs") {
				t.Errorf("the oracle does not tie kubevirt-operator-webhook to kubevirt-operator-certs: %v", backends)
			}
			checked := 0
			for secret, svc := range kubevirtPairs {
				got, ok := names["kubevirt/"+secret]
				if !ok {
					continue // not in this version
				}
				checked++
				if !slices.Contains(got, svc+".kubevirt.svc") {
					t.Errorf("%s: names %v, want %s.kubevirt.svc as virt-operator issues it", secret, got, svc)
				}
			}
			if checked < 3 {
				t.Errorf("only %d of KubeVirt's serving Secrets found", checked)
			}
		})
	}
}

// Without virt-operator's pods nothing ties kubevirt-operator-certs to a
// Service (its certificate keeps its own name), and pods that are not
// virt-operator's add no name: a pod of another namespace, one the
// Service does not select (both from a lister that ignores its query),
// and one that mounts a Secret the strategy's own workloads serve
// (kubevirt-virt-api-certs, virt-api's) — a pod outside the strategy does
// not widen the certificate of the strategy's own workloads.
func TestServingNamesIgnorePodsThatDoNotServe(t *testing.T) {
	s := rawKubeVirt(t, "v1.9.0")
	var asked []string
	base, err := engine.ServingDNSNames(t.Context(), s, podsFrom(nil, &asked))
	if err != nil {
		t.Fatal(err)
	}
	if got := base["kubevirt/kubevirt-operator-certs"]; !slices.Equal(got, []string{"kubevirt-operator-certs"}) {
		t.Errorf("no virt-operator pod: names %v, want the Secret's own name", got)
	}
	mounting := func(name, ns string, l map[string]string, secret string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: l},
			Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}}}}}
	}
	op := map[string]string{"kubevirt.io": "virt-operator"}
	hostile := []corev1.Pod{
		mounting("other-ns", "elsewhere", op, "kubevirt-operator-certs"),
		mounting("unselected", "kubevirt", map[string]string{"kubevirt.io": "not-virt-operator"}, "kubevirt-operator-certs"),
		mounting("widens-virt-api", "kubevirt", op, "kubevirt-virt-api-certs"),
	}
	lying := func(_ context.Context, _, _ string, _ int64) ([]corev1.Pod, error) { return hostile, nil }
	got, err := engine.ServingDNSNames(t.Context(), s, lying)
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range base {
		if !slices.Equal(got[key], want) {
			t.Errorf("%s: names %v with pods that do not serve it, want %v", key, got[key], want)
		}
	}
	// A pod lookup that fails fails the certificates' step, rather than
	// issuing a certificate without the names its clients dial.
	failing := func(context.Context, string, string, int64) ([]corev1.Pod, error) {
		return nil, fmt.Errorf("boom")
	}
	if _, err := engine.ServingDNSNames(t.Context(), s, failing); err == nil || !strings.Contains(err.Error(), "kubevirt-operator-webhook") {
		t.Errorf("failing pod lookup: err %v, want one naming the Service", err)
	}
}

// On the local cluster, KubeVirt v1.9.0 as shipped (every webhook
// failurePolicy Fail) is installed beside virt-operator's Deployment as
// KubeVirt ships it (outside the strategy; kwok runs its pod, so stand-ins
// serve on the Services' ClusterIPs with the Secrets the pods mount). The
// certificate the engine issues into kubevirt-operator-certs names
// kubevirt-operator-webhook under every name its clients use and verifies
// against the CA bundle the engine injected into virt-operator-validator;
// a TLS handshake with ServerName kubevirt-operator-webhook.kubevirt.svc
// verifying against that bundle succeeds; and the API server itself, which
// dials that name, admits a KubeVirt CR's create, update and delete
// through the validator.
func TestKubeVirtOperatorWebhookServedWithItsCertificate(t *testing.T) {
	ke := newKubeVirtEnv(t)
	env := ke.env
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	env.EnsureKubeVirtCRD(ctx, t)
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// virt-operator's Deployment, its pod template as KubeVirt's
	// NewOperatorDeployment writes the parts that matter here.
	pod := virtOperatorPod("")
	op := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "virt-operator", Namespace: "kubevirt", Labels: map[string]string{"kubevirt.io": "virt-operator"}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubevirt.io": "virt-operator"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "virt-operator", Image: "quay.io/kubevirt/virt-operator:v1.9.0",
					VolumeMounts: []corev1.VolumeMount{{Name: "kubevirt-operator-certs", MountPath: "/etc/virt-operator/certificates", ReadOnly: true}}}},
				Volumes: pod.Spec.Volumes,
			}},
		},
	}
	if _, err := env.Kube.AppsV1().Deployments("kubevirt").Create(ctx, op, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(ctx, t, "a pod of virt-operator's Deployment", func(ctx context.Context) (bool, string, error) {
		l, err := env.Kube.CoreV1().Pods("kubevirt").List(ctx, metav1.ListOptions{LabelSelector: "kubevirt.io=virt-operator"})
		if err != nil {
			return false, err.Error(), nil
		}
		return len(l.Items) > 0, fmt.Sprintf("%d pods", len(l.Items)), nil
	})
	// newKubeVirtEnv already serves virt-api.
	operatorHook := env.ServeWebhookStandIn(ctx, t, "kubevirt", "kubevirt-operator-webhook", "kubevirt-operator-certs")

	s := testenv.KubeVirtStrategyAsShipped(t, "v1.9.0")
	res, err := ke.run(s, strategy.Identity{}, engine.Options{})
	if err != nil {
		t.Fatalf("install KubeVirt v1.9.0 as shipped: %v", err)
	}
	if !res.RolledOver {
		t.Error("not rolled over")
	}

	sec, err := env.Kube.CoreV1().Secrets("kubevirt").Get(ctx, "kubevirt-operator-certs", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(sec.Data["tls.crt"])
	if block == nil {
		t.Fatalf("kubevirt-operator-certs holds no certificate: %v", sec.Data)
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	const host = "kubevirt-operator-webhook.kubevirt.svc"
	for _, want := range []string{"kubevirt-operator-webhook", "kubevirt-operator-webhook.kubevirt", host, host + ".cluster.local"} {
		if !slices.Contains(leaf.DNSNames, want) {
			t.Errorf("kubevirt-operator-certs names %v, not %s", leaf.DNSNames, want)
		}
	}
	vwc, err := env.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "virt-operator-validator", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	for _, h := range vwc.Webhooks {
		if h.ClientConfig.Service == nil || h.ClientConfig.Service.Name != "kubevirt-operator-webhook" || h.FailurePolicy == nil || *h.FailurePolicy != admissionregistrationv1.Fail {
			t.Errorf("webhook %s: %+v, failurePolicy %v: not KubeVirt's", h.Name, h.ClientConfig.Service, h.FailurePolicy)
		}
		if !roots.AppendCertsFromPEM(h.ClientConfig.CABundle) {
			t.Fatalf("webhook %s has no CA bundle", h.Name)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: roots}); err != nil {
		t.Errorf("kubevirt-operator-certs against the injected bundle: %v", err)
	}
	svc, err := env.Kube.CoreV1().Services("kubevirt").Get(ctx, "kubevirt-operator-webhook", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dialer := &tls.Dialer{Config: &tls.Config{ServerName: host, RootCAs: roots, MinVersion: tls.VersionTLS12}}
	conn, err := dialer.DialContext(ctx, "tcp", net.JoinHostPort(svc.Spec.ClusterIP, "443"))
	if err != nil {
		t.Errorf("TLS to %s at %s:443 verifying against the injected bundle: %v", host, svc.Spec.ClusterIP, err)
	} else {
		_ = conn.Close()
	}

	// The API server dials the validator (failurePolicy Fail) for a
	// KubeVirt CR's create, update and delete.
	kv := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
		"metadata": map[string]any{"name": "kubevirt", "namespace": "kubevirt"}, "spec": map[string]any{}}}
	kvs := env.Dynamic.Resource(schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "kubevirts"}).Namespace("kubevirt")
	created, err := kvs.Create(ctx, kv, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create the KubeVirt CR through virt-operator's validator: %v", err)
	}
	_ = unstructured.SetNestedField(created.Object, "v1.9.0", "spec", "imageTag")
	if _, err := kvs.Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Errorf("update the KubeVirt CR through virt-operator's validator: %v", err)
	}
	if err := kvs.Delete(ctx, "kubevirt", metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete the KubeVirt CR through virt-operator's validator: %v", err)
	}
	if n := operatorHook.Reviews.Load(); n < 3 {
		t.Errorf("virt-operator's validator answered %d reviews, want the create, update and delete (3)", n)
	}
}
