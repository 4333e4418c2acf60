// Package e2e tests the operator end to end on the local cluster: the
// manager runs in process, scoped to the test's namespace, and the tests
// drive Installations of the built-in sample product through install,
// upgrade, customisation, a second Installation and uninstall, asserting the
// resulting cluster state.
package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/dump"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/apply/applytest"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/operator"
)

const crdFile = "../../config/crd/bases/installstrategy.io_installations.yaml"

// lockSample serialises tests that install the sample product, whose
// cluster-scoped objects (CRDs, ClusterRoles, webhook) have fixed names,
// across test binaries (make test also runs the packages one at a time).
func lockSample(t testing.TB) {
	t.Helper()
	testenv.Lock(t, testenv.SampleProductLock)
}

type e2e struct {
	env *testenv.Env
	ns  string
	// more are further install namespaces the manager watches
	// (withNamespaces).
	more []string
	c    client.Client

	// The in-process manager (setup): its options, the operator's
	// namespace, the metrics of the running one, and how to stop it.
	scheme *runtime.Scheme
	keyNS  string
	// config, when set, is the operator's client configuration.
	config *rest.Config
	change func(*operator.Options)
	// reconciler is the running manager's Installation controller.
	reconciler *operator.Reconciler
	metrics    *operator.Metrics
	stop       func()
	// cache is the running manager's cache (what the operator reads).
	cache cache.Cache
	// recorder has every request of the operator (setup's recorded).
	recorder *applytest.Recorder
}

// directClient returns a scheme with the client-go kinds, Installations and
// CRDs, and a client that reads from the API server (no cache).
func directClient(t testing.TB, env *testenv.Env) (*runtime.Scheme, client.Client) {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	direct, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return scheme, direct
}

// harness is what setup is asked for (its options).
type harness struct {
	manager    bool
	namespaces int
	changes    []func(*operator.Options)
	wraps      []func(*rest.Config) *rest.Config
	record     bool
}

// option changes what setup prepares.
type option func(*harness)

// withOptions changes the in-process operator's options (after the
// defaults of startManager; several apply in order).
func withOptions(change func(*operator.Options)) option {
	return func(h *harness) { h.changes = append(h.changes, change) }
}

// withNamespaces makes the manager watch n install namespaces: e.ns and
// n-1 more (e.more).
func withNamespaces(n int) option {
	return func(h *harness) { h.namespaces = n }
}

// withConfig changes the operator's client configuration (e.g. to fail
// some of its requests).
func withConfig(wrap func(*rest.Config) *rest.Config) option {
	return func(h *harness) { h.wraps = append(h.wraps, wrap) }
}

// recorded records every request of the operator in e.recorder.
func recorded() option {
	return func(h *harness) { h.record = true }
}

// withoutManager runs no operator: the test runs its own (a process, a
// replica pair) and removes its Installations itself (e.removeAll while
// that operator runs).
func withoutManager() option {
	return func(h *harness) { h.manager = false }
}

// setup is the harness of the package's tests: it locks the sample
// product, installs the Installation CRD, makes the install namespace(s)
// and, unless withoutManager, runs the manager in process, scoped to them,
// until the test ends; at the end it removes every Installation of those
// namespaces (the manager still running), then stops the manager.
func setup(t *testing.T, opts ...option) *e2e {
	t.Helper()
	h := harness{manager: true, namespaces: 1}
	for _, o := range opts {
		o(&h)
	}
	env := testenv.New(t)
	lockSample(t)
	env.InstallCRDFile(t.Context(), t, crdFile)
	e := &e2e{env: env, ns: env.Namespace(t.Context(), t)}
	e.scheme, e.c = directClient(t, env)
	if !h.manager {
		return e
	}
	for range h.namespaces - 1 {
		e.more = append(e.more, env.Namespace(t.Context(), t))
	}
	cfg := env.Config
	for _, wrap := range h.wraps {
		cfg = wrap(cfg)
	}
	if h.record {
		cfg, e.recorder = applytest.Record(cfg)
	}
	if cfg != env.Config {
		e.config = cfg
	}
	// The operator's own namespace (its signing key, the trusted keys):
	// not the install namespace.
	e.keyNS = env.Namespace(t.Context(), t)
	if len(h.changes) > 0 {
		e.change = func(o *operator.Options) {
			for _, c := range h.changes {
				c(o)
			}
		}
	}
	e.startManager(t)
	// Cleanup runs last-in first-out: remove the product (the manager still
	// runs), then stop the manager.
	t.Cleanup(func() { e.stopManager() })
	t.Cleanup(func() { e.removeAll(t) })
	return e
}

// startManager runs the manager in process, scoped to the test's
// namespace, until stopManager (or the test's end).
func (e *e2e) startManager(t *testing.T) {
	t.Helper()
	env, ctx := e.env, t.Context()
	watched := map[string]cache.Config{}
	for _, ns := range e.namespaces() {
		watched[ns] = cache.Config{}
	}
	skipNameValidation := true
	cfg := env.Config
	if e.config != nil {
		cfg = e.config
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 e.scheme,
		Logger:                 testr.NewWithOptions(t, testr.Options{Verbosity: 0}),
		Cache:                  cache.Options{DefaultNamespaces: watched},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Every test runs a manager with the same controller name.
		Controller: config.Controller{SkipNameValidation: &skipNameValidation},
	})
	if err != nil {
		t.Fatal(err)
	}
	opts := operator.Options{
		Defaults:         operator.Defaults{Registry: "registry.example/sample"},
		ResyncPeriod:     time.Minute,
		ProgressInterval: 500 * time.Millisecond,
		Interval:         200 * time.Millisecond,
		StageDeadline:    time.Minute,
		Metrics:          operator.NewMetrics(),
		KeyNamespace:     e.keyNS,
		Product:          dump.Product,
		HelmRenderer:     helmRenderer(t),
	}
	if e.change != nil {
		e.change(&opts)
	}
	e.metrics = opts.Metrics
	r, err := operator.New(mgr, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	e.reconciler = r
	e.cache = mgr.GetCache()
	mctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := mgr.Start(mctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	e.stop = func() { cancel(); wg.Wait() }
}

// stopManager stops the running manager, if any.
func (e *e2e) stopManager() {
	if e.stop != nil {
		e.stop()
		e.stop = nil
	}
}

// namespaces are the install namespaces the manager watches.
func (e *e2e) namespaces() []string { return append([]string{e.ns}, e.more...) }

// removeAll deletes every Installation of the namespaces with
// RemoveWorkloads and pruneCRDs and waits until they are gone, so the
// product's cluster-scoped objects do not outlive the test.
func (e *e2e) removeAll(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 2*time.Minute)
	defer cancel()
	items, err := e.installations(ctx)
	if err != nil {
		t.Errorf("cleanup: %v", err)
		return
	}
	// Newest first, so that no older Installation is deleted while a
	// newer one could still take over.
	slices.SortFunc(items, func(a, b v1alpha1.Installation) int {
		return b.CreationTimestamp.Compare(a.CreationTimestamp.Time)
	})
	for i := range items {
		in := &items[i]
		patch := client.MergeFrom(in.DeepCopy())
		in.Spec.UninstallStrategy = v1alpha1.UninstallRemoveWorkloads
		in.Spec.PruneCRDs = true
		if err := e.c.Patch(ctx, in, patch); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleanup: %v", err)
		}
		if err := e.c.Delete(ctx, in); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleanup: %v", err)
		}
	}
	if err := testenv.Poll(ctx, "installations removed", func(ctx context.Context) (bool, string, error) {
		left, err := e.installations(ctx)
		if err != nil {
			return false, "", err
		}
		return len(left) == 0, fmt.Sprintf("%d left", len(left)), nil
	}); err != nil {
		t.Errorf("cleanup: %v", err)
	}
}

// installations lists the Installations of the watched namespaces.
func (e *e2e) installations(ctx context.Context) ([]v1alpha1.Installation, error) {
	var all []v1alpha1.Installation
	for _, ns := range e.namespaces() {
		var l v1alpha1.InstallationList
		if err := e.c.List(ctx, &l, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		all = append(all, l.Items...)
	}
	return all, nil
}

func (e *e2e) create(ctx context.Context, t *testing.T, name string, spec v1alpha1.InstallationSpec) *v1alpha1.Installation {
	t.Helper()
	return e.createIn(ctx, t, e.ns, name, spec)
}

func (e *e2e) get(ctx context.Context, name string) (*v1alpha1.Installation, error) {
	return e.getIn(ctx, e.ns, name)
}

func (e *e2e) update(ctx context.Context, t *testing.T, name string, f func(*v1alpha1.Installation)) {
	t.Helper()
	testenv.Edit(ctx, t, e.c, &v1alpha1.Installation{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}}, f)
}

func describe(in *v1alpha1.Installation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "gen %d phase %q observedGen %d observed %s target %s;", in.Generation, in.Status.Phase, in.Status.ObservedGeneration,
		in.Status.ObservedVersion, in.Status.TargetVersion)
	for _, c := range in.Status.Conditions {
		fmt.Fprintf(&b, " %s=%s/%s", c.Type, c.Status, c.Reason)
		if c.Message != "" && c.Status == metav1.ConditionTrue && c.Type == string(v1alpha1.ConditionDegraded) {
			fmt.Fprintf(&b, "(%s)", c.Message)
		}
	}
	return b.String()
}

// reportWorkloads logs the workloads of the test's namespace, live and as
// the operator's cache holds them: a wait that times out calls it, so it
// says whether the cluster's rollout or the operator's view of it stopped.
func (e *e2e) reportWorkloads(ctx context.Context, t *testing.T) {
	t.Helper()
	var cached testenv.CachedReader
	if c := e.cache; c != nil && e.stop != nil {
		cached = func(ctx context.Context, gvk schema.GroupVersionKind, ns, name string) (*unstructured.Unstructured, error) {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(gvk)
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u)
			if apierrors.IsNotFound(err) {
				return nil, nil
			}
			return u, err
		}
	}
	t.Log(testenv.WorkloadReport(ctx, e.env.Kube, e.ns, cached))
}

// waitDeployed waits until the Installation's current generation is
// deployed at version.
func (e *e2e) waitDeployed(ctx context.Context, t *testing.T, name, version string) *v1alpha1.Installation {
	t.Helper()
	return e.waitDeployedWhile(ctx, t, name, version, nil)
}

// waitDeployedWhile is waitDeployed that calls check (when not nil) on
// every poll, so a test can fail at once when something it depends on
// (an operator process) is gone.
func (e *e2e) waitDeployedWhile(ctx context.Context, t *testing.T, name, version string, check func()) *v1alpha1.Installation {
	t.Helper()
	var last *v1alpha1.Installation
	waited := false
	defer func() {
		if !waited {
			e.reportWorkloads(ctx, t)
		}
	}()
	testenv.WaitFor(ctx, t, name+" deployed at "+version, func(ctx context.Context) (bool, string, error) {
		if check != nil {
			check()
		}
		in, err := e.get(ctx, name)
		if err != nil {
			return false, "", err
		}
		last = in
		return in.IsDeployed() && in.Status.ObservedVersion == version, describe(in), nil
	})
	waited = true
	return last
}

func assertCondition(t *testing.T, in *v1alpha1.Installation, typ v1alpha1.ConditionType, status metav1.ConditionStatus, reason string) {
	t.Helper()
	c := in.Condition(typ)
	if c == nil || c.Status != status || c.Reason != reason {
		t.Errorf("condition %s = %+v, want %s/%s", typ, c, status, reason)
	}
}

// expectedIdentity is the identity the controller should compute.
func expectedIdentity(t *testing.T, ns, version string, cc *v1alpha1.CustomizeComponents) (string, *identity.Config) {
	t.Helper()
	in := &v1alpha1.Installation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "x"},
		Spec: v1alpha1.InstallationSpec{Version: version, Registry: "registry.example/sample", ImagePullPolicy: "IfNotPresent", CustomizeComponents: cc}}
	return identityOf(t, in)
}

// identityOf is the identifier and configuration the controller computes
// for an Installation.
func identityOf(t *testing.T, in *v1alpha1.Installation) (string, *identity.Config) {
	t.Helper()
	cfg, err := operator.ConfigFor(in, operator.Defaults{})
	if err != nil {
		t.Fatal(err)
	}
	id, err := cfg.Identity(identity.Native)
	if err != nil {
		t.Fatal(err)
	}
	return id.Identifier, cfg
}

func sampleSpec(version string) v1alpha1.InstallationSpec {
	return v1alpha1.InstallationSpec{Version: version, Registry: "registry.example/sample"}
}

func (e *e2e) exists(ctx context.Context, t *testing.T, obj client.Object, name string) bool {
	t.Helper()
	err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name}, obj)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}
