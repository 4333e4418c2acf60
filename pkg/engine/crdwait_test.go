package engine_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/apply/applytest"
	"github.com/installstrategy/installstrategy/pkg/crdsafety"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/health"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// gizmoStrategy is a CRD of kind Gizmo in group, a ConfigMap and a Gizmo,
// in ns.
func gizmoStrategy(ns, group string) *strategy.Strategy {
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "gizmos." + group},
		"spec": map[string]any{
			"group": group, "scope": "Namespaced",
			"names": map[string]any{"kind": "Gizmo", "plural": "gizmos", "singular": "gizmo", "listKind": "GizmoList"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		},
	}}
	gizmo := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": group + "/v1", "kind": "Gizmo",
		"metadata": map[string]any{"name": "g1", "namespace": ns}, "spec": map[string]any{"size": int64(1)},
	}}
	return &strategy.Strategy{Identity: strategy.Identity{Version: "v1"}, Objects: []*unstructured.Unstructured{crd, configMapObject(ns, "settings"), gizmo}}
}

// widgetCRD is a copy of gizmos, gizmoStrategy's CRD, for kind Widget.
func widgetCRD(t *testing.T, gizmos *unstructured.Unstructured, group string) *unstructured.Unstructured {
	t.Helper()
	widgets := gizmos.DeepCopy()
	widgets.SetName("widgets." + group)
	if err := unstructured.SetNestedStringMap(widgets.Object, map[string]string{"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"}, "spec", "names"); err != nil {
		t.Fatal(err)
	}
	return widgets
}

// widgetNeverEstablished is a namespace and group for gizmoStrategy, whose
// strategy gets a second CRD first, for kind Widget, which another CRD of
// the group names already: it is never established.
func widgetNeverEstablished(t *testing.T, env *testenv.Env) (ns, group string, s *strategy.Strategy) {
	t.Helper()
	ns = env.Namespace(t.Context(), t)
	group = ns + ".crdwait.installstrategy.test"
	nameKind(t, env, group, "Widget")
	s = gizmoStrategy(ns, group)
	s.Objects = append([]*unstructured.Unstructured{widgetCRD(t, s.Objects[0], group)}, s.Objects...)
	return ns, group, s
}

// expectGizmo fails t unless gizmoStrategy's Gizmo exists.
func expectGizmo(t *testing.T, env *testenv.Env, ns, group string) {
	t.Helper()
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "gizmos"}
	if _, err := env.Dynamic.Resource(gvr).Namespace(ns).Get(t.Context(), "g1", metav1.GetOptions{}); err != nil {
		t.Errorf("gizmo g1: %v", err)
	}
}

// crdTestRun runs s for an owner in ns, recording the step events
// ("StepStarted crds", …), and removes what it applied afterwards.
func crdTestRun(t *testing.T, env *testenv.Env, ns string, s *strategy.Strategy, deadline time.Duration) (*engine.Result, []string, *applytest.Recorder, error) {
	t.Helper()
	return crdTestRunWith(t, env, ns, s, engine.Options{StageDeadline: deadline})
}

// crdTestRunWith is crdTestRun with options (Owner, Interval and OnEvent
// are set).
func crdTestRunWith(t *testing.T, env *testenv.Env, ns string, s *strategy.Strategy, opts engine.Options) (*engine.Result, []string, *applytest.Recorder, error) {
	t.Helper()
	cfg, rec := applytest.Record(env.Config)
	owner := inventory.Owner{Namespace: ns, Name: "crdwait"}
	t.Cleanup(func() {
		if _, err := engine.Uninstall(context.WithoutCancel(t.Context()), env.Config, engine.UninstallOptions{Owner: owner, Wait: true}); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	var (
		mu     sync.Mutex
		events []string
	)
	opts.Owner, opts.Interval = owner, 200*time.Millisecond
	opts.OnEvent = func(e engine.Event) {
		switch e.Type {
		case engine.EventStepStarted, engine.EventStepReady:
			mu.Lock()
			events = append(events, string(e.Type)+" "+e.Step)
			mu.Unlock()
		}
	}
	res, err := engine.Run(t.Context(), cfg, s, opts)
	return res, events, rec, err
}

// The CRDs establish while the steps that do not need their kinds run:
// the CRD step is ready only after the config step started, and before
// the custom resources are written.
func TestCRDsEstablishWhileLaterStepsRun(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	group := ns + ".crdwait.installstrategy.test"
	res, events, rec, err := crdTestRun(t, env, ns, gizmoStrategy(ns, group), time.Minute)
	if err != nil || !res.RolledOver {
		t.Fatalf("run: %v (events %v)", err, events)
	}
	at := func(e string) int {
		i := slices.Index(events, e)
		if i < 0 {
			t.Fatalf("no event %q in %v", e, events)
		}
		return i
	}
	if !(at("StepStarted crds") < at("StepStarted config") && at("StepStarted config") < at("StepReady crds") &&
		at("StepReady crds") < at("StepStarted custom-resources")) {
		t.Errorf("step events %v: want the CRDs ready after the config step started and before the custom resources", events)
	}
	// The gizmo is read once, before its write (no cache here); its
	// health (kstatus: no status to wait for) is judged from what the
	// write returned, without reading it again.
	gets := 0
	for _, r := range rec.Reads() {
		if strings.HasSuffix(r.Path, "/gizmos/g1") {
			gets++
		}
	}
	if gets != 1 {
		t.Errorf("gizmo g1 read %d times, want 1 (before its write)", gets)
	}
	expectGizmo(t, env, ns, group)
}

// A CRD that never becomes established fails the CRD step, although the
// wait for it comes later: here another CRD of the group already names
// the kind (NamesAccepted False).
func TestCRDNeverEstablishedFailsTheCRDStep(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	group := ns + ".crdwait.installstrategy.test"
	nameKind(t, env, group, "Gizmo")
	_, events, _, err := crdTestRun(t, env, ns, gizmoStrategy(ns, group), 3*time.Second)
	var stepErr *engine.StepError
	if !errors.As(err, &stepErr) || stepErr.Step != "crds" || !strings.Contains(err.Error(), "NamesAccepted") {
		t.Fatalf("run: %v, want the crds step failed on NamesAccepted (events %v)", err, events)
	}
	if slices.Contains(events, "StepStarted custom-resources") {
		t.Errorf("the custom resources were written without their CRD: %v", events)
	}
}

// A step waits only for the CRDs that define the kinds it writes: with one
// CRD of the step never established (another CRD of its group already
// names its kind), the custom resources of the other CRD are written, and
// the run then fails the CRD step on the one that never was. Before, the
// custom resources waited for every CRD of the step.
func TestAStepWaitsOnlyForTheCRDsOfItsKinds(t *testing.T) {
	env := testenv.New(t)
	ns, group, s := widgetNeverEstablished(t, env)
	_, events, _, err := crdTestRun(t, env, ns, s, 3*time.Second)
	var stepErr *engine.StepError
	if !errors.As(err, &stepErr) || stepErr.Step != "crds" || !strings.Contains(err.Error(), "widgets."+group) {
		t.Fatalf("run: %v, want the crds step failed on widgets.%s (events %v)", err, group, events)
	}
	if !slices.Contains(events, "StepStarted custom-resources") {
		t.Errorf("the gizmos waited for the widgets' CRD: step events %v", events)
	}
	if slices.Contains(events, "StepReady crds") {
		t.Errorf("the crds step is ready with a CRD not established: %v", events)
	}
	expectGizmo(t, env, ns, group)
}

// A run that does not wait (NoWait, the plugin's apply without --wait)
// ends without waiting for the CRDs it created when no step writes their
// kinds, as kubectl apply does: here one that is never established (its
// kind named by another CRD of the group), not read after its write.
// The CRD whose kind the custom resources step writes is still waited for
// (its Gizmo exists), and with the wait the run fails on the other
// (TestAStepWaitsOnlyForTheCRDsOfItsKinds).
func TestNoWaitLeavesTheCRDsItCreated(t *testing.T) {
	env := testenv.New(t)
	ns, group, s := widgetNeverEstablished(t, env)
	res, events, rec, err := crdTestRunWith(t, env, ns, s, engine.Options{NoWait: true, StageDeadline: 3 * time.Second})
	if err != nil || !res.RolledOver {
		t.Fatalf("run: %v (events %v)", err, events)
	}
	if !slices.Contains(events, "StepReady crds") {
		t.Errorf("no StepReady for the crds step: %v", events)
	}
	reads := 0
	for _, r := range rec.Reads() {
		if strings.HasSuffix(r.Path, "/customresourcedefinitions/widgets."+group) {
			reads++
		}
	}
	if reads > 1 {
		t.Errorf("the created CRD no step needs was read %d times, want at most once (before its write)", reads)
	}
	expectGizmo(t, env, ns, group)
}

// The wait of a CRD step, which comes a step or more after its writes,
// judges a CRD's write response only when the response shows the CRD
// established: a created CRD's response has no conditions, so the wait
// reads the CRD (established by then) instead of waiting out a round on
// the response. A step's own wait judges the responses first.
func TestCRDWaitReadsACreatedCRD(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	group := ns + ".crdwait.installstrategy.test"
	s := gizmoStrategy(ns, group)
	crd := s.Objects[0]
	crds := env.Dynamic.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	created, err := crds.Create(ctx, crd, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := crds.Delete(context.WithoutCancel(ctx), crd.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleanup: %v", err)
		}
	})
	env.WaitCRDEstablished(ctx, t, crd.GetName())
	cfg, rec := applytest.Record(env.Config)
	rc, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	established := created.DeepCopy()
	established.Object["status"] = map[string]any{"conditions": []any{
		map[string]any{"type": "NamesAccepted", "status": "True"}, map[string]any{"type": "Established", "status": "True"}}}
	checker := &health.Checker{}
	for _, tc := range []struct {
		name               string
		response           *unstructured.Unstructured
		readyResponsesOnly bool
		wantReads          int
	}{
		{"a step's own wait, created", created, false, 0},
		{"the CRD step's wait, created", created, true, 1},
		{"the CRD step's wait, updated while established", established, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			results := []apply.Result{{Ref: strategy.RefOf(crd), Action: apply.ActionCreate, Object: tc.response}}
			get, err := engine.WaitGetter(ctx, rc, s, engine.Options{Owner: inventory.Owner{Namespace: ns, Name: "crdwait"}}, results, tc.readyResponsesOnly)
			if err != nil {
				t.Fatal(err)
			}
			rec.Reset()
			live, err := get(ctx, crd)
			if err != nil || live == nil {
				t.Fatalf("get: %v, %v", live, err)
			}
			st, err := checker.Check(ctx, live)
			if err != nil {
				t.Fatal(err)
			}
			reads := 0
			for _, r := range rec.Reads() {
				if strings.HasSuffix(r.Path, "/customresourcedefinitions/"+crd.GetName()) {
					reads++
				}
			}
			if wantReady := tc.wantReads > 0 || tc.response == established; st.Ready != wantReady || reads != tc.wantReads {
				t.Errorf("judged %v (%s) after %d reads of the CRD, want ready %v after %d", st.Ready, st.Reason, reads, wantReady, tc.wantReads)
			}
		})
	}
}

// nameKind creates CRD others.GROUP, established, naming kind: a CRD of
// the group for the same kind is never established (NamesAccepted False).
func nameKind(t *testing.T, env *testenv.Env, group, kind string) {
	t.Helper()
	ctx := t.Context()
	other := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "others." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, Plural: "others", ListKind: kind + "List"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: new(true)}}}},
		},
	}
	if err := env.Client.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Client.Delete(context.WithoutCancel(ctx), other); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleanup: %v", err)
		}
	})
	env.WaitCRDEstablished(ctx, t, other.Name)
}

// laggingMapper is a REST mapper over discovery that keeps answering "no
// match" for one kind for a number of resets after discovery first lists
// it: the API server lists a new CRD's kind in discovery a moment after it
// reports the CRD established.
type laggingMapper struct {
	meta.ResettableRESTMapper
	gk schema.GroupKind
	// lag is how many resets the kind stays unknown once served.
	lag int

	mu           sync.Mutex
	resets       int
	servedAt     int
	servedBefore bool
}

func (m *laggingMapper) Reset() {
	m.mu.Lock()
	m.resets++
	m.mu.Unlock()
	m.ResettableRESTMapper.Reset()
}

func (m *laggingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	mapping, err := m.ResettableRESTMapper.RESTMapping(gk, versions...)
	if err != nil || gk != m.gk {
		return mapping, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.servedBefore {
		m.servedBefore, m.servedAt = true, m.resets
	}
	if m.resets-m.servedAt < m.lag {
		return nil, &meta.NoKindMatchError{GroupKind: gk, SearchedVersions: versions}
	}
	return mapping, nil
}

// The custom resources of the strategy's own CRD are written even when
// discovery lists their kind only a while after the CRD is established
// (seen once in make test-repeat: the Gizmo was skipped as a kind not
// served, and the run said it rolled over).
func TestCRDsKindsAreWaitedForInDiscovery(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	group := ns + ".crdwait.installstrategy.test"
	disc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := &laggingMapper{ResettableRESTMapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc)),
		gk: schema.GroupKind{Group: group, Kind: "Gizmo"}, lag: 3}
	rc := engine.NewWithClients(engine.Clients{Applier: apply.New(env.Dynamic, mapper, apply.Options{}), Kube: env.Kube})
	owner := inventory.Owner{Namespace: ns, Name: "crdwait"}
	t.Cleanup(func() {
		if _, err := engine.Uninstall(context.WithoutCancel(ctx), env.Config, engine.UninstallOptions{Owner: owner, Wait: true}); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	res, err := rc.Run(ctx, gizmoStrategy(ns, group), engine.Options{Owner: owner, Interval: 200 * time.Millisecond, StageDeadline: time.Minute})
	if err != nil || !res.RolledOver {
		t.Fatalf("run: %v", err)
	}
	for _, a := range res.Applied {
		if a.Ref.Kind == "Gizmo" && a.Action != apply.ActionCreate {
			t.Errorf("gizmo g1: %s (%s), want created", a.Action, a.Reason)
		}
	}
	expectGizmo(t, env, ns, group)
}

// A run that changes CRDs whose kinds discovery already served when the
// run began does not ask discovery again to wait for them: one discovery
// at the run's start.
func TestChangedCRDsAlreadyServedAskNoDiscovery(t *testing.T) {
	env, ns, group := installedGizmo(t)
	s := gizmoStrategy(ns, group)
	s.Objects[0].SetAnnotations(map[string]string{"changed": "yes"})
	res, events, rec, err := crdTestRun(t, env, ns, s, time.Minute)
	if err != nil || !res.RolledOver {
		t.Fatalf("change: %v (events %v)", err, events)
	}
	updated := false
	for _, a := range res.Applied {
		updated = updated || (a.Ref.Kind == "CustomResourceDefinition" && a.Action == apply.ActionUpdate)
	}
	if !updated {
		t.Fatalf("the CRD was not updated: %+v", res.Applied)
	}
	discovery := 0
	for _, r := range rec.Reads() {
		if r.Path == "/apis" {
			discovery++
		}
	}
	if discovery != 1 {
		t.Errorf("the run asked discovery %d times, want once (at its start)", discovery)
	}
}

// A CRD recreated for a changed scope is served with its new scope before
// its custom resources are written: the CRD wait asks discovery again,
// whatever it said at the run's start (the kind mapped as namespaced).
func TestRecreatedCRDIsAskedOfDiscoveryAgain(t *testing.T) {
	env, ns, group := installedGizmo(t)
	ctx := t.Context()
	s := gizmoStrategy(ns, group)
	if err := unstructured.SetNestedField(s.Objects[0].Object, "Cluster", "spec", "scope"); err != nil {
		t.Fatal(err)
	}
	s.Objects[2].SetNamespace("")
	// A scope change is refused (never a delete and recreate, which
	// deletes every custom resource) unless an override accepts it.
	if _, _, _, err := crdTestRun(t, env, ns, s, time.Minute); !errors.As(err, new(*crdsafety.UnsafeError)) {
		t.Fatalf("scope change without an override: %v, want a refusal", err)
	}
	allow := []crdsafety.Allow{{CRD: s.Objects[0].GetName(), Rule: crdsafety.RuleScope}}
	res, events, _, err := crdTestRunWith(t, env, ns, s, engine.Options{StageDeadline: time.Minute, AllowCRDChanges: allow})
	if err != nil || !res.RolledOver {
		t.Fatalf("scope change: %v (events %v)", err, events)
	}
	actions := map[string]apply.Action{}
	for _, a := range res.Applied {
		actions[a.Ref.Kind] = a.Action
	}
	if actions["CustomResourceDefinition"] != apply.ActionRecreate || actions["Gizmo"] != apply.ActionCreate {
		t.Fatalf("actions %v, want the CRD recreated and the Gizmo created", actions)
	}
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "gizmos"}
	if _, err := env.Dynamic.Resource(gvr).Get(ctx, "g1", metav1.GetOptions{}); err != nil {
		t.Errorf("the cluster-scoped Gizmo: %v", err)
	}
}

// installedGizmo installs gizmoStrategy in a new namespace and returns the
// environment, the namespace and the CRD's group.
func installedGizmo(t *testing.T) (*testenv.Env, string, string) {
	t.Helper()
	env := testenv.New(t)
	ns := env.Namespace(t.Context(), t)
	group := ns + ".crdwait.installstrategy.test"
	if res, events, _, err := crdTestRun(t, env, ns, gizmoStrategy(ns, group), time.Minute); err != nil || !res.RolledOver {
		t.Fatalf("install: %v (events %v)", err, events)
	}
	return env, ns, group
}
