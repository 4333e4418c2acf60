package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/installstrategy/installstrategy/examples/kubevirt-operator/kubevirt"
	"github.com/installstrategy/installstrategy/internal/kubevirtdata"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/loader"
	"github.com/installstrategy/installstrategy/pkg/operator"
	"github.com/installstrategy/installstrategy/pkg/store"
)

var kubevirtsGVR = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "kubevirts"}

// TestExampleKubeVirtOperator is issue #26: the example operator
// (examples/kubevirt-operator, the SDK with KubeVirt's own KubeVirt CR)
// installs KubeVirt v1.8.4 from a KubeVirt CR, reports Available and the
// status fields virt-operator writes (deployment ID virt-operator's),
// upgrades to v1.9.0 when the CR's imageTag changes, and removes KubeVirt
// when the CR is deleted. The strategies come from dump Jobs of
// virt-operator's images, as virt-operator gets them; kwok runs no
// container, so the test does the dump's work with the real strategies.
func TestExampleKubeVirtOperator(t *testing.T) {
	testenv.Lock(t, testenv.KubeVirtLock)
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
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
	r, err := operator.New(mgr, operator.Options{
		Resource: kubevirt.Resource{}, KeyNamespace: keyNS, Metrics: operator.NewMetrics(),
		DumpPodLabels:    testenv.BehaviourLabels(testenv.BehaviourAwaitResult),
		ProgressInterval: 500 * time.Millisecond, Interval: 200 * time.Millisecond, StageDeadline: 2 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := mgr.Start(mctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	go func() { defer wg.Done(); serveKubeVirtDumps(mctx, t, env, ns) }()
	defer func() { stop(); wg.Wait() }()

	res := env.Dynamic.Resource(kubevirtsGVR).Namespace(ns)
	cr := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
		"metadata": map[string]any{"name": "kubevirt"}, "spec": map[string]any{"imageTag": "v1.8.4", "uninstallStrategy": "RemoveWorkloads"}}}
	if _, err := res.Create(ctx, cr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = res.Delete(context.Background(), "kubevirt", metav1.DeleteOptions{}) })
	// What `kubectl wait kv/kubevirt --for condition=Available` waits for,
	// with the version.
	waitKubeVirt := func(version string) map[string]any {
		var st map[string]any
		testenv.WaitFor(ctx, t, "KubeVirt "+version+" Available", func(ctx context.Context) (bool, string, error) {
			u, err := res.Get(ctx, "kubevirt", metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			st, _, _ = unstructured.NestedMap(u.Object, "status")
			return st["observedKubeVirtVersion"] == version && st["phase"] == "Deployed" && conditionOf(st, "Available") == "True", fmt.Sprintf("status %v", st), nil
		})
		return st
	}
	for _, version := range []string{"v1.8.4", "v1.9.0"} {
		if version != "v1.8.4" {
			patch := fmt.Sprintf(`{"spec":{"imageTag":%q}}`, version)
			if _, err := res.Patch(ctx, "kubevirt", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		st := waitKubeVirt(version)
		id, _ := st["targetDeploymentID"].(string)
		if want := kubevirtdata.ID(t, version); id == want {
			// virt-operator hashes uninstallStrategy too: the testdata's
			// identifiers are of an empty spec.
			t.Errorf("%s: deployment ID %s is that of an empty spec", version, id)
		}
		want := map[string]any{"observedKubeVirtRegistry": "quay.io/kubevirt", "observedDeploymentID": id, "targetKubeVirtVersion": version,
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
		if _, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, "virt-api", metav1.GetOptions{}); err != nil {
			t.Errorf("%s: virt-api: %v", version, err)
		}
	}

	if err := res.Delete(ctx, "kubevirt", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(ctx, t, "the KubeVirt CR and virt-api removed", func(ctx context.Context) (bool, string, error) {
		_, err := res.Get(ctx, "kubevirt", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false, "the CR is still there", nil
		}
		_, err = env.Kube.AppsV1().Deployments(ns).Get(ctx, "virt-api", metav1.GetOptions{})
		return apierrors.IsNotFound(err), "virt-api is still there", nil
	})
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
// and ends the Job's pod with its digest.
func serveKubeVirtDumps(ctx context.Context, t *testing.T, env *testenv.Env, ns string) {
	st, err := store.New(env.Kube, store.Options{})
	if err != nil {
		t.Error(err)
		return
	}
	served := map[string]bool{}
	for ctx.Err() == nil {
		time.Sleep(300 * time.Millisecond)
		jobs, err := env.Kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: loader.DumpJobLabel})
		if err != nil {
			continue
		}
		for i := range jobs.Items {
			job := &jobs.Items[i]
			if served[job.Name] || loader.JobConfig(job) == "" {
				continue
			}
			cfg, err := identity.ParseConfig([]byte(loader.JobConfig(job)))
			if err != nil {
				t.Errorf("dump Job %s: %v", job.Name, err)
				served[job.Name] = true
				continue
			}
			// virt-operator's dump stores the strategy under the
			// identifier of the configuration it was given.
			id, err := cfg.Identity(identity.KubeVirt)
			if err != nil {
				t.Errorf("dump Job %s: %v", job.Name, err)
				served[job.Name] = true
				continue
			}
			s := testenv.KubeVirtStrategy(t, cfg.Version)
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
				served[job.Name] = true
			}
		}
	}
}
