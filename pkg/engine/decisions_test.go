package engine

import (
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// The engine's decisions over values, without a cluster: which CRDs a
// step waits for, how a DaemonSet's canary is judged and widened, how
// often a wait confirms a cached copy. The cluster tests show the same
// decisions taken against a real API server.

func obj(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind}}
	o.SetNamespace(namespace)
	o.SetName(name)
	return o
}

func defining(group, kind, plural string) *unstructured.Unstructured {
	o := obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", plural+"."+group)
	o.Object["spec"] = map[string]any{"group": group, "names": map[string]any{"kind": kind, "plural": plural}}
	return o
}

func stepNames(p *plan.Plan) []string {
	var out []string
	for _, st := range p.Steps {
		out = append(out, st.Name)
	}
	return out
}

// TestStepsOrderAndCRDSettling: CRDs (with the Namespaces) are the first
// step and custom resources come after them; a later step waits for the
// CRDs of the kinds it writes only, and for the whole CRD step when it
// writes the kinds of all of them.
func TestStepsOrderAndCRDSettling(t *testing.T) {
	widgets, gadgets := defining("example.com", "Widget", "widgets"), defining("example.com", "Gadget", "gadgets")
	s := &strategy.Strategy{Identity: strategy.Identity{Version: "v1.0.0"}, Objects: []*unstructured.Unstructured{
		obj("example.com/v1", "Widget", "app", "w"), obj("apps/v1", "Deployment", "app", "web"),
		widgets, gadgets, obj("v1", "Namespace", "", "app"), obj("example.com/v1", "Gadget", "app", "g"),
	}}
	p := plan.Build(s, plan.Options{})
	names := stepNames(p)
	crdStep, crStep := slices.Index(names, kinds.StageCRDs.String()), slices.Index(names, kinds.StageCustomResources.String())
	if crdStep != 0 || crStep <= crdStep {
		t.Fatalf("steps %v: want the CRD step first and custom resources after it", names)
	}
	st := p.Steps[crdStep]
	objs := make([]*unstructured.Unstructured, len(st.Items))
	for i, it := range st.Items {
		objs[i] = it.Object
	}
	c := newAppliedCRDs(st, objs, make([]apply.Result, len(objs)))
	named := func(idx []int) []string {
		var out []string
		for _, i := range idx {
			out = append(out, c.objs[i].GetName())
		}
		slices.Sort(out)
		return out
	}
	step := func(objs ...*unstructured.Unstructured) plan.Step {
		st := plan.Step{Stage: kinds.StageCustomResources}
		for _, o := range objs {
			st.Items = append(st.Items, plan.Item{Ref: strategy.RefOf(o), Object: o})
		}
		return st
	}
	for _, tc := range []struct {
		name string
		step plan.Step
		want []string
	}{
		{"a step writing widgets waits for their CRD only", step(obj("example.com/v1", "Widget", "app", "w")), []string{"widgets.example.com"}},
		{"a step writing no custom resource waits for none", step(obj("v1", "ConfigMap", "app", "web")), nil},
		{"a step writing both kinds waits for the whole CRD step", step(obj("example.com/v1", "Widget", "app", "w"), obj("example.com/v1", "Gadget", "app", "g")), []string{"app", "gadgets.example.com", "widgets.example.com"}},
		{"the end of the run (a CRD step) waits for all", plan.Step{Stage: kinds.StageCRDs}, []string{"app", "gadgets.example.com", "widgets.example.com"}},
	} {
		if got := named(c.needed(tc.step)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: needed %v, want %v", tc.name, got, tc.want)
		}
	}
	part, rest := c.split(c.needed(step(obj("example.com/v1", "Widget", "app", "w"))))
	if len(part.objs) != 1 || rest == nil || len(rest.objs) != 2 {
		t.Errorf("split: %d waited for, rest %v; want 1 and the other 2", len(part.objs), rest)
	}
	if _, none := c.split(c.needed(plan.Step{Stage: kinds.StageCRDs})); none != nil {
		t.Errorf("split of everything leaves %d objects, want none", len(none.objs))
	}
	var nilCRDs *appliedCRDs
	if got := nilCRDs.needed(step(obj("example.com/v1", "Widget", "app", "w"))); got != nil {
		t.Errorf("no CRD step pending: needed %v, want none", got)
	}
}

// TestDaemonSetsRollOutFirstOnUpdate: on the update path DaemonSets (the
// handlers, rolled out with a canary) go first and the API last; on the
// create path the reverse.
func TestDaemonSetsRollOutFirstOnUpdate(t *testing.T) {
	s := &strategy.Strategy{Identity: strategy.Identity{Version: "v1.1.0"}, Objects: []*unstructured.Unstructured{
		obj("apps/v1", "Deployment", "app", "virt-api"), obj("apps/v1", "DaemonSet", "app", "node-agent"), obj("apps/v1", "Deployment", "app", "controller"),
	}}
	for _, tc := range []struct {
		observed string
		want     []string
	}{
		{"v1.0.0", []string{"workloads/handler", "workloads/controller", "workloads/api"}},
		{"", []string{"workloads/api", "workloads/controller", "workloads/handler"}},
	} {
		p := plan.Build(s, plan.Options{Observed: strategy.Identity{Version: tc.observed}, Roles: kinds.KubeVirtRoles()})
		if got := stepNames(p); !slices.Equal(got, tc.want) {
			t.Errorf("observed %q: steps %v, want %v", tc.observed, got, tc.want)
		}
	}
}

func canaryPod(name string, id strategy.Identity, mutate func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
		metakeys.InstallStrategyVersionAnnotation: id.Version, metakeys.InstallStrategyRegistryAnnotation: id.Registry, metakeys.InstallStrategyIdentifierAnnotation: id.Identifier}},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func TestCanaryVerdict(t *testing.T) {
	target, old := strategy.Identity{Version: "v2", Registry: "r", Identifier: "i"}, strategy.Identity{Version: "v1", Registry: "r", Identifier: "i"}
	ready := func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	crashing := func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "agent", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}
	}
	for _, tc := range []struct {
		name   string
		pods   []*corev1.Pod
		ready  bool
		failed string
	}{
		{"old pods ready, canary pending: wait", []*corev1.Pod{canaryPod("a", old, ready), canaryPod("b", target, nil)}, false, ""},
		{"canary ready: widen", []*corev1.Pod{canaryPod("a", old, ready), canaryPod("b", target, ready)}, true, ""},
		{"old pod crash-looping is not the canary's failure", []*corev1.Pod{canaryPod("a", old, crashing), canaryPod("b", target, ready)}, true, ""},
		{"canary crash-looping stops the rollout, even beside a ready one", []*corev1.Pod{canaryPod("a", target, ready), canaryPod("b", target, crashing)}, false, "canary pod b: container agent: CrashLoopBackOff"},
	} {
		ready, failed := canaryVerdict(tc.pods, target)
		if ready != tc.ready || !strings.HasPrefix(failed, tc.failed) || (tc.failed == "") != (failed == "") {
			t.Errorf("%s: ready %v, failed %q; want %v, %q", tc.name, ready, failed, tc.ready, tc.failed)
		}
	}
}

func TestCanaryWidths(t *testing.T) {
	three := intstr.FromInt32(3)
	for _, tc := range []struct {
		name           string
		ds             appsv1.DaemonSet
		opts           CanaryOptions
		original, wide string
	}{
		{"defaults", appsv1.DaemonSet{}, CanaryOptions{}, "1", "10%"},
		{"the strategy's maxUnavailable is restored, the option widens", appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{UpdateStrategy: appsv1.DaemonSetUpdateStrategy{RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &three}}}}, CanaryOptions{Step: intstr.FromString("50%")}, "3", "50%"},
	} {
		original, wide := canaryWidths(&tc.ds, tc.opts)
		if original.String() != tc.original || wide.String() != tc.wide {
			t.Errorf("%s: %s → %s, want %s → %s", tc.name, original.String(), wide.String(), tc.original, tc.wide)
		}
	}
}

// TestConfirmEvery: how long a wait trusts a cached copy that does not
// change before asking the API server.
func TestConfirmEvery(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want time.Duration
	}{
		{Options{ConfirmEvery: 7 * time.Second, StageDeadline: time.Hour, Interval: time.Second}, 7 * time.Second},
		{Options{StageDeadline: 5 * time.Minute, Interval: time.Second}, 30 * time.Second},
		{Options{StageDeadline: 10 * time.Second, Interval: time.Second}, 10 * time.Second},
	} {
		r := &run{opts: tc.opts}
		if got := r.confirmEvery(); got != tc.want {
			t.Errorf("%+v: confirmEvery %s, want %s", tc.opts, got, tc.want)
		}
	}
}
