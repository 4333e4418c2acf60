package apply_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/apply/applytest"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// recordedApplier returns the test's environment, a namespace, and an
// applier whose requests rec records.
func recordedApplier(t *testing.T) (*testenv.Env, string, *apply.Applier, *applytest.Recorder) {
	t.Helper()
	env := testenv.New(t)
	ns := env.Namespace(t.Context(), t)
	cfg, rec := applytest.Record(env.Config)
	a, err := apply.NewForConfig(cfg, apply.Options{Identity: testID, Owner: testOwner})
	if err != nil {
		t.Fatal(err)
	}
	return env, ns, a, rec
}

// An applier with a cache reads the objects it holds from it (no request)
// and decides "unchanged" from them; objects that are not an
// installation's are never cached, so they are read (and refused) live.
func TestCachedReadsAndMisses(t *testing.T) {
	env, ns, a, rec := recordedApplier(t)
	ctx := t.Context()
	cached := a.WithCache(applytest.StartCache(t, env.Config))
	ours := configMap(t, ns, "ours", map[string]string{"k": "v"})
	if _, err := a.Apply(ctx, ours); err != nil {
		t.Fatal(err)
	}
	foreign := configMap(t, ns, "foreign", map[string]string{"k": "v"})
	if _, err := env.Dynamic.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(ns).Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(ctx, t, "the cache holds ours", func(ctx context.Context) (bool, string, error) {
		live, err := cached.Get(ctx, ours)
		return err == nil && live != nil, "", err
	})
	// Without their field managers: no cached read needs them.
	if live, err := cached.Get(ctx, ours); err != nil {
		t.Fatal(err)
	} else if n := len(live.GetManagedFields()); n != 0 {
		t.Errorf("cached copy has %d field managers, want none", n)
	}
	rec.Reset()
	res, err := cached.Apply(ctx, ours)
	if err != nil || res.Action != apply.ActionUnchanged {
		t.Fatalf("apply of an unchanged cached object: %+v, %v", res, err)
	}
	if r := rec.Reads(); len(r) != 0 {
		t.Errorf("apply of an unchanged cached object read %v", r)
	}
	if _, err := cached.Apply(ctx, foreign); err == nil {
		t.Fatal("a foreign object was overwritten through the cache")
	}
	if r := rec.Reads(); len(r) != 1 {
		t.Errorf("apply of a foreign object: reads %v, want its one live GET", r)
	}
	if len(rec.Writes()) != 0 {
		t.Errorf("writes: %v", rec.Writes())
	}
}

// A kind the cache's client may not list never syncs: the read waits at
// most apply.SyncTimeout, then that kind is read from the API server, and
// Get still answers.
func TestCacheThatCannotListFallsBackToTheAPIServer(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	user := "cache-get-only-" + ns
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "get-only", Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}}
	if _, err := env.Kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "get-only", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "get-only"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}}}
	if _, err := env.Kube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a, err := apply.NewForConfig(env.Config, apply.Options{Identity: testID, Owner: testOwner})
	if err != nil {
		t.Fatal(err)
	}
	cm := configMap(t, ns, "cm", map[string]string{"k": "v"})
	if _, err := a.Apply(ctx, cm); err != nil {
		t.Fatal(err)
	}
	limited := rest.CopyConfig(env.Config)
	limited.Impersonate = rest.ImpersonationConfig{UserName: user}
	restore := *apply.SyncTimeout
	*apply.SyncTimeout = 3 * time.Second
	t.Cleanup(func() { *apply.SyncTimeout = restore })
	c := applytest.StartCache(t, limited)
	// The first read waits apply.FirstSyncWait for the informer it starts,
	// not SyncTimeout: the cache cannot answer yet, the API server can.
	if _, ok, err := c.Cached(ctx, cm.GroupVersionKind(), ns, "cm"); ok || !errors.Is(err, apply.ErrNotSynced) {
		t.Fatalf("a cache that may not list ConfigMaps: ok %v, err %v; want ErrNotSynced", ok, err)
	}
	// SyncTimeout after the informer's start the kind is bypassed: no
	// wait, a miss.
	testenv.WaitFor(ctx, t, "ConfigMaps bypassed", func(ctx context.Context) (bool, string, error) {
		_, ok, err := c.Cached(ctx, cm.GroupVersionKind(), ns, "cm")
		if ok {
			return false, "", errors.New("a cache that may not list ConfigMaps answered")
		}
		return err == nil, fmt.Sprint(err), nil
	})
	la, err := apply.NewForConfig(limited, apply.Options{Identity: testID, Owner: testOwner})
	if err != nil {
		t.Fatal(err)
	}
	live, err := la.WithCache(c).Get(ctx, cm)
	if err != nil || live == nil {
		t.Fatalf("get through a cache that cannot list: %v, %v", live, err)
	}
}

// A cache that lags behind the applier's own writes never decides
// "unchanged": going back to the version it still shows (a downgrade right
// after an upgrade) writes it, and an object deleted since is created
// again although the cache still shows it.
func TestCacheBehindOwnWritesIsNotTrusted(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	a, err := apply.NewForConfig(env.Config, apply.Options{Identity: testID, Owner: testOwner})
	if err != nil {
		t.Fatal(err)
	}
	inner := applytest.StartCache(t, env.Config)
	cached := a.WithCache(inner)
	v1 := configMap(t, ns, "cm", map[string]string{"k": "v1"})
	if _, err := cached.Apply(ctx, v1); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(ctx, t, "the cache holds v1", func(ctx context.Context) (bool, string, error) {
		u, ok, err := inner.Cached(ctx, v1.GroupVersionKind(), ns, "cm")
		return ok && u.Object["data"].(map[string]any)["k"] == "v1", "", err
	})
	lag := applytest.NewLaggingCache(inner)
	lag.Freeze(ctx, t, v1)
	cached = a.WithCache(lag)
	data := func() string {
		t.Helper()
		live, err := a.Direct().Get(ctx, v1)
		if err != nil || live == nil {
			t.Fatalf("get: %v, %v", live, err)
		}
		return live.Object["data"].(map[string]any)["k"].(string)
	}
	if res, err := cached.Apply(ctx, configMap(t, ns, "cm", map[string]string{"k": "v2"})); err != nil || res.Action != apply.ActionUpdate {
		t.Fatalf("upgrade: %+v, %v", res, err)
	}
	res, err := cached.Apply(ctx, v1)
	if err != nil || res.Action != apply.ActionUpdate {
		t.Fatalf("downgrade with the cache still at v1: %+v, %v", res, err)
	}
	if got := data(); got != "v1" {
		t.Fatalf("after the downgrade the object holds %q", got)
	}
	live, err := a.Direct().Get(ctx, v1)
	if err != nil {
		t.Fatal(err)
	}
	if err := cached.Delete(ctx, live); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		live, err := a.Direct().Get(ctx, v1)
		return live == nil, err
	}); err != nil {
		t.Fatal(err)
	}
	if res, err := cached.Apply(ctx, v1); err != nil || res.Action != apply.ActionCreate {
		t.Fatalf("apply after a delete the cache has not seen: %+v, %v", res, err)
	}
	if got := data(); got != "v1" {
		t.Fatalf("after the re-create the object holds %q", got)
	}
}

// Probe looks objects up with one list per resource and namespace: their
// writes need no read first, while an object that exists and is not ours
// is still refused. Objects the cache holds are not listed, and
// one it holds as ours is updated from the cached copy, without a read.
func TestProbeAndCachedCopiesSaveReads(t *testing.T) {
	env, ns, a, rec := recordedApplier(t)
	ctx := t.Context()
	c := applytest.StartCache(t, env.Config)
	cached := a.WithCache(c)
	foreign := configMap(t, ns, "foreign", map[string]string{"k": "theirs"})
	if _, err := env.Dynamic.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(ns).Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	version := func(v string) []*unstructured.Unstructured {
		var objs []*unstructured.Unstructured
		for _, name := range []string{"a", "b", "c", "d"} {
			objs = append(objs, configMap(t, ns, name, map[string]string{"k": v}))
		}
		return objs
	}
	objs := append(version("v1"), configMap(t, ns, "foreign", map[string]string{"k": "ours"}))
	// Discovery first, not counted.
	if _, err := a.Mapping(strategy.RefOf(foreign), "v1"); err != nil {
		t.Fatal(err)
	}
	rec.Reset()
	probed := a.Probe(ctx, objs)
	if r := rec.Reads(); len(r) != 1 || !strings.HasSuffix(r[0].Path, "/configmaps") {
		t.Fatalf("probe of 5 ConfigMaps: reads %v, want one list", r)
	}
	rec.Reset()
	// Until its write, an object the list lacked reads as absent, without
	// a request, however often (the certificates read their Secrets
	// before the apply does).
	for range 2 {
		if live, err := probed.Get(ctx, objs[0]); err != nil || live != nil {
			t.Fatalf("read of a probed absent object: %v, %v", live, err)
		}
	}
	for _, o := range objs {
		res, err := probed.Apply(ctx, o)
		switch {
		case o.GetName() == "foreign":
			if err == nil || res.Action != apply.ActionConflict {
				t.Errorf("foreign ConfigMap: %+v, %v; want a conflict", res, err)
			}
		case err != nil || res.Action != apply.ActionCreate:
			t.Errorf("%s: %+v, %v; want created", o.GetName(), res, err)
		}
	}
	// Without a cache the list carried the foreign object itself.
	if r := rec.Reads(); len(r) != 0 {
		t.Errorf("applies after the probe read %v, want nothing", r)
	}
	if w := rec.Writes(); len(w) != 4 {
		t.Errorf("applies after the probe wrote %v, want the 4 of ours", w)
	}
	// Once written, it is read from the API server again.
	rec.Reset()
	if live, err := probed.Get(ctx, objs[0]); err != nil || live == nil {
		t.Fatalf("read after the write: %v, %v", live, err)
	}
	if r := rec.Reads(); len(r) != 1 {
		t.Errorf("read after the write: requests %v, want one GET", r)
	}
	v2 := version("v2")
	// Written by an applier without the cache, they are stubs in its
	// informer (TestInformersKeepOthersObjectsAsStubs) until a read
	// through it keeps them.
	for _, o := range v2 {
		if _, err := cached.Get(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	testenv.WaitFor(ctx, t, "the cache holds ours", func(ctx context.Context) (bool, string, error) {
		for _, o := range v2 {
			if _, ok, err := c.Cached(ctx, o.GroupVersionKind(), ns, o.GetName()); err != nil || !ok {
				return false, o.GetName() + " not cached", err
			}
		}
		return true, "", nil
	})
	rec.Reset()
	// Objects the cache holds are not listed.
	cached = cached.Probe(ctx, v2)
	if r := rec.Reads(); len(r) != 0 {
		t.Errorf("probe of cached objects read %v", r)
	}
	for _, o := range v2 {
		if res, err := cached.Apply(ctx, o); err != nil || res.Action != apply.ActionUpdate {
			t.Errorf("%s to v2: %+v, %v", o.GetName(), res, err)
		}
	}
	if r := rec.Reads(); len(r) != 0 {
		t.Errorf("updates of cached objects of ours read %v", r)
	}
	live, err := a.Direct().Get(ctx, v2[0])
	if err != nil || live == nil || live.Object["data"].(map[string]any)["k"] != "v2" {
		t.Errorf("after the update: %v, %v", live, err)
	}
}

// With a cache, Probe lists metadata only: a reader of an object's labels
// (the claim check) takes them from the list with GetMetadata, without a
// read of each object the cache does not hold; Get still reads the whole
// object, and an object the list lacked is absent for both.
func TestProbeWithCacheAnswersMetadataFromItsList(t *testing.T) {
	env, ns, a, rec := recordedApplier(t)
	ctx := t.Context()
	cached := a.WithCache(applytest.StartCache(t, env.Config))
	var objs []*unstructured.Unstructured
	for _, name := range []string{"theirs-1", "theirs-2"} {
		theirs := configMap(t, ns, name, map[string]string{"k": "theirs"})
		theirs.SetLabels(map[string]string{"team": "others"})
		if _, err := env.Dynamic.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(ns).Create(ctx, theirs, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, configMap(t, ns, name, map[string]string{"k": "ours"}))
	}
	absent := configMap(t, ns, "absent", map[string]string{"k": "ours"})
	objs = append(objs, absent)
	probed := cached.Probe(ctx, objs)
	rec.Reset()
	for _, o := range objs[:2] {
		m, err := probed.GetMetadata(ctx, o)
		if err != nil || m == nil {
			t.Fatalf("metadata of %s: %v, %v", o.GetName(), m, err)
		}
		if m.GetLabels()["team"] != "others" {
			t.Errorf("metadata of %s has labels %v, want the live object's", o.GetName(), m.GetLabels())
		}
		if _, ok := m.Object["data"]; ok {
			t.Errorf("metadata of %s holds its data: %v", o.GetName(), m.Object)
		}
	}
	if m, err := probed.GetMetadata(ctx, absent); err != nil || m != nil {
		t.Errorf("metadata of an object the list lacked: %v, %v; want absent", m, err)
	}
	if r := rec.Reads(); len(r) != 0 {
		t.Errorf("metadata of probed objects read %v, want nothing", r)
	}
	live, err := probed.Get(ctx, objs[0])
	if err != nil || live == nil || live.Object["data"] == nil {
		t.Fatalf("get of a probed object: %v, %v; want the whole live object", live, err)
	}
	if r := rec.Reads(); len(r) != 1 {
		t.Errorf("get of a probed object not cached: reads %v, want one GET", r)
	}
}

// Once the informer has stored the applier's own write, its cached copy
// is trusted even after the object's controller changed it (a status
// write): the next read needs no request, where a copy is otherwise
// trusted only at the version the applier wrote.
func TestCacheCaughtUpWithOwnWriteIsTrusted(t *testing.T) {
	env, ns, a, rec := recordedApplier(t)
	ctx := t.Context()
	inner := applytest.StartCache(t, env.Config)
	cached := a.WithCache(inner)
	d := deployment(t, ns, "web", "registry.example/web:v1")
	res, err := cached.Apply(ctx, d)
	if err != nil || res.Action != apply.ActionCreate {
		t.Fatalf("apply: %+v, %v", res, err)
	}
	written := res.Object.GetResourceVersion()
	testenv.WaitFor(ctx, t, "the deployment controller's status in the cache", func(ctx context.Context) (bool, string, error) {
		u, ok, err := inner.Cached(ctx, d.GroupVersionKind(), ns, "web")
		if err != nil || !ok {
			return false, "not cached", err
		}
		observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		return observed == res.Object.GetGeneration() && u.GetResourceVersion() != written, "", nil
	})
	if !inner.Seen(d.GroupVersionKind(), ns, "web", written) {
		t.Fatalf("the cache does not report the version it stored from the write (%s)", written)
	}
	rec.Reset()
	live, err := cached.Get(ctx, d)
	if err != nil || live == nil {
		t.Fatalf("get: %v, %v", live, err)
	}
	if r := rec.Reads(); len(r) != 0 {
		t.Errorf("read after the cache caught up: requests %v, want none", r)
	}
	if observed, _, _ := unstructured.NestedInt64(live.Object, "status", "observedGeneration"); observed != res.Object.GetGeneration() {
		t.Errorf("read status.observedGeneration %d, want %d (the controller's status)", observed, res.Object.GetGeneration())
	}
	if inner.Seen(d.GroupVersionKind(), ns, "web", "1") {
		t.Error("the cache reports a version it never stored")
	}
}

// Kinds the cluster does not serve (OpenShift's Route here) get no
// informer: Probe does not start one, which would ask discovery for the
// kind's group at every run (one 404 each time), and the object is
// skipped.
func TestProbeStartsNoInformerOfKindsNotServed(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	cfg, rec := applytest.Record(env.Config)
	a, err := apply.NewForConfig(cfg, apply.Options{Identity: testID, Owner: testOwner})
	if err != nil {
		t.Fatal(err)
	}
	cached := a.WithCache(applytest.StartCache(t, cfg))
	route := &unstructured.Unstructured{}
	route.SetAPIVersion("route.openshift.io/v1")
	route.SetKind("Route")
	route.SetNamespace(ns)
	route.SetName("r")
	objs := []*unstructured.Unstructured{configMap(t, ns, "a", map[string]string{"k": "v"}), route}
	for run := range 2 {
		p := cached.Probe(ctx, objs)
		for _, o := range objs {
			res, err := p.Apply(ctx, o)
			if err != nil {
				t.Fatalf("run %d: %v", run, err)
			}
			if o == route && res.Action != apply.ActionSkip {
				t.Errorf("run %d: the Route was %s, want skipped (not served)", run, res.Action)
			}
		}
	}
	for _, r := range append(rec.Reads(), rec.Watches()...) {
		if strings.Contains(r.Path, "openshift") {
			t.Errorf("a request for a group the cluster does not serve: GET %s", r.Path)
		}
	}
}
