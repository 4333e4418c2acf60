package engine_test

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/apply/applytest"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// A Reconciler reading from the informer cache: an upgrade still waits
// for the new rollout (a cached copy of the previous generation is not
// taken for it), and an idle run of the same strategy writes nothing and
// reads a handful of objects, not one each.
func TestCachedReconcilerUpgradeAndIdleRun(t *testing.T) {
	se := newSampleEnv(t)
	ctx := t.Context()
	cfg, rec := applytest.Record(se.env.Config)
	live := applytest.StartCache(t, cfg)
	base, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rc := base.WithCache(live)
	run := func(version string, observed string) *engine.Result {
		t.Helper()
		s := sample(t, se.ns, version)
		opts := se.options(t)
		if observed != "" {
			opts.Observed = sample(t, se.ns, observed).Identity
		}
		res, err := rc.Run(ctx, s, opts)
		assertRolledOver(t, se, res, err)
		return res
	}
	run("v1.0.0", "")
	rec.Reset()
	upgrade := run("v1.1.0", "v1.0.0")
	// The rollout's health checks read the workloads' status from the
	// cache (their controllers' status writes included), not the API
	// server: only a check that comes before the informer has stored the
	// write goes there (6 reads when a copy was trusted only at the
	// version written; 1 here on a quiet machine).
	var workloadReads []string
	for _, r := range rec.Reads() {
		if strings.Contains(r.Path, "/deployments/") || strings.Contains(r.Path, "/daemonsets/") {
			workloadReads = append(workloadReads, r.Path)
		}
	}
	// The result keeps what happened to each object, not a second copy
	// of the objects.
	for _, res := range upgrade.Applied {
		if res.Object != nil {
			t.Errorf("the upgrade's result holds the object %s", res.Ref)
		}
	}
	t.Logf("upgrade: %d objects, workloads read one by one: %v", len(upgrade.Applied), workloadReads)
	if len(workloadReads) > 4 {
		t.Errorf("upgrade read workloads one by one %d times, want at most 4: %v", len(workloadReads), workloadReads)
	}
	// The cache has seen every object by now; an idle run of the same
	// strategy reads from it.
	rec.Reset()
	res := run("v1.1.0", "v1.1.0")
	if n := res.Count(apply.ActionUnchanged); n != len(res.Applied) {
		t.Errorf("idle run: %d of %d objects unchanged", n, len(res.Applied))
	}
	writes, reads := rec.Writes(), rec.Reads()
	t.Logf("idle run of %d objects: %d writes, %d reads: %v", len(res.Applied), len(writes), len(reads), reads)
	if len(writes) != 0 {
		t.Errorf("idle run wrote: %v", writes)
	}
	// Discovery (2), the inventory, and the namespaces merged into (not
	// the installation's, so not cached) are read; objects are not.
	if len(reads) > 6 {
		t.Errorf("idle run made %d reads, want at most 6", len(reads))
	}
}

// stalledInformer is a LaggingCache that also says which versions its
// informer stored, as apply.InformerCache does (the applier trusts a copy
// at or after its own last write): those of the informer below, up to a
// frozen object's frozen copy (resourceVersions of one etcd grow as
// numbers, which this test double relies on). So it behaves as an informer
// that saw the write and then stopped.
type stalledInformer struct {
	*applytest.LaggingCache
	inner *apply.InformerCache
}

func (c stalledInformer) Seen(gvk schema.GroupVersionKind, namespace, name, rv string) bool {
	frozen, ok, err := c.Cached(context.Background(), gvk, namespace, name)
	if err != nil || !ok {
		return false
	}
	at, err1 := strconv.ParseUint(frozen.GetResourceVersion(), 10, 64)
	asked, err2 := strconv.ParseUint(rv, 10, 64)
	return err1 == nil && err2 == nil && asked <= at && c.inner.Seen(gvk, namespace, name, rv)
}

// A cache that stops following a workload in the middle of its rollout
// (an informer whose watch hangs, as seen after an etcd restart): the
// step's wait finds the API server's copy newer than the cached one,
// reads that object from the API server from then on, and the upgrade
// finishes instead of failing at the step's deadline (and again at every
// retry, the cache still frozen).
func TestWaitOutlivesAStaleCache(t *testing.T) {
	se := newSampleEnv(t)
	ctx := t.Context()
	inner := applytest.StartCache(t, se.cfg)
	lag := stalledInformer{applytest.NewLaggingCache(inner), inner}
	base, err := engine.New(se.cfg)
	if err != nil {
		t.Fatal(err)
	}
	rc := base.WithCache(lag)
	v1, v2 := sample(t, se.ns, "v1.0.0"), sample(t, se.ns, "v1.1.0")
	res, err := rc.Run(ctx, v1, se.options(t))
	assertRolledOver(t, se, res, err)

	i := slices.IndexFunc(v2.Objects, func(o *unstructured.Unstructured) bool {
		return o.GetKind() == "Deployment" && o.GetName() == "sample-controller"
	})
	if i < 0 {
		t.Fatal("the sample has no Deployment sample-controller")
	}
	ctl := v2.Objects[i]
	// New pods count as available 4 s after they are ready: the rollout
	// of two replicas (one surge pod at a time) takes 8 s or more, so the
	// cache surely stops while it runs.
	if err := unstructured.SetNestedField(ctl.Object, int64(4), "spec", "minReadySeconds"); err != nil {
		t.Fatal(err)
	}
	// The cache stops at the informer's first copy in which the
	// controller has seen the new generation (mid-rollout), not at the
	// run's first read of it: under load that read can come after the
	// rollout has finished, and then nothing is tested.
	lag.FreezeWhen(ctl, func(u *unstructured.Unstructured) bool {
		seen, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		return u.GetGeneration() >= 2 && seen >= 2
	})
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for watchCtx.Err() == nil && !lag.Frozen(ctl) {
			_, _, _ = lag.Cached(watchCtx, ctl.GroupVersionKind(), ctl.GetNamespace(), ctl.GetName())
			time.Sleep(5 * time.Millisecond)
		}
	}()
	opts := se.options(t)
	opts.Observed = v1.Identity
	opts.StageDeadline = time.Minute
	opts.ConfirmEvery = 2 * time.Second
	var stale []engine.Event
	log := opts.OnEvent
	opts.OnEvent = func(e engine.Event) {
		if e.Type == engine.EventStaleCache {
			stale = append(stale, e)
		}
		log(e)
	}
	res, err = rc.Run(ctx, v2, opts)
	stopWatch()
	<-watched
	frozen, _, _ := lag.Cached(ctx, ctl.GroupVersionKind(), ctl.GetNamespace(), ctl.GetName())
	if !lag.Frozen(ctl) || frozen.GetGeneration() < 2 {
		t.Fatal("the cache never held the controller's new generation: nothing was tested")
	}
	av, _, _ := unstructured.NestedInt64(frozen.Object, "status", "availableReplicas")
	up, _, _ := unstructured.NestedInt64(frozen.Object, "status", "updatedReplicas")
	if av >= 2 && up >= 2 {
		t.Fatalf("the cache stopped at a copy already rolled out (%d updated, %d available): nothing was tested", up, av)
	}
	assertRolledOver(t, se, res, err)
	if len(stale) != 1 || stale[0].Ref != strategy.RefOf(ctl) || !strings.Contains(stale[0].Reason, "read from the API server") {
		t.Errorf("stale-cache events %+v, want one for %s", stale, strategy.RefOf(ctl))
	}
	// Found behind, the cache is not trusted by the decisions of the next
	// run either: a change by someone else that the stopped cache does not
	// show is repaired.
	const edited = "registry.example/someone/else:latest"
	patch := `{"spec":{"template":{"spec":{"containers":[{"name":"sample-controller","image":"` + edited + `"}]}}}}`
	deployments := se.env.Kube.AppsV1().Deployments(se.ns)
	if _, err := deployments.Patch(ctx, ctl.GetName(), types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "someone-else"}); err != nil {
		t.Fatal(err)
	}
	res, err = rc.Run(ctx, v2, opts)
	assertRolledOver(t, se, res, err)
	live, err := deployments.Get(ctx, ctl.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if img := live.Spec.Template.Spec.Containers[0].Image; img == edited {
		t.Errorf("%s still runs %s: judged unchanged from the cache found behind", strategy.RefOf(ctl), img)
	}
}

// A wait checks an unchanged cached copy against the API server, but an
// applier without a cache (the plugin's) reads the API server at every
// poll already: its waits send no second read.
func TestConfirmingOnlyWithACache(t *testing.T) {
	se := newSampleEnv(t)
	ctx := t.Context()
	cfg, rec := applytest.Record(se.cfg)
	base, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := sample(t, se.ns, "v1.0.0")
	opts := se.options(t)
	opts.ConfirmEvery = time.Nanosecond
	i := slices.IndexFunc(s.Objects, func(o *unstructured.Unstructured) bool { return o.GetKind() == "Deployment" })
	obj := s.Objects[i].DeepCopy()
	obj.SetResourceVersion("1")
	same := func(context.Context, *unstructured.Unstructured) (*unstructured.Unstructured, error) { return obj, nil }
	reads := func(rc *engine.Reconciler) int {
		t.Helper()
		get, err := engine.ConfirmingGetter(ctx, rc, s, opts, same)
		if err != nil {
			t.Fatal(err)
		}
		rec.Reset()
		for range 3 {
			time.Sleep(time.Millisecond)
			if _, err := get(ctx, obj); err != nil {
				t.Fatal(err)
			}
		}
		n := 0
		for _, r := range rec.Reads() {
			if strings.HasSuffix(r.Path, "/"+obj.GetName()) {
				n++
			}
		}
		return n
	}
	if n := reads(base); n != 0 {
		t.Errorf("without a cache: %d reads of %s, want 0", n, obj.GetName())
	}
	if n := reads(base.WithCache(applytest.StartCache(t, cfg))); n == 0 {
		t.Errorf("with a cache: no read of %s: an unchanged copy was never confirmed", obj.GetName())
	}
}

// failingPatches is a transport that answers the next n PATCH requests
// (server-side applies) with 503, as the API server does while etcd
// restarts, and passes every other request on.
type failingPatches struct {
	next http.RoundTripper
	n    *atomic.Int32
}

func (f failingPatches) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPatch && f.n.Add(-1) >= 0 {
		body := `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"ServiceUnavailable","code":503,"message":"injected: etcd is restarting"}`
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{"Content-Type": []string{"application/json"}},
			Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
	}
	return f.next.RoundTrip(req)
}

// An informer that stopped following the cluster after it saw the
// applier's own last write (its watch hung after an etcd restart) shows
// later changes by others as absent: the cached copy equals the strategy's
// object and the object would be judged unchanged. Once the API server has
// failed a request as it does while etcd restarts, decisions read the API
// server instead (apply.DistrustFor), and the change is repaired.
func TestDecisionsAfterServerTroubleReadTheAPIServer(t *testing.T) {
	se := newSampleEnv(t)
	ctx := t.Context()
	inner := applytest.StartCache(t, se.cfg)
	lag := stalledInformer{applytest.NewLaggingCache(inner), inner}
	failures := new(atomic.Int32)
	cfg := rest.CopyConfig(se.cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return failingPatches{next: rt, n: failures} }
	base, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rc := base.WithCache(lag)
	v1 := sample(t, se.ns, "v1.0.0")
	res, err := rc.Run(ctx, v1, se.options(t))
	assertRolledOver(t, se, res, err)

	find := func(kind, name string) *unstructured.Unstructured {
		t.Helper()
		i := slices.IndexFunc(v1.Objects, func(o *unstructured.Unstructured) bool {
			return o.GetKind() == kind && (name == "" || o.GetName() == name)
		})
		if i < 0 {
			t.Fatalf("the sample has no %s %s", kind, name)
		}
		return v1.Objects[i]
	}
	ctl := find("Deployment", "sample-controller")
	sa := find("ServiceAccount", "")
	deployments := se.env.Kube.AppsV1().Deployments(se.ns)
	// The cache stops at the controller as the run left it; someone then
	// changes its image, and a label of a ServiceAccount (the cache sees
	// that one: the next run rewrites it, in an earlier step).
	lag.Freeze(ctx, t, ctl)
	const edited = "registry.example/someone/else:latest"
	patch := `{"spec":{"template":{"spec":{"containers":[{"name":"sample-controller","image":"` + edited + `"}]}}}}`
	if _, err := deployments.Patch(ctx, ctl.GetName(), types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "someone-else"}); err != nil {
		t.Fatal(err)
	}
	labels := `{"metadata":{"labels":{"app.kubernetes.io/part-of":"someone-else"}}}`
	if _, err := se.env.Kube.CoreV1().ServiceAccounts(sa.GetNamespace()).Patch(ctx, sa.GetName(), types.MergePatchType, []byte(labels), metav1.PatchOptions{FieldManager: "someone-else"}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(ctx, t, "the cache to see the ServiceAccount's change", func(ctx context.Context) (bool, string, error) {
		got, ok, err := lag.Cached(ctx, sa.GroupVersionKind(), sa.GetNamespace(), sa.GetName())
		return err == nil && ok && got.GetLabels()["app.kubernetes.io/part-of"] == "someone-else", "", err
	})
	// The ServiceAccount's rewrite fails once with 503 (and is retried).
	failures.Store(1)
	res, err = rc.Run(ctx, v1, se.options(t))
	assertRolledOver(t, se, res, err)
	if n := failures.Load(); n >= 0 {
		t.Fatal("no write failed: nothing was tested")
	}
	if !lag.Frozen(ctl) {
		t.Fatal("the cache did not stop at the controller: nothing was tested")
	}
	live, err := deployments.Get(ctx, ctl.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if img := live.Spec.Template.Spec.Containers[0].Image; img == edited {
		t.Errorf("%s still runs %s: judged unchanged from the stopped cache after the API server failed a request (%d objects unchanged)",
			strategy.RefOf(ctl), img, res.Count(apply.ActionUnchanged))
	}
}

// With the informer cache, a rollout's waits check again when the cache
// stores a change (a CRD established, a workload's status written by its
// controller), not at their next interval: with an interval of an hour the
// sample product installs and upgrades well within the test's minutes.
func TestCachedWaitsWakeOnChanges(t *testing.T) {
	se := newSampleEnv(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	base, err := engine.New(se.cfg)
	if err != nil {
		t.Fatal(err)
	}
	rc := base.WithCache(applytest.StartCache(t, se.cfg))
	for _, step := range []struct{ version, observed string }{{"v1.0.0", ""}, {"v1.1.0", "v1.0.0"}} {
		opts := se.options(t)
		opts.Interval = time.Hour
		if step.observed != "" {
			opts.Observed = sample(t, se.ns, step.observed).Identity
		}
		res, err := rc.Run(ctx, sample(t, se.ns, step.version), opts)
		if ctx.Err() != nil {
			t.Fatalf("%s: the waits did not wake on the cache's changes (the interval is an hour): %v", step.version, err)
		}
		assertRolledOver(t, se, res, err)
	}
}
