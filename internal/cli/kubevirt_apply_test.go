package cli

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/internal/kubevirtdata"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

var summaryRE = regexp.MustCompile(`summary: (\d+) created, (\d+) updated, (\d+) recreated, (\d+) unchanged, (\d+) skipped, (\d+) conflicts, (\d+) pruned(, (\d+) kept)?`)

func summaryCounts(t *testing.T, out string) map[string]int {
	t.Helper()
	m := summaryRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no summary in:\n%s", out)
	}
	n := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
	return map[string]int{"created": n(1), "updated": n(2), "recreated": n(3), "unchanged": n(4), "skipped": n(5), "conflicts": n(6), "pruned": n(7), "kept": n(9)}
}

// TestClusterApplyKubeVirtReleases applies the real KubeVirt v1.8.4 strategy
// with the plugin, upgrades to v1.9.0 (the virt-template component's 37
// objects arrive, OpenShift kinds are skipped, plan then has nothing to do),
// and goes back to v1.8.4: exactly those objects are pruned, their three CRDs
// kept without --prune-crds.
func TestClusterApplyKubeVirtReleases(t *testing.T) {
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	owner := inventory.Owner{Namespace: "kubevirt", Name: "kubevirt-cli-test"}
	kubevirtPrerequisites(ctx, t, env, owner)
	serveVirtAPI(ctx, t, env)
	args := func(a ...string) []string {
		a = append(a, "--kubeconfig", kubeconfigPath(), "-n", "kubevirt", "--name", owner.Name)
		if a[0] == "apply" {
			a = append(a, "--timeout", "5m")
		}
		return a
	}
	v184, v190 := kubevirtdata.Path(t, "v1.8.4", "configmap.yaml"), kubevirtdata.Path(t, "v1.9.0", "configmap.yaml")

	code, out, errOut := run(t, nil, args("apply", v184, "--wait")...)
	if code != 0 {
		t.Fatalf("apply v1.8.4: exit %d\n%s\n%s", code, tail(out), errOut)
	}
	c := summaryCounts(t, out)
	// 208 objects: the 3 OpenShift ones (2 SCCs, 1 Route) are skipped.
	if c["created"] != 205 || c["skipped"] != 3 || c["conflicts"] != 0 {
		t.Fatalf("apply v1.8.4: %v\n%s", c, tail(out))
	}
	for _, w := range []string{"skip SecurityContextConstraints.security.openshift.io/", "skip Route.route.openshift.io/kubevirt/"} {
		if !strings.Contains(out, w) {
			t.Errorf("apply v1.8.4 does not report %q", w)
		}
	}

	code, out, errOut = run(t, nil, args("apply", v190)...)
	if code != 0 {
		t.Fatalf("apply v1.9.0: exit %d\n%s\n%s", code, tail(out), errOut)
	}
	c = summaryCounts(t, out)
	if c["created"] != 37 || c["skipped"] != 3 || c["pruned"] != 0 || c["conflicts"] != 0 {
		t.Fatalf("apply v1.9.0: %v, want the 37 virt-template objects created\n%s", c, tail(out))
	}
	code, out, errOut = run(t, nil, args("plan", "--strategy", v190)...)
	if code != 0 {
		t.Fatalf("plan after apply v1.9.0: exit %d, want 0\n%s\n%s", code, tail(out), errOut)
	}

	code, out, errOut = run(t, nil, args("apply", v184)...)
	if code != 0 {
		t.Fatalf("apply v1.8.4 again: exit %d\n%s\n%s", code, tail(out), errOut)
	}
	c = summaryCounts(t, out)
	if c["pruned"] != 34 || c["kept"] != 3 {
		t.Fatalf("back to v1.8.4: %v, want 34 pruned and the 3 virt-template CRDs kept\n%s", c, tail(out))
	}
	// Exactly what v1.9.0 added over v1.8.4 is gone or kept (CRDs).
	la, err := codec.LoadConfigMap("v1.8.4", readConfigMap(t, "v1.8.4"), codec.DecodeOptions{}, strategy.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lb, err := codec.LoadConfigMap("v1.9.0", readConfigMap(t, "v1.9.0"), codec.DecodeOptions{}, strategy.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	change, err := diffStrategies(la.Strategy, lb.Strategy, "a", "b", true)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, ref := range change.Added {
		want[ref.String()] = true
	}
	got := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		if ref, ok := strings.CutPrefix(line, "  pruned "); ok {
			got[ref] = true
		}
	}
	for ref := range want {
		if !got[ref] && !strings.HasPrefix(ref, "CustomResourceDefinition.") {
			t.Errorf("added in v1.9.0 but not pruned: %s", ref)
		}
	}
	for ref := range got {
		if !want[ref] {
			t.Errorf("pruned, but not added in v1.9.0: %s", ref)
		}
	}
	if len(change.Added) != 37 {
		t.Errorf("v1.9.0 adds %d objects, want 37", len(change.Added))
	}
}

// kubevirtPrerequisites creates what virt-operator's own manifests create
// besides the strategy: the namespace and the priority class every KubeVirt
// pod names; at the end of the test it uninstalls owner's installation
// (which also removes the CA the certificates were signed with) and
// deletes the priority class.
func kubevirtPrerequisites(ctx context.Context, t *testing.T, env *testenv.Env, owner inventory.Owner) {
	t.Helper()
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt-cluster-critical"}, Value: 1000000000}
	if _, err := env.Kube.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if _, err := engine.Uninstall(ctx, env.Config, engine.UninstallOptions{Owner: owner, Wait: true}); err != nil {
			t.Errorf("uninstall: %v", err)
		}
		if _, err := env.Kube.CoreV1().Secrets("kubevirt").Get(ctx, engine.DefaultCASecret, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the CA Secret outlived the uninstall: %v", err)
		}
		// Leave nothing another test could trip over.
		if err := env.Kube.SchedulingV1().PriorityClasses().Delete(ctx, pc.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete priority class: %v", err)
		}
	})
}

func readConfigMap(t *testing.T, version string) *corev1.ConfigMap {
	t.Helper()
	cms, err := codec.ReadConfigMaps(version, kubevirtdata.Read(t, version, "configmap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return cms[0]
}

// serveVirtAPI plays virt-api's part for KubeVirt's admission webhooks (the
// instancetype validators reject every create when nobody answers): as soon
// as the virt-api Service has its (loopback) ClusterIP and the reconciler has
// filled virt-api's TLS Secret, it serves HTTPS there with that certificate
// and allows every review. The API server verifies the certificate against
// the CA bundle the reconciler injected into the webhooks, so this also
// checks the certificates end to end.
func serveVirtAPI(ctx context.Context, t *testing.T, env *testenv.Env) {
	t.Helper()
	srv := &http.Server{Handler: admitAll(nil)}
	started := make(chan error, 1)
	go func() {
		var ip string
		var pair tls.Certificate
		err := testenv.Poll(ctx, "virt-api's Service and certificate", func(ctx context.Context) (bool, string, error) {
			svc, err := env.Kube.CoreV1().Services("kubevirt").Get(ctx, "virt-api", metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			sec, err := env.Kube.CoreV1().Secrets("kubevirt").Get(ctx, "kubevirt-virt-api-certs", metav1.GetOptions{})
			if err != nil || len(sec.Data["tls.crt"]) == 0 {
				return false, "secret not filled yet", nil
			}
			ip = svc.Spec.ClusterIP
			pair, err = tls.X509KeyPair(sec.Data["tls.crt"], sec.Data["tls.key"])
			return err == nil, "", err
		})
		if err != nil {
			started <- err
			return
		}
		ln, err := listenLoopback(ip, pair)
		if err != nil {
			started <- err
			return
		}
		started <- nil
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		select {
		case err := <-started:
			if err != nil {
				t.Errorf("fake virt-api: %v", err)
			}
		default:
		}
	})
}

// admitAll answers admission reviews with "allowed", counting them in
// count when it is not nil.
func admitAll(count *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "not an admission review", http.StatusBadRequest)
			return
		}
		if count != nil {
			count.Add(1)
		}
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(review)
	})
}

// listenLoopback listens with TLS on a Service's ClusterIP, port 443 — only
// a loopback one (the local cluster's service CIDR), never anything else.
func listenLoopback(ip string, pair tls.Certificate) (net.Listener, error) {
	if parsed := net.ParseIP(ip); parsed == nil || !parsed.IsLoopback() {
		return nil, fmt.Errorf("service ClusterIP %s is not loopback; refusing to listen", ip)
	}
	return tls.Listen("tcp", net.JoinHostPort(ip, "443"), &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12})
}

func kubeconfigPath() string { return clusterArgs("")[1] }

func tail(s string) string {
	if len(s) > 3000 {
		return "..." + s[len(s)-3000:]
	}
	return s
}
