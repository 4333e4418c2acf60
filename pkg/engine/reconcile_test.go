package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/apply/applytest"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/generate"
	"github.com/installstrategy/installstrategy/pkg/health"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// The sample product has cluster-scoped objects with fixed names (CRDs,
// ClusterRoles, its webhook), so the tests that install it run one at a
// time, across test binaries too (testenv.Lock), and remove those objects
// at the end.

// sampleOwner is the installation of the sample product in a test
// namespace.
func sampleOwner(ns string) inventory.Owner {
	return inventory.Owner{Namespace: ns, Name: "sample-test"}
}

func sample(t *testing.T, ns, version string) *strategy.Strategy {
	t.Helper()
	s, err := generate.Sample(&identity.Config{Namespace: ns, Registry: "registry.example/sample", Version: version}, generate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type sampleEnv struct {
	env *testenv.Env
	ns  string
	rec *applytest.Recorder
	cfg *rest.Config
	run func(s *strategy.Strategy, observed strategy.Identity, opts engine.Options) (*engine.Result, error)
}

func newSampleEnv(t *testing.T) *sampleEnv {
	t.Helper()
	testenv.Lock(t, testenv.SampleProductLock)
	ctx := t.Context()
	env := testenv.New(t)
	ns := env.Namespace(ctx, t)
	cfg, rec := applytest.Record(env.Config)
	se := &sampleEnv{env: env, ns: ns, rec: rec, cfg: env.Config}
	se.run = func(s *strategy.Strategy, observed strategy.Identity, opts engine.Options) (*engine.Result, error) {
		opts = se.withDefaults(t, opts)
		opts.Observed = observed
		return engine.Run(t.Context(), cfg, s, opts)
	}
	t.Cleanup(func() {
		if _, err := engine.Uninstall(context.WithoutCancel(t.Context()), env.Config, engine.UninstallOptions{Owner: sampleOwner(ns), Wait: true}); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return se
}

// withDefaults fills in the test's owner, interval, deadline and event log.
func (se *sampleEnv) withDefaults(t *testing.T, opts engine.Options) engine.Options {
	opts.Owner = sampleOwner(se.ns)
	if opts.Interval == 0 {
		opts.Interval = 200 * time.Millisecond
	}
	if opts.OnEvent == nil {
		opts.OnEvent = func(e engine.Event) { t.Logf("%s %s %s %s %s", e.Type, e.Step, e.Ref, e.Action, e.Reason) }
	}
	if opts.StageDeadline == 0 {
		opts.StageDeadline = time.Minute
	}
	return opts
}

// options are the test's default options.
func (se *sampleEnv) options(t *testing.T) engine.Options {
	return se.withDefaults(t, engine.Options{})
}

// recordedConfig returns a config of the sample's cluster whose writes are
// recorded apart from the runs'.
func recordedConfig(se *sampleEnv) (*rest.Config, *applytest.Recorder) {
	return applytest.Record(se.cfg)
}

// firstWrite returns the index of the first recorded write whose path holds
// suffix as whole path segments, -1 when none.
func firstWrite(ws []applytest.Write, suffix string) int {
	return slices.IndexFunc(ws, func(w applytest.Write) bool { return strings.Contains(w.Path+"/", suffix+"/") })
}

func assertOrder(t *testing.T, ws []applytest.Write, suffixes ...string) {
	t.Helper()
	prev := -1
	for _, s := range suffixes {
		i := firstWrite(ws, s)
		if i < 0 {
			t.Errorf("no write of %s", s)
			continue
		}
		if i < prev {
			t.Errorf("write of %s (#%d) came before the previous one in %v (#%d)", s, i, suffixes, prev)
		}
		prev = i
	}
}

func assertRolledOver(t *testing.T, se *sampleEnv, res *engine.Result, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if !res.RolledOver {
		t.Fatalf("not rolled over: %+v", res)
	}
	// Run waited for readiness; here every pod of the product must run the
	// target identity. (Readiness is not checked again: under load kwok
	// nodes miss heartbeats and their pods are marked unready after the
	// fact.)
	pods, err := se.env.Kube.CoreV1().Pods(se.ns).List(t.Context(), metav1.ListOptions{LabelSelector: metakeys.AppPartOfLabel + "=" + generate.SampleProduct})
	if err != nil {
		t.Fatal(err)
	}
	running := 0
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		running++
		if !health.PodCarriesIdentity(p, res.Plan.Target) {
			t.Errorf("pod %s runs %s, want %s", p.Name, p.Annotations[metakeys.InstallStrategyVersionAnnotation], res.Plan.Target.Version)
		}
	}
	if running == 0 {
		t.Error("no pods")
	}
}

func gvr(kind string) schema.GroupVersionResource {
	for _, info := range kinds.All() {
		if info.GroupKind.Kind == kind {
			return info.GroupKind.WithVersion(info.Version).GroupVersion().WithResource(info.Resource)
		}
	}
	panic("unknown kind " + kind)
}

func TestSampleInstallUpgradeRollback(t *testing.T) {
	se := newSampleEnv(t)
	ctx := t.Context()
	ns := se.ns
	v1, v2 := sample(t, ns, "v1.0.0"), sample(t, ns, "v1.1.0")

	// Fresh install: the create path.
	res, err := se.run(v1, strategy.Identity{}, engine.Options{})
	assertRolledOver(t, se, res, err)
	ws := se.rec.Writes()
	assertOrder(t, ws, "/customresourcedefinitions", "/clusterroles", "/configmaps/sample-config", "/services",
		"/deployments/sample-api", "/deployments/sample-controller", "/daemonsets/sample-handler", "/validatingwebhookconfigurations")
	sec, err := se.env.Kube.CoreV1().Secrets(ns).Get(ctx, "sample-api-certs", metav1.GetOptions{})
	if err != nil || len(sec.Data["tls.crt"]) == 0 || len(sec.Data["tls.key"]) == 0 {
		t.Errorf("tls secret not filled: %v %v", err, sec)
	}
	wh, err := se.env.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "sample-api-validator", metav1.GetOptions{})
	if err != nil || len(wh.Webhooks) == 0 || len(wh.Webhooks[0].ClientConfig.CABundle) == 0 {
		t.Errorf("webhook CA bundle not injected: %v", err)
	}

	// A resync writes nothing.
	se.rec.Reset()
	res, err = se.run(v1, v1.Identity, engine.Options{})
	assertRolledOver(t, se, res, err)
	if w := se.rec.Writes(); len(w) != 0 {
		t.Errorf("no-op resync wrote %d times: %v", len(w), w)
	}
	// Every strategy object, and the namespace they live in.
	if n := res.Count(apply.ActionUnchanged); n != len(v1.Objects)+1 || len(res.Applied) != n {
		t.Errorf("%d of %d objects unchanged", n, len(v1.Objects)+1)
	}

	// Upgrade: the update path, canary on the DaemonSet, prune.
	se.rec.Reset()
	seq := watchMaxUnavailable(t, se.env, ns, "sample-handler")
	res, err = se.run(v2, v1.Identity, engine.Options{})
	assertRolledOver(t, se, res, err)
	ws = se.rec.Writes()
	assertOrder(t, ws, "/daemonsets/sample-handler", "/deployments/sample-controller", "/deployments/sample-api", "/validatingwebhookconfigurations")
	if got := seq(); !slices.Equal(got, []string{"1", "10%", "1"}) {
		t.Errorf("maxUnavailable sequence %v, want [1 10%% 1]", got)
	}
	if _, err := se.env.Kube.CoreV1().Services(ns).Get(ctx, "sample-controller-metrics", metav1.GetOptions{}); err != nil {
		t.Errorf("added service: %v", err)
	}
	if _, err := se.env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "sample-legacy-settings", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("removed configmap not pruned: %v", err)
	}
	if !slices.ContainsFunc(res.Pruned, func(r strategy.ObjectRef) bool { return r.Name == "sample-legacy-settings" }) || len(res.Pruned) != 1 {
		t.Errorf("pruned %v", res.Pruned)
	}

	// Rollback: the create path again.
	se.rec.Reset()
	res, err = se.run(v1, v2.Identity, engine.Options{})
	assertRolledOver(t, se, res, err)
	ws = se.rec.Writes()
	assertOrder(t, ws, "/deployments/sample-api", "/deployments/sample-controller", "/daemonsets/sample-handler")
	if _, err := se.env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "sample-legacy-settings", metav1.GetOptions{}); err != nil {
		t.Errorf("configmap after rollback: %v", err)
	}
	if _, err := se.env.Kube.CoreV1().Services(ns).Get(ctx, "sample-controller-metrics", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("service of v2 not pruned on rollback: %v", err)
	}
}

// watchMaxUnavailable records the distinct successive maxUnavailable values
// of a DaemonSet until the returned function is called.
func watchMaxUnavailable(t *testing.T, env *testenv.Env, ns, name string) func() []string {
	ctx, cancel := context.WithCancel(t.Context())
	w, err := env.Kube.AppsV1().DaemonSets(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu  sync.Mutex
		seq []string
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			ds, ok := ev.Object.(*appsv1.DaemonSet)
			if !ok || ds.Spec.UpdateStrategy.RollingUpdate == nil || ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable == nil {
				continue
			}
			v := ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable.String()
			mu.Lock()
			if len(seq) == 0 || seq[len(seq)-1] != v {
				seq = append(seq, v)
			}
			mu.Unlock()
		}
	}()
	return func() []string {
		cancel()
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seq)
	}
}

func TestCanaryCrashLoopStopsRollout(t *testing.T) {
	se := newSampleEnv(t)
	ctx := t.Context()
	ns := se.ns
	v1, v2 := sample(t, ns, "v1.0.0"), sample(t, ns, "v1.1.0")
	res, err := se.run(v1, strategy.Identity{}, engine.Options{})
	assertRolledOver(t, se, res, err)

	// v2's handler pods crash-loop.
	for _, o := range v2.Objects {
		if o.GetKind() == "DaemonSet" {
			labels, _, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels")
			for k, v := range testenv.BehaviourLabels(testenv.BehaviourCrashLoop) {
				labels[k] = v
			}
			_ = unstructured.SetNestedStringMap(o.Object, labels, "spec", "template", "metadata", "labels")
		}
	}
	res, err = se.run(v2, v1.Identity, engine.Options{})
	var deg *health.DegradedError
	var step *engine.StepError
	var canary *engine.CanaryError
	if !errors.As(err, &deg) || deg.Reason != health.ReasonFailed || !errors.As(err, &step) || step.Step != "workloads/handler" {
		t.Fatalf("run: %v", err)
	}
	if !errors.As(err, &canary) || canary.DaemonSet.Name != "sample-handler" {
		t.Errorf("run: %v is not a CanaryError of sample-handler", err)
	}
	if res.RolledOver {
		t.Error("rolled over despite the failed canary")
	}
	t.Log(err)
	evs, err := se.env.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + engine.FailedUpdateReason})
	if err != nil || len(evs.Items) == 0 || evs.Items[0].InvolvedObject.Name != "sample-handler" {
		t.Errorf("no FailedUpdate event: %v %v", err, evs)
	}
	// The rollout stopped: the controllers were not touched, and the
	// DaemonSet was not widened.
	d, _ := se.env.Kube.AppsV1().Deployments(ns).Get(ctx, "sample-controller", metav1.GetOptions{})
	if v := d.Spec.Template.Annotations[metakeys.InstallStrategyVersionAnnotation]; v != "v1.0.0" {
		t.Errorf("sample-controller template at %s", v)
	}
	ds, _ := se.env.Kube.AppsV1().DaemonSets(ns).Get(ctx, "sample-handler", metav1.GetOptions{})
	if mu := ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable.String(); mu != "1" {
		t.Errorf("maxUnavailable %s after a failed canary", mu)
	}
}

func TestDriftIsRepaired(t *testing.T) {
	se := newSampleEnv(t)
	ctx := t.Context()
	ns := se.ns
	v1 := sample(t, ns, "v1.0.0")
	res, err := se.run(v1, strategy.Identity{}, engine.Options{})
	assertRolledOver(t, se, res, err)

	if err := se.env.Kube.RbacV1().ClusterRoles().Delete(ctx, "sample-controller", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	d, err := se.env.Kube.AppsV1().Deployments(ns).Get(ctx, "sample-api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := d.Spec.Template.Spec.Containers[0].Image
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":%q,"image":"evil.example/api:latest"}]}}}}`, d.Spec.Template.Spec.Containers[0].Name)
	if _, err := se.env.Kube.AppsV1().Deployments(ns).Patch(ctx, "sample-api", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err = se.run(v1, v1.Identity, engine.Options{})
	assertRolledOver(t, se, res, err)
	if _, err := se.env.Kube.RbacV1().ClusterRoles().Get(ctx, "sample-controller", metav1.GetOptions{}); err != nil {
		t.Errorf("cluster role not restored: %v", err)
	}
	d, _ = se.env.Kube.AppsV1().Deployments(ns).Get(ctx, "sample-api", metav1.GetOptions{})
	if got := d.Spec.Template.Spec.Containers[0].Image; got != want {
		t.Errorf("image %s, want %s", got, want)
	}
	if res.Count(apply.ActionCreate) != 1 || res.Count(apply.ActionUpdate) != 1 {
		t.Errorf("creates %d updates %d, want 1 and 1", res.Count(apply.ActionCreate), res.Count(apply.ActionUpdate))
	}
}

func TestConflictingObjectIsReportedNotOverwritten(t *testing.T) {
	se := newSampleEnv(t)
	ctx := t.Context()
	ns := se.ns
	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "sample-config", "namespace": ns}, "data": map[string]any{"theirs": "yes"}}
	if _, err := se.env.Dynamic.Resource(gvr("ConfigMap")).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: cm}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := se.run(sample(t, ns, "v1.0.0"), strategy.Identity{}, engine.Options{NoWait: true})
	var conflict *apply.ConflictError
	if !errors.As(err, &conflict) || conflict.Ref.Name != "sample-config" || conflict.ManagedBy != "" {
		t.Fatalf("run: %v", err)
	}
	if res.RolledOver || res.Count(apply.ActionConflict) != 1 {
		t.Errorf("result: rolled over %v, conflicts %d", res.RolledOver, res.Count(apply.ActionConflict))
	}
	live, _ := se.env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "sample-config", metav1.GetOptions{})
	if live.Data["theirs"] != "yes" || live.Labels[metakeys.ManagedByLabel] != "" {
		t.Errorf("conflicting object overwritten: %v %v", live.Labels, live.Data)
	}
}

// A DaemonSet change that leaves the pod template alone (a pure generation
// bump) on the update path does not start a canary: no pod is replaced.
func TestGenerationBumpDoesNotRestartCanary(t *testing.T) {
	se := newSampleEnv(t)
	ctx := t.Context()
	v1 := sample(t, se.ns, "v1.0.0")
	res, err := se.run(v1, strategy.Identity{}, engine.Options{})
	assertRolledOver(t, se, res, err)
	pods := func() []string {
		l, err := se.env.Kube.CoreV1().Pods(se.ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=sample-handler"})
		if err != nil {
			t.Fatal(err)
		}
		var uids []string
		for _, p := range l.Items {
			uids = append(uids, string(p.UID))
		}
		slices.Sort(uids)
		return uids
	}
	before := pods()
	if len(before) == 0 {
		t.Fatal("no handler pods")
	}
	for _, o := range v1.Objects {
		if o.GetKind() == "DaemonSet" {
			_ = unstructured.SetNestedField(o.Object, int64(5), "spec", "minReadySeconds")
		}
	}
	var canary []string
	res, err = se.run(v1, v1.Identity, engine.Options{OnEvent: func(e engine.Event) {
		if e.Type == engine.EventCanary {
			canary = append(canary, e.Reason)
		}
	}})
	assertRolledOver(t, se, res, err)
	ds, _ := se.env.Kube.AppsV1().DaemonSets(se.ns).Get(ctx, "sample-handler", metav1.GetOptions{})
	if ds.Spec.MinReadySeconds != 5 || ds.Generation < 2 {
		t.Errorf("DaemonSet not updated: minReadySeconds %d generation %d", ds.Spec.MinReadySeconds, ds.Generation)
	}
	if len(canary) != 0 {
		t.Errorf("canary started: %v", canary)
	}
	if after := pods(); !slices.Equal(before, after) {
		t.Errorf("handler pods replaced: %v -> %v", before, after)
	}
}

// A workload deleted while its own step waits for it (after its write,
// before it is ready: minReadySeconds keeps the wait going) is applied
// again by that wait, and the run ends rolled over instead of failing at
// the step's deadline with "does not exist" (docs/NOTES.md's gap of
// session 9).
func TestWorkloadDeletedDuringItsWaitIsAppliedAgain(t *testing.T) {
	se := newSampleEnv(t)
	ctx := t.Context()
	s := sample(t, se.ns, "v1.0.0")
	for _, o := range s.Objects {
		if o.GetKind() == "Deployment" && o.GetName() == "sample-controller" {
			_ = unstructured.SetNestedField(o.Object, int64(3), "spec", "minReadySeconds")
		}
	}
	var deleted, reapplied bool
	opts := engine.Options{StageDeadline: 20 * time.Second, OnEvent: func(e engine.Event) {
		t.Logf("%s %s %s %s %s", e.Type, e.Step, e.Ref, e.Action, e.Reason)
		if e.Type != engine.EventApplied || e.Ref.Kind != "Deployment" || e.Ref.Name != "sample-controller" {
			return
		}
		if e.Reason == engine.ReappliedReason {
			reapplied = true
			return
		}
		if !deleted {
			deleted = true
			if err := se.env.Kube.AppsV1().Deployments(se.ns).Delete(ctx, "sample-controller", metav1.DeleteOptions{}); err != nil {
				t.Errorf("delete: %v", err)
			}
		}
	}}
	res, err := se.run(s, strategy.Identity{}, opts)
	assertRolledOver(t, se, res, err)
	if !deleted || !reapplied {
		t.Errorf("deleted %t, applied again %t; want both", deleted, reapplied)
	}
	if _, err := se.env.Kube.AppsV1().Deployments(se.ns).Get(ctx, "sample-controller", metav1.GetOptions{}); err != nil {
		t.Errorf("sample-controller after the run: %v", err)
	}
}
