package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	kubectlwait "k8s.io/kubectl/pkg/cmd/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/installstrategy/installstrategy/examples/kubevirt-operator/kubevirt"
	"github.com/installstrategy/installstrategy/internal/kubevirtdata"
	"github.com/installstrategy/installstrategy/internal/localcluster"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/loader"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/operator"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

var kubevirtsGVR = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "kubevirts"}

// kubeVirtOperator is the example operator (examples/kubevirt-operator,
// the SDK with KubeVirt's own KubeVirt CR) running in the test against
// namespace ns, with the test doing its dump Jobs' work.
type kubeVirtOperator struct {
	env *testenv.Env
	ns  string
	// res is the KubeVirt resource of ns.
	res dynamic.ResourceInterface
}

// startKubeVirtOperator makes namespace kubevirt and KubeVirt's CRD and
// starts the example operator until the test ends, serving
// virt-operator's webhooks as main.go does. The strategies come from dump
// Jobs of virt-operator's images, as virt-operator gets them; kwok runs no
// container, so the test does the dump's work with the real strategies of
// strategyOf (serveKubeVirtDumps), stands in for virt-api's webhooks, and
// forwards kubevirt-operator-webhook's ClusterIP to the operator's webhook
// server (the part of kube-proxy the local cluster lacks), whose pod is
// the kwok pod of config/operator.yaml's Deployment. A nil strategyOf
// leaves the dump Jobs to run for real (on the real node, with change
// placing them there).
func startKubeVirtOperator(ctx context.Context, t *testing.T, env *testenv.Env, defaults operator.Defaults, strategyOf func(testing.TB, string) *strategy.Strategy, change ...func(*operator.Options)) *kubeVirtOperator {
	t.Helper()
	const ns = "kubevirt"
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	env.EnsureKubeVirtCRD(ctx, t)
	keyNS := env.Namespace(ctx, t)

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	skip := true
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: scheme, Logger: testr.NewWithOptions(t, testr.Options{Verbosity: 0}),
		Cache:   cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}, keyNS: {}}},
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: &skip},
	})
	if err != nil {
		t.Fatal(err)
	}
	opts := operator.Options{
		Resource: kubevirt.Resource{Defaults: defaults}, Defaults: defaults, KeyNamespace: keyNS, Metrics: operator.NewMetrics(),
		DumpPodLabels: testenv.BehaviourLabels(testenv.BehaviourAwaitResult),
		// A finished dump is loaded when its Job's watch says so: no
		// test would finish if the operator waited for this poll.
		DumpPollInterval: 30 * time.Minute,
		ProgressInterval: 500 * time.Millisecond, Interval: 200 * time.Millisecond, StageDeadline: 2 * time.Minute,
	}
	for _, c := range change {
		c(&opts)
	}
	r, err := operator.New(mgr, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := (kubevirt.FinalizerRelease{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	applyExampleOperator(ctx, t, env)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hookAddr := ln.Addr().String()
	_ = ln.Close()
	hooks := kubevirt.Webhooks(mgr.GetClient(), mgr.GetAPIReader(), ns)
	hooks.Host, hooks.Port = "127.0.0.1", ln.Addr().(*net.TCPAddr).Port
	if _, err := operator.ServeWebhooks(mgr, hooks); err != nil {
		t.Fatal(err)
	}
	env.ServeWebhookStandIn(ctx, t, ns, "virt-api", "kubevirt-virt-api-certs")
	mctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); bridgeService(mctx, t, env, ns, "kubevirt-operator-webhook", hookAddr) }()
	go func() {
		defer wg.Done()
		if err := mgr.Start(mctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	if strategyOf != nil {
		wg.Add(1)
		go func() { defer wg.Done(); serveKubeVirtDumps(mctx, t, env, ns, strategyOf) }()
	}
	t.Cleanup(func() { stop(); wg.Wait() })
	res := env.Dynamic.Resource(kubevirtsGVR).Namespace(ns)
	// Registered after the operator's stop: runs before it, so that the
	// operator still removes what a failed test left.
	t.Cleanup(func() { kubeVirtGone(context.WithoutCancel(ctx), t, env, res, ns) })
	return &kubeVirtOperator{env: env, ns: ns, res: res}
}

// applyExampleOperator creates the objects of the example's
// config/operator.yaml (its Deployment, service account and binding),
// removed when the test ends.
func applyExampleOperator(ctx context.Context, t *testing.T, env *testenv.Env) {
	t.Helper()
	b, err := os.ReadFile("../../examples/kubevirt-operator/config/operator.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.WithoutCancel(ctx), u) })
	}
}

// bridgeService forwards Service ns/name's ClusterIP, port 443, to addr
// once the Service exists, until ctx ends (what kube-proxy does for the
// Service's pods; hack/servicebridge in the README).
func bridgeService(ctx context.Context, t *testing.T, env *testenv.Env, ns, name, addr string) {
	var ip string
	if err := testenv.Poll(ctx, "Service "+ns+"/"+name, func(ctx context.Context) (bool, string, error) {
		svc, err := env.Kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		ip = svc.Spec.ClusterIP
		return true, "", nil
	}); err != nil {
		return // the test ended before the strategy made the Service
	}
	fwd, err := localcluster.ServeClusterIP(ip, 443, func() string { return addr })
	if err != nil {
		t.Errorf("bridge %s/%s: %v", ns, name, err)
		return
	}
	<-ctx.Done()
	_ = fwd.Close()
}

// create creates the KubeVirt CR kubevirt with spec.
func (k *kubeVirtOperator) create(ctx context.Context, t *testing.T, spec map[string]any) {
	t.Helper()
	cr := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
		"metadata": map[string]any{"name": "kubevirt"}, "spec": spec}}
	if _, err := k.res.Create(ctx, cr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// setImageTag changes the CR's spec.imageTag, as a user upgrades.
func (k *kubeVirtOperator) setImageTag(ctx context.Context, t *testing.T, version string) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"imageTag":%q}}`, version)
	if _, err := k.res.Patch(ctx, "kubevirt", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// kubectlWait runs kubectl's own wait (k8s.io/kubectl's flags, options
// and wait loop, as the kubectl binary runs them, without its exit on
// error) against the test cluster, e.g. `kv/kubevirt -n kubevirt --for
// condition=Available`.
func kubectlWait(ctx context.Context, t *testing.T, args ...string) error {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(true)
	kubeconfig, cacheDir := os.Getenv(testenv.KubeconfigEnv), t.TempDir()
	flags.KubeConfig, flags.CacheDir = &kubeconfig, &cacheDir
	var out bytes.Buffer
	wait := kubectlwait.NewWaitFlags(flags, genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	cmd := &cobra.Command{Use: "wait", SilenceUsage: true, SilenceErrors: true, RunE: func(cmd *cobra.Command, args []string) error {
		o, err := wait.ToOptions(args)
		if err != nil {
			return err
		}
		return o.RunWaitContext(cmd.Context())
	}}
	wait.AddFlags(cmd)
	flags.AddFlags(cmd.Flags())
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	t.Logf("kubectl wait %s: %s", strings.Join(args, " "), out.String())
	return err
}

// waitVersion waits, with kubectl wait, until the KubeVirt reports version
// observed and Available, and returns its status.
func (k *kubeVirtOperator) waitVersion(ctx context.Context, t *testing.T, version string) map[string]any {
	t.Helper()
	u, err := k.res.Get(ctx, "kubevirt", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The operator has seen the CR's spec as it is now (a status left by
	// virt-operator or by the previous version says nothing of it), and
	// is done with it.
	for _, cond := range []string{fmt.Sprintf("jsonpath={.status.observedGeneration}=%d", u.GetGeneration()), "jsonpath={.status.phase}=Deployed",
		"jsonpath={.status.observedKubeVirtVersion}=" + version, "condition=Available"} {
		if err := kubectlWait(ctx, t, "kv/kubevirt", "-n", k.ns, "--for", cond, "--timeout", "5m"); err != nil {
			t.Fatalf("kubectl wait --for %s: %v", cond, err)
		}
	}
	if u, err = k.res.Get(ctx, "kubevirt", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	st, _, _ := unstructured.NestedMap(u.Object, "status")
	return st
}

// checkStatus checks the status fields virt-operator writes once version
// is deployed.
func checkKubeVirtStatus(t *testing.T, version string, st map[string]any) {
	t.Helper()
	id, _ := st["targetDeploymentID"].(string)
	want := map[string]any{"phase": "Deployed", "observedKubeVirtRegistry": "quay.io/kubevirt", "observedDeploymentID": id, "targetKubeVirtVersion": version,
		"targetKubeVirtRegistry": "quay.io/kubevirt"}
	for k, v := range want {
		if st[k] != v {
			t.Errorf("%s: status.%s = %v, want %v", version, k, st[k], v)
		}
	}
	for c, want := range map[string]string{"Available": "True", "Progressing": "False", "Degraded": "False", "Created": "True"} {
		if got := conditionOf(st, c); got != want {
			t.Errorf("%s: condition %s = %q, want %s", version, c, got, want)
		}
	}
	var dc struct {
		ID      string `json:"id"`
		Version string `json:"kubeVirtVersion"`
	}
	if s, _ := st["observedDeploymentConfig"].(string); json.Unmarshal([]byte(s), &dc) != nil || dc.ID != id || dc.Version != version {
		t.Errorf("%s: observedDeploymentConfig %v", version, st["observedDeploymentConfig"])
	}
}

// kubeVirtGone waits until the KubeVirt CR, virt-api and KubeVirt's CRDs
// are gone (deleting the CR first).
func kubeVirtGone(ctx context.Context, t *testing.T, env *testenv.Env, res dynamic.ResourceInterface, ns string) {
	t.Helper()
	if err := res.Delete(ctx, "kubevirt", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Error(err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	testenv.WaitFor(ctx, t, "the KubeVirt CR, virt-api and KubeVirt's CRDs removed", func(ctx context.Context) (bool, string, error) {
		if _, err := res.Get(ctx, "kubevirt", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, "the CR is still there", nil
		}
		if _, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, "virt-api", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, "virt-api is still there", nil
		}
		// virt-operator deletes KubeVirt's CRDs with the CR: none is left
		// behind, labelled as this KubeVirt's, for the next install to
		// trip on.
		_, err := env.Dynamic.Resource(crds).Get(ctx, "virtualmachineinstances.kubevirt.io", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprintf("crd virtualmachineinstances.kubevirt.io: %v", err), nil
	})
}

// TestExampleKubeVirtOperator is issue #26: the example operator installs
// KubeVirt v1.8.4 from a KubeVirt CR (`kubectl wait --for
// condition=Available` returns), reports the status fields virt-operator
// writes (deployment ID virt-operator's), upgrades to v1.9.0 when the CR's
// imageTag changes, rolls back to v1.8.4 the same way, and removes KubeVirt
// with its CRDs when the CR is deleted.
func TestExampleKubeVirtOperator(t *testing.T) {
	testenv.Lock(t, testenv.KubeVirtLock)
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	k := startKubeVirtOperator(ctx, t, env, operator.Defaults{}, testenv.KubeVirtStrategyAsShipped)
	k.create(ctx, t, map[string]any{"imageTag": "v1.8.4", "uninstallStrategy": "RemoveWorkloads"})
	for _, version := range []string{"v1.8.4", "v1.9.0", "v1.8.4"} {
		k.setImageTag(ctx, t, version)
		st := k.waitVersion(ctx, t, version)
		checkKubeVirtStatus(t, version, st)
		if id := st["targetDeploymentID"]; id == kubevirtdata.ID(t, version) {
			// virt-operator hashes uninstallStrategy too: the testdata's
			// identifiers are of an empty spec.
			t.Errorf("%s: deployment ID %s is that of an empty spec", version, id)
		}
		d, err := env.Kube.AppsV1().Deployments(k.ns).Get(ctx, "virt-api", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: virt-api: %v", version, err)
		}
		if img := d.Spec.Template.Spec.Containers[0].Image; !strings.HasSuffix(img, ":"+version) {
			t.Errorf("%s: virt-api runs %s", version, img)
		}
	}
	kubeVirtGone(ctx, t, env, k.res, k.ns)
}

// TestExampleKubeVirtOperatorTakesOverVirtOperator: KubeVirt v1.8.4 as
// virt-operator left it (its objects, field managers, pod templates and
// the KubeVirt CR's status), virt-operator gone, the example operator
// started: it takes KubeVirt over without replacing a Deployment's pod or
// recreating an object, then upgrades it to v1.9.0 when the CR asks.
func TestExampleKubeVirtOperatorTakesOverVirtOperator(t *testing.T) {
	testenv.Lock(t, testenv.KubeVirtLock)
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	s := testenv.KubeVirtStrategyAsShipped(t, "v1.8.4")
	env.EnsureKubeVirtCRD(ctx, t)
	created := env.CreateAsVirtOperator(ctx, t, s)
	uids := map[string]types.UID{}
	for _, o := range created {
		uids[strategy.RefOf(o).String()] = o.GetUID()
	}
	pods := env.PodUIDs(ctx, t, "kubevirt")
	// virt-operator's pod answers its own webhooks (virt-operator-validator,
	// failurePolicy Fail as shipped) with its certificate until it stops:
	// a stand-in plays it, closed when the example takes over.
	virtOperator := env.ServeWebhookStandIn(ctx, t, "kubevirt", "kubevirt-operator-webhook", "kubevirt-operator-certs")
	// The CR as virt-operator v1.8.4 leaves it: spec {}, deployed. (Its
	// create is refused until the stand-in listens.)
	res := env.Dynamic.Resource(kubevirtsGVR).Namespace("kubevirt")
	var cr *unstructured.Unstructured
	testenv.WaitFor(ctx, t, "the KubeVirt CR created through virt-operator's webhook", func(ctx context.Context) (bool, string, error) {
		var err error
		cr, err = res.Create(ctx, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
			"metadata": map[string]any{"name": "kubevirt"}, "spec": map[string]any{}}}, metav1.CreateOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
	if virtOperator.Reviews.Load() == 0 {
		t.Fatal("virt-operator's stand-in answered no review: the CR was created without its webhook")
	}
	now := metav1.Now().UTC().Format(time.RFC3339)
	cond := func(typ, status, reason string) map[string]any {
		return map[string]any{"type": typ, "status": status, "reason": reason, "message": reason, "lastProbeTime": now, "lastTransitionTime": now}
	}
	cr.Object["status"] = map[string]any{"phase": "Deployed", "operatorVersion": "v1.8.4",
		"observedKubeVirtVersion": "v1.8.4", "observedKubeVirtRegistry": "quay.io/kubevirt", "observedDeploymentID": s.Identity.Identifier,
		"targetKubeVirtVersion": "v1.8.4", "targetKubeVirtRegistry": "quay.io/kubevirt", "targetDeploymentID": s.Identity.Identifier,
		"conditions": []any{cond("Available", "True", "AllComponentsReady"), cond("Progressing", "False", "AllComponentsReady"),
			cond("Degraded", "False", "AllComponentsReady"), cond("Created", "True", "AllResourcesCreated")}}
	if _, err := res.UpdateStatus(ctx, cr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// spec {} is the operator's own version, as for virt-operator: the
	// example is started as v1.8.4's replacement.
	// virt-operator stops; the example answers its webhooks from now on.
	if err := virtOperator.Close(); err != nil {
		t.Fatal(err)
	}
	k := startKubeVirtOperator(ctx, t, env, operator.Defaults{Version: "v1.8.4"}, testenv.KubeVirtStrategyAsShipped)
	st := k.waitVersion(ctx, t, "v1.8.4")
	checkKubeVirtStatus(t, "v1.8.4", st)
	if st["operatorVersion"] != "v1.8.4" {
		t.Errorf("status.operatorVersion (virt-operator's, not written by the example) = %v, want kept", st["operatorVersion"])
	}
	if id := st["observedDeploymentID"]; id != s.Identity.Identifier {
		t.Errorf("observedDeploymentID %v, want virt-operator's %s", id, s.Identity.Identifier)
	}
	// Taken over: every object of virt-operator's is the same object, the
	// Deployments' pods were not replaced.
	for _, o := range created {
		ref := strategy.RefOf(o)
		m, err := env.Mapper()
		if err != nil {
			t.Fatal(err)
		}
		mapping, err := m.RESTMapping(ref.GroupKind(), o.GroupVersionKind().Version)
		if err != nil {
			t.Fatal(err)
		}
		live, err := env.Dynamic.Resource(mapping.Resource).Namespace(o.GetNamespace()).Get(ctx, o.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s: %v", ref, err)
			continue
		}
		if live.GetUID() != uids[ref.String()] {
			t.Errorf("%s recreated: uid %s → %s", ref, uids[ref.String()], live.GetUID())
		}
	}
	// virt-operator removed a volume the strategy has: virt-handler is
	// rolled (docs/NOTES.md, the takeover's known gaps).
	env.ExpectPodsKept(ctx, t, "kubevirt", pods, "DaemonSet/virt-handler")
	// The upgrade comes from a strategy ConfigMap of v1.9.0 in KubeVirt's
	// own form, unsigned, as virt-operator's dump stores it, named on the
	// CR with its digest pinned (what makes it trusted), not from a dump
	// Job.
	s190 := testenv.KubeVirtStrategyAsShipped(t, "v1.9.0")
	cm, err := codec.Encode(s190, codec.EncodeOptions{Format: codec.FormatKubeVirt, Namespace: "kubevirt"})
	if err != nil {
		t.Fatal(err)
	}
	text, err := s190.Serialize()
	if err != nil {
		t.Fatal(err)
	}
	stored, err := env.Kube.CoreV1().ConfigMaps("kubevirt").Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Kube.CoreV1().ConfigMaps("kubevirt").Delete(context.WithoutCancel(ctx), stored.Name, metav1.DeleteOptions{})
	})
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		metakeys.StrategyConfigMapAnnotation: stored.Name, metakeys.StrategyDigestAnnotation: codec.Digest(text)}},
		"spec": map[string]any{"imageTag": "v1.9.0"}})
	if _, err := k.res.Patch(ctx, "kubevirt", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	checkKubeVirtStatus(t, "v1.9.0", k.waitVersion(ctx, t, "v1.9.0"))
	jobs, err := env.Kube.BatchV1().Jobs("kubevirt").List(ctx, metav1.ListOptions{LabelSelector: metakeys.DumpJobLabel})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs.Items {
		if cfg, err := identity.ParseConfig([]byte(loader.JobConfig(&j))); err == nil && cfg.Version == "v1.9.0" {
			t.Errorf("dump Job %s for v1.9.0: it comes from the stored ConfigMap", j.Name)
		}
	}
	kubeVirtGone(ctx, t, env, k.res, k.ns)
}

func conditionOf(status map[string]any, typ string) string {
	conds, _ := status["conditions"].([]any)
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}

// serveKubeVirtDumps does the work of each dump Job of namespace ns until
// ctx ends: it stores the real strategy of the Job's configuration (the
// version it names, at its identifier), as virt-operator's dump writes it,
// and ends the Job's pod with its digest. strategyOf gives the strategy of
// a version (testenv.KubeVirtStrategy or KubeVirtStrategyAsShipped).
func serveKubeVirtDumps(ctx context.Context, t *testing.T, env *testenv.Env, ns string, strategyOf func(testing.TB, string) *strategy.Strategy) {
	st, err := store.New(env.Kube, store.Options{})
	if err != nil {
		t.Error(err)
		return
	}
	served := map[types.UID]bool{}
	for ctx.Err() == nil {
		time.Sleep(300 * time.Millisecond)
		jobs, err := env.Kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: metakeys.DumpJobLabel})
		if err != nil {
			continue
		}
		for i := range jobs.Items {
			job := &jobs.Items[i]
			if served[job.UID] || loader.JobConfig(job) == "" {
				continue
			}
			cfg, err := identity.ParseConfig([]byte(loader.JobConfig(job)))
			if err != nil {
				t.Errorf("dump Job %s: %v", job.Name, err)
				served[job.UID] = true
				continue
			}
			// virt-operator's dump stores the strategy under the
			// identifier of the configuration it was given.
			id, err := cfg.Identity(identity.KubeVirt)
			if err != nil {
				t.Errorf("dump Job %s: %v", job.Name, err)
				served[job.UID] = true
				continue
			}
			s := strategyOf(t, cfg.Version)
			s.Identity = id
			entry, _, err := st.Ensure(ctx, ns, s)
			if err != nil {
				continue
			}
			pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job.Name})
			if err != nil || len(pods.Items) == 0 {
				continue
			}
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{testenv.TerminationMessageAnnotation: entry.Digest}}})
			if _, err := env.Kube.CoreV1().Pods(ns).Patch(ctx, pods.Items[0].Name, types.MergePatchType, patch, metav1.PatchOptions{}); err == nil {
				served[job.UID] = true
			}
		}
	}
}
