package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/images"
	"github.com/installstrategy/installstrategy/internal/localcluster"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/certs"
	"github.com/installstrategy/installstrategy/pkg/generate"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/operator"
)

// TestRealCanaryCrashLoopStopsUpgrade runs the sample product's handler
// DaemonSet for real on the local cluster's real node (its image built by
// internal/images from hack/sample-component, as `make images` does) and
// upgrades it to a version whose handler crashes (SAMPLE_CRASH=true, set
// by a customize patch): the canary pod really exits 1 and restarts on the
// real node, the rollout stops Degraded with CanaryFailed (phase Failed,
// observed v1.0.0), and the api Deployment still runs v1.0.0.
func TestRealCanaryCrashLoopStopsUpgrade(t *testing.T) {
	e, rn := setupOnRealNode(t, false)
	ctx := t.Context()
	e.waitDeployed(ctx, t, "sample", "v1.0.0")
	handler := func() *corev1.Pod {
		t.Helper()
		pods, err := e.env.Kube.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=sample-handler"})
		if err != nil {
			t.Fatal(err)
		}
		for i := range pods.Items {
			if pods.Items[i].DeletionTimestamp == nil {
				return &pods.Items[i]
			}
		}
		return nil
	}
	if p := handler(); p == nil || p.Spec.NodeName != rn.Name || !testenv.PodReady(p) {
		t.Fatalf("sample-handler v1.0.0: want one Ready pod on the real node %s, got %v", rn.Name, p)
	}

	e.update(ctx, t, "sample", func(in *v1alpha1.Installation) {
		in.Spec.Version = "v1.1.0"
		in.Spec.CustomizeComponents = &v1alpha1.CustomizeComponents{Patches: []v1alpha1.CustomizePatch{{
			ResourceKind: "DaemonSet", ResourceName: "sample-handler", Type: v1alpha1.StrategicMergePatchType,
			Patch: `{"spec":{"template":{"spec":{"containers":[{"name":"sample-handler","env":[{"name":"SAMPLE_CRASH","value":"true"}]}]}}}}`,
		}}}
	})
	in := e.waitDegraded(ctx, t, "sample", v1alpha1.ReasonCanaryFailed)
	if in.Status.Phase != v1alpha1.PhaseFailed || in.Status.ObservedVersion != "v1.0.0" || in.Status.TargetVersion != "v1.1.0" {
		t.Errorf("after the failed canary: %s", describe(in))
	}
	p := handler()
	if p == nil || p.Spec.NodeName != rn.Name || !strings.HasSuffix(p.Spec.Containers[0].Image, ":v1.1.0") {
		t.Fatalf("the canary pod: want sample-handler v1.1.0 on the real node, got %v", p)
	}
	crashed := false
	for _, c := range p.Status.ContainerStatuses {
		if term := c.LastTerminationState.Terminated; term != nil && term.ExitCode == 1 && c.RestartCount >= 1 {
			crashed = true
		}
	}
	if !crashed {
		t.Errorf("the canary pod did not really crash: %s", testenv.DescribePod(p))
	}
	var d appsv1.Deployment
	e.exists(ctx, t, &d, "sample-api")
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "registry.example/sample/sample-api:v1.0.0" {
		t.Errorf("sample-api runs %s, want v1.0.0 (api is updated last)", img)
	}
}

// setupOnRealNode starts the operator, imports the sample's images into
// the real node and creates the sample product at v1.0.0 with its handler
// (and, with infra, its api and controller) placed on the real node.
func setupOnRealNode(t *testing.T, infra bool, change ...func(*operator.Options)) (*e2e, *localcluster.RealNode) {
	t.Helper()
	e := setup(t, withOptions(func(o *operator.Options) {
		for _, c := range change {
			c(o)
		}
	}))
	rn := e.env.RealNode(t)
	importSampleImages(t, rn)
	spec := sampleSpec("v1.0.0")
	spec.Workloads = onRealNode()
	if infra {
		spec.Infra = onRealNode()
	}
	e.create(t.Context(), t, "sample", spec)
	return e, rn
}

// importSampleImages builds the sample product's component images (as
// `make images` does) and imports them into the real node.
func importSampleImages(t *testing.T, rn *localcluster.RealNode) {
	t.Helper()
	built, err := images.Build(t.Context(), images.Options{Root: "../..", OutDir: t.TempDir(),
		SampleRegistry: "registry.example/sample", SampleVersions: []string{"v1.0.0", "v1.1.0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := localcluster.ImportImages(t.Context(), rn.Containerd, built[0].Tarball); err != nil {
		t.Fatal(err)
	}
}

// onRealNode is the placement that selects and tolerates the real node.
func onRealNode() *v1alpha1.NodePlacement {
	return &v1alpha1.NodePlacement{
		NodeSelector: map[string]string{metakeys.RealNodeLabel: "true"},
		Tolerations:  []corev1.Toleration{{Key: metakeys.RealNodeTaint, Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
	}
}

// TestRealWebhookServesGeneratedCertificate runs the whole sample product
// on the real node: sample-api is a real HTTPS server (hack/sample-component)
// with the serving certificate the reconciler generated in its Secret. The
// API server calls the product's validating webhook at the Service's
// ClusterIP, which the test forwards (TCP only, as kube-proxy would; TLS
// is end to end) to an api pod: the API server checks the served
// certificate against the caBundle the reconciler injected, and the
// webhook admits a valid Widget and refuses an invalid one.
func TestRealWebhookServesGeneratedCertificate(t *testing.T) {
	// The operator checks what sample-api's Service presents at every
	// resync (see the end).
	e, rn := setupOnRealNode(t, true, func(o *operator.Options) {
		o.ResyncPeriod, o.ServedCertificateCheck = 2*time.Second, time.Nanosecond
	})
	ctx := t.Context()
	e.waitDeployed(ctx, t, "sample", "v1.0.0")

	// backend is the address of the Ready sample-api pod on the real node
	// (a certificate renewal restarts the pod: the address changes).
	backend := func(ctx context.Context) (string, error) {
		pods, err := e.env.Kube.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=sample-api"})
		if err != nil {
			return "", err
		}
		for i := range pods.Items {
			if p := &pods.Items[i]; p.DeletionTimestamp == nil && testenv.PodReady(p) && p.Spec.NodeName == rn.Name {
				return net.JoinHostPort(p.Status.PodIP, "8443"), nil
			}
		}
		return "", fmt.Errorf("no Ready sample-api pod on the real node among %d", len(pods.Items))
	}
	if _, err := backend(ctx); err != nil {
		t.Fatal(err)
	}

	// The served certificate is the generated one: it verifies against the
	// webhook configuration's caBundle for the Service's DNS name.
	hook, err := e.env.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "sample-api-validator", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(hook.Webhooks[0].ClientConfig.CABundle) {
		t.Fatalf("webhook %s has no CA bundle", hook.Name)
	}
	// served is the serial of the certificate sample-api serves, verified
	// against the bundle.
	served := func(ctx context.Context) (string, error) {
		addr, err := backend(ctx)
		if err != nil {
			return "", err
		}
		conn, err := (&tls.Dialer{Config: &tls.Config{RootCAs: roots, ServerName: "sample-api." + e.ns + ".svc", MinVersion: tls.VersionTLS12}}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return "", err
		}
		defer conn.Close()
		return conn.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
	}
	var first string
	testenv.WaitFor(ctx, t, "sample-api serving TLS", func(ctx context.Context) (bool, string, error) {
		var err error
		first, err = served(ctx)
		return err == nil, "", err
	})

	svc, err := e.env.Kube.CoreV1().Services(e.ns).Get(ctx, "sample-api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// impostor, once set, is where the ClusterIP leads instead.
	var impostor atomic.Value
	forward(t, svc.Spec.ClusterIP, func() string {
		if addr, ok := impostor.Load().(string); ok {
			return addr
		}
		addr, _ := backend(ctx)
		return addr
	})

	widgets := e.env.Dynamic.Resource(schema.GroupVersionResource{Group: generate.SampleGroup, Version: "v1alpha1", Resource: "widgets"}).Namespace(e.ns)
	widget := func(name string, size int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": generate.SampleGroup + "/v1alpha1", "kind": "Widget",
			"metadata": map[string]any{"name": name}, "spec": map[string]any{"size": size},
		}}
	}
	if _, err := widgets.Create(ctx, widget("valid", 3), metav1.CreateOptions{}); err != nil {
		t.Fatalf("a valid Widget was refused: %v", err)
	}
	_, err = widgets.Create(ctx, widget("invalid", -1), metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "spec.size -1 is negative") {
		t.Fatalf("an invalid Widget: %v; want the webhook's refusal", err)
	}

	// Rotation: with renewBefore a second short of the lifetime, the next
	// reconcile renews the serving certificate. sample-api serves the new
	// one once its pod is restarted (the certificate's hash is on its pod
	// template), and the bundle
	// already in the webhook configuration (the CA's) trusts it: no
	// webhook call fails on the way.
	e.update(ctx, t, "sample", func(in *v1alpha1.Installation) {
		in.Spec.CertificateRotation = &v1alpha1.CertificateRotation{Server: &v1alpha1.CertificateConfig{
			Duration: &metav1.Duration{Duration: 24 * time.Hour}, RenewBefore: &metav1.Duration{Duration: 24*time.Hour - time.Second}}}
	})
	testenv.WaitFor(ctx, t, "sample-api serving a renewed certificate the old bundle trusts", func(ctx context.Context) (bool, string, error) {
		serial, err := served(ctx)
		return err == nil && serial != first, "serial " + serial, err
	})
	// The API server may reuse a connection through the test's ClusterIP
	// bridge to a pod the restart has since stopped: that call ends in EOF
	// (a transport error, not a refused certificate), and a new
	// connection reaches a serving pod. Any other error fails at once.
	for attempt := 1; ; attempt++ {
		_, err := widgets.Create(ctx, widget("after-rotation", 1), metav1.CreateOptions{})
		if err == nil {
			break
		}
		if attempt == 5 || !strings.HasSuffix(err.Error(), ": EOF") {
			t.Fatalf("a valid Widget after the rotation was refused (attempt %d): %v", attempt, err)
		}
		time.Sleep(500 * time.Millisecond)
	}

	// The operator dials the Service too: it presents the generated
	// (renewed) certificate. Then the ClusterIP is pointed at a server
	// with another certificate (a pod that kept an old one): the operator
	// reports the mismatch.
	servedCondition := func(status metav1.ConditionStatus, reason string) *v1alpha1.Installation {
		t.Helper()
		var last *v1alpha1.Installation
		if err := pollInstallation(ctx, e, "sample", func(in *v1alpha1.Installation) bool {
			last = in
			c := in.Condition(v1alpha1.ConditionCertificatesServed)
			return c != nil && c.Status == status && c.Reason == reason
		}); err != nil {
			t.Fatalf("condition %s=%s (%s): %v; last %s", v1alpha1.ConditionCertificatesServed, status, reason, err, describe(last))
		}
		return last
	}
	servedCondition(metav1.ConditionTrue, v1alpha1.ReasonServedCertificatesMatch)
	impostor.Store(impostorTLS(t, "sample-api."+e.ns+".svc"))
	in := servedCondition(metav1.ConditionFalse, v1alpha1.ReasonServedCertificateMismatch)
	if msg := in.Condition(v1alpha1.ConditionCertificatesServed).Message; !strings.Contains(msg, "sample-api") || !strings.Contains(msg, "the Secret holds serial") {
		t.Errorf("mismatch message %q names neither the Service nor the serials", msg)
	}
}

// impostorTLS serves TLS with a certificate of another CA for dnsName and
// returns its address.
func impostorTLS(t *testing.T, dnsName string) string {
	t.Helper()
	ca, err := certs.NewCA("impostor", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p, err := certs.NewServing(ca, []string{dnsName}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(p.Cert, p.Key)
	if err != nil {
		t.Fatal(err)
	}
	return testenv.ServeTLS(t, func() *tls.Certificate { return &pair })
}

// forward serves a Service's loopback ClusterIP, port 443, from the
// address backend returns at each connection, until the test ends (see
// localcluster.ServeClusterIP).
func forward(t *testing.T, clusterIP string, backend func() string) {
	t.Helper()
	c, err := localcluster.ServeClusterIP(clusterIP, 443, backend)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
}
