package placement_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/installstrategy/installstrategy/internal/kubevirtdata"
	"github.com/installstrategy/installstrategy/pkg/generate"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/placement"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

var (
	infraToleration = corev1.Toleration{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	nodeToleration  = corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "virt", Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](30)}
	infraAffinity   = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "type", Operator: corev1.NodeSelectorOpIn, Values: []string{"kwok"}}}}},
	}}}
	nodeAffinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{}}
)

func testSpec() placement.Spec {
	return placement.Spec{
		Placement: &identity.Placement{
			Infra:     &identity.NodePlacement{NodeSelector: map[string]string{"infra": "yes", "shared": "infra"}, Tolerations: []corev1.Toleration{infraToleration}, Affinity: infraAffinity},
			Workloads: &identity.NodePlacement{NodeSelector: map[string]string{"node": "yes"}, Tolerations: []corev1.Toleration{nodeToleration}, Affinity: nodeAffinity},
		},
		ImagePullSecrets: []string{"pull-a", "pull-b"},
	}
}

// workload returns an object of a kind with a pod template at the table's
// path, whose pod spec is pod.
func workload(info kinds.Info, name string, pod map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(info.GroupVersionKind())
	u.SetName(name)
	u.SetNamespace("ns")
	if err := unstructured.SetNestedMap(u.Object, map[string]any{"spec": pod}, info.PodTemplate...); err != nil {
		panic(err)
	}
	return u
}

func podSpecOf(t *testing.T, u *unstructured.Unstructured) *corev1.PodSpec {
	t.Helper()
	info, _ := kinds.Lookup(u.GroupVersionKind().GroupKind())
	m, found, err := unstructured.NestedMap(u.Object, append(slices.Clone(info.PodTemplate), "spec")...)
	if err != nil || !found {
		t.Fatalf("%s: no pod spec (%v)", strategy.RefOf(u), err)
	}
	spec := &corev1.PodSpec{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, spec); err != nil {
		t.Fatal(err)
	}
	return spec
}

func secretNames(spec *corev1.PodSpec) []string {
	var out []string
	for _, r := range spec.ImagePullSecrets {
		out = append(out, r.Name)
	}
	return out
}

func mustInfo(t *testing.T, group, kind string) kinds.Info {
	t.Helper()
	for _, info := range kinds.All() {
		if info.GroupKind.Group == group && info.GroupKind.Kind == kind {
			return info
		}
	}
	t.Fatalf("kind %s.%s not in the table", kind, group)
	return kinds.Info{}
}

// Every kind of the table with a pod template is placed; which placement
// comes from the role; kinds without pods are left alone.
func TestApplyEveryPodTemplateKind(t *testing.T) {
	spec := testSpec()
	s := &strategy.Strategy{}
	for _, info := range kinds.All() {
		if info.PodTemplate == nil {
			continue
		}
		s.Objects = append(s.Objects, workload(info, "w-"+strings.ToLower(info.GroupKind.Kind), map[string]any{"containers": []any{}}))
	}
	if len(s.Objects) < 4 {
		t.Fatalf("only %d kinds with pod templates in the table", len(s.Objects))
	}
	svc := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "svc", "namespace": "ns"}, "spec": map[string]any{}}}
	svcBefore := svc.DeepCopy()
	s.Objects = append(s.Objects, svc)

	if err := placement.Apply(s, spec); err != nil {
		t.Fatal(err)
	}
	for _, o := range s.Objects {
		if o == svc {
			if !equality.Semantic.DeepEqual(o, svcBefore) {
				t.Errorf("service changed: %v", o.Object)
			}
			continue
		}
		t.Run(o.GetKind(), func(t *testing.T) {
			want := spec.Placement.Infra
			if o.GetKind() == "DaemonSet" {
				want = spec.Placement.Workloads
			}
			checkPlaced(t, podSpecOf(t, o), want, spec.ImagePullSecrets)
		})
	}
}

func checkPlaced(t *testing.T, got *corev1.PodSpec, want *identity.NodePlacement, secrets []string) {
	t.Helper()
	if !slices.Equal(secretNames(got), secrets) {
		t.Errorf("imagePullSecrets %v, want %v", secretNames(got), secrets)
	}
	if !maps.Equal(got.NodeSelector, want.NodeSelector) {
		t.Errorf("nodeSelector %v, want %v", got.NodeSelector, want.NodeSelector)
	}
	if !equality.Semantic.DeepEqual(got.Tolerations, want.Tolerations) {
		t.Errorf("tolerations %v, want %v", got.Tolerations, want.Tolerations)
	}
	if !equality.Semantic.DeepEqual(got.Affinity, want.Affinity) {
		t.Errorf("affinity %v, want %v", got.Affinity, want.Affinity)
	}
}

// The role annotation and the Roles map decide, not the kind.
func TestApplyPlacesByRole(t *testing.T) {
	deploy := mustInfo(t, "apps", "Deployment")
	ds := mustInfo(t, "apps", "DaemonSet")
	annotated := workload(deploy, "agent", map[string]any{})
	annotated.SetAnnotations(map[string]string{metakeys.RoleAnnotation: string(generate.RoleHandler)})
	apiDS := workload(ds, "api-ds", map[string]any{})
	apiDS.SetAnnotations(map[string]string{metakeys.RoleAnnotation: string(generate.RoleAPI)})
	named := workload(deploy, "my-handler", map[string]any{})
	kv := workload(ds, "virt-handler", map[string]any{})
	s := &strategy.Strategy{Objects: []*unstructured.Unstructured{annotated, apiDS, named, kv}}
	spec := testSpec()
	spec.Roles = map[string]generate.Role{"my-handler": generate.RoleHandler}
	if err := placement.Apply(s, spec); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		obj  *unstructured.Unstructured
		want *identity.NodePlacement
	}{
		{annotated, spec.Placement.Workloads},
		{apiDS, spec.Placement.Infra},
		{named, spec.Placement.Workloads},
		{kv, spec.Placement.Workloads},
	} {
		if got := podSpecOf(t, tc.obj); !maps.Equal(got.NodeSelector, tc.want.NodeSelector) {
			t.Errorf("%s: nodeSelector %v, want %v", tc.obj.GetName(), got.NodeSelector, tc.want.NodeSelector)
		}
	}
}

// What a pod spec has already is kept: selectors merged (the placement
// wins), tolerations and secrets added once, order kept; the affinities
// merged. Applying twice is applying once.
func TestApplyMergesAndIsIdempotent(t *testing.T) {
	deploy := mustInfo(t, "apps", "Deployment")
	pod := map[string]any{
		"nodeSelector":     map[string]any{"kubernetes.io/os": "linux", "shared": "strategy"},
		"tolerations":      []any{map[string]any{"key": "CriticalAddonsOnly", "operator": "Exists"}, map[string]any{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}},
		"imagePullSecrets": []any{map[string]any{"name": "own"}, map[string]any{"name": "pull-b"}, map[string]any{"name": "own"}},
		"affinity":         map[string]any{"podAntiAffinity": map[string]any{}},
		"containers":       []any{map[string]any{"name": "c", "image": "i"}},
	}
	obj := workload(deploy, "virt-api", pod)
	s := &strategy.Strategy{Objects: []*unstructured.Unstructured{obj}}
	spec := testSpec()
	if err := placement.Apply(s, spec); err != nil {
		t.Fatal(err)
	}
	once := obj.DeepCopy()
	got := podSpecOf(t, obj)
	if want := []string{"own", "pull-b", "pull-a"}; !slices.Equal(secretNames(got), want) {
		t.Errorf("imagePullSecrets %v, want %v", secretNames(got), want)
	}
	if want := map[string]string{"kubernetes.io/os": "linux", "shared": "infra", "infra": "yes"}; !maps.Equal(got.NodeSelector, want) {
		t.Errorf("nodeSelector %v, want %v", got.NodeSelector, want)
	}
	if want := []corev1.Toleration{{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists}, infraToleration}; !equality.Semantic.DeepEqual(got.Tolerations, want) {
		t.Errorf("tolerations %v, want %v", got.Tolerations, want)
	}
	if want := (&corev1.Affinity{NodeAffinity: infraAffinity.NodeAffinity, PodAntiAffinity: &corev1.PodAntiAffinity{}}); !equality.Semantic.DeepEqual(got.Affinity, want) {
		t.Errorf("affinity %v, want %v", got.Affinity, want)
	}
	if len(got.Containers) != 1 || got.Containers[0].Image != "i" {
		t.Errorf("containers changed: %v", got.Containers)
	}

	if err := placement.Apply(s, spec); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(once.Object, obj.Object) {
		t.Errorf("a second apply changed the object:\nonce  %v\ntwice %v", once.Object, obj.Object)
	}
	// The serialised form, which is what the applier hashes, is stable too.
	a, _ := (&strategy.Strategy{Objects: []*unstructured.Unstructured{once}}).Serialize()
	b, _ := s.Serialize()
	if string(a) != string(b) {
		t.Errorf("serialised forms differ:\n%s\n%s", a, b)
	}
}

func TestApplyZeroSpecChangesNothing(t *testing.T) {
	obj := workload(mustInfo(t, "apps", "Deployment"), "d", map[string]any{"containers": []any{}})
	before := obj.DeepCopy()
	for _, spec := range []placement.Spec{{}, {Placement: &identity.Placement{Infra: &identity.NodePlacement{}}}} {
		if err := placement.Apply(&strategy.Strategy{Objects: []*unstructured.Unstructured{obj}}, spec); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(before.Object, obj.Object) {
			t.Fatalf("zero spec %+v changed the object: %v", spec, obj.Object)
		}
	}
}

func TestApplyErrorsNameTheObject(t *testing.T) {
	deploy := mustInfo(t, "apps", "Deployment")
	noTemplate := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
	noTemplate.SetGroupVersionKind(deploy.GroupVersionKind())
	noTemplate.SetName("bare")
	badTolerations := workload(deploy, "bad", map[string]any{"tolerations": "nope"})
	for _, obj := range []*unstructured.Unstructured{noTemplate, badTolerations} {
		err := placement.Apply(&strategy.Strategy{Objects: []*unstructured.Unstructured{obj}}, testSpec())
		if err == nil || !strings.Contains(err.Error(), obj.GetName()) {
			t.Errorf("%s: error %v, want one naming the object", obj.GetName(), err)
		}
	}
}

// On KubeVirt's own v1.9.0 strategy: virt-handler gets the workloads
// placement, every Deployment the infra placement, every pod template the
// pull secrets; nothing without pods changes.
func TestApplyKubeVirtStrategy(t *testing.T) {
	s, _, err := strategy.Parse(kubevirtdata.Read(t, "v1.9.0", "manifests.yaml"), strategy.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := map[strategy.ObjectRef]*unstructured.Unstructured{}
	for ref, o := range s.Index() {
		before[ref] = o.DeepCopy()
	}
	spec := testSpec()
	if err := placement.Apply(s, spec); err != nil {
		t.Fatal(err)
	}
	var deployments []string
	handler := false
	for _, o := range s.Objects {
		info, _ := kinds.Lookup(o.GroupVersionKind().GroupKind())
		if info.PodTemplate == nil {
			if !equality.Semantic.DeepEqual(o.Object, before[strategy.RefOf(o)].Object) {
				t.Errorf("%s has no pods but changed", strategy.RefOf(o))
			}
			continue
		}
		got := podSpecOf(t, o)
		was := podSpecOf(t, before[strategy.RefOf(o)])
		want := spec.Placement.Infra
		switch o.GetKind() {
		case "DaemonSet":
			if o.GetName() != "virt-handler" {
				t.Errorf("unexpected DaemonSet %s", o.GetName())
			}
			handler = true
			want = spec.Placement.Workloads
		case "Deployment":
			deployments = append(deployments, o.GetName())
		}
		if !slices.Equal(secretNames(got), spec.ImagePullSecrets) {
			t.Errorf("%s: imagePullSecrets %v", o.GetName(), secretNames(got))
		}
		for k, v := range want.NodeSelector {
			if got.NodeSelector[k] != v {
				t.Errorf("%s: nodeSelector %v lacks %s=%s", o.GetName(), got.NodeSelector, k, v)
			}
		}
		for k, v := range was.NodeSelector {
			if _, over := want.NodeSelector[k]; !over && got.NodeSelector[k] != v {
				t.Errorf("%s: nodeSelector %v lost %s=%s", o.GetName(), got.NodeSelector, k, v)
			}
		}
		if wantTol := append(slices.Clone(was.Tolerations), want.Tolerations...); !equality.Semantic.DeepEqual(got.Tolerations, wantTol) {
			t.Errorf("%s: tolerations %v, want %v", o.GetName(), got.Tolerations, wantTol)
		}
		checkAffinityMerged(t, o.GetName(), got.Affinity, was.Affinity, want.Affinity)
		if !equality.Semantic.DeepEqual(got.Containers, was.Containers) {
			t.Errorf("%s: containers changed", o.GetName())
		}
	}
	if !handler {
		t.Error("no virt-handler DaemonSet")
	}
	for _, name := range []string{"virt-api", "virt-controller", "virt-exportproxy"} {
		if !slices.Contains(deployments, name) {
			t.Errorf("deployment %s not placed (placed: %v)", name, deployments)
		}
	}
	// The result is still a valid strategy: it serialises and parses back.
	text, err := s.Serialize()
	if err != nil {
		t.Fatal(err)
	}
	back, _, err := strategy.Parse(text, strategy.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := placement.Apply(back, spec); err != nil {
		t.Fatal(err)
	}
	if text2, _ := back.Serialize(); string(text2) != string(text) {
		t.Error("applying to the parsed result changed it: not idempotent")
	}
}

// The sample product gets its placement the same way: the generator leaves
// pods unplaced, Apply places them by role.
func TestApplySampleProduct(t *testing.T) {
	cfg := &identity.Config{Namespace: "sample-system", Registry: "registry.example/sample", Version: "v1.2.0"}
	s, err := generate.Sample(cfg, generate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	spec := testSpec()
	if err := placement.Apply(s, spec); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, o := range s.Objects {
		info, _ := kinds.Lookup(o.GroupVersionKind().GroupKind())
		if info.PodTemplate == nil {
			continue
		}
		n++
		want := spec.Placement.Infra
		if o.GetAnnotations()[metakeys.RoleAnnotation] == string(generate.RoleHandler) {
			want = spec.Placement.Workloads
		}
		checkPlaced(t, podSpecOf(t, o), want, spec.ImagePullSecrets)
	}
	if n != 3 {
		t.Errorf("%d workloads, want 3", n)
	}
}

// checkAffinityMerged: the pod keeps every rule it had (a product's
// anti-affinity between replicas, its os/arch node requirements) and gets
// every rule of the placement; each required node term holds the
// requirements of both.
func checkAffinityMerged(t *testing.T, name string, got, was, add *corev1.Affinity) {
	t.Helper()
	if add == nil {
		if !equality.Semantic.DeepEqual(got, was) {
			t.Errorf("%s: affinity changed without a placement affinity", name)
		}
		return
	}
	if got == nil {
		t.Fatalf("%s: no affinity after the merge", name)
	}
	if add.PodAntiAffinity != nil && got.PodAntiAffinity == nil {
		t.Errorf("%s: the placement's pod anti-affinity is missing", name)
	}
	if add.NodeAffinity == nil || add.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return
	}
	if got.NodeAffinity == nil || got.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		t.Fatalf("%s: no required node affinity after the merge: %v", name, got)
	}
	contains := func(list []corev1.NodeSelectorRequirement, r corev1.NodeSelectorRequirement) bool {
		return slices.ContainsFunc(list, func(x corev1.NodeSelectorRequirement) bool { return equality.Semantic.DeepEqual(x, r) })
	}
	for _, term := range got.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, r := range add.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions {
			if !contains(term.MatchExpressions, r) {
				t.Errorf("%s: required node term %v lacks the placement's %v", name, term, r)
			}
		}
	}
	if was != nil && was.NodeAffinity != nil && was.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, wt := range was.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, r := range wt.MatchExpressions {
				found := false
				for _, term := range got.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
					found = found || contains(term.MatchExpressions, r)
				}
				if !found {
					t.Errorf("%s: the pod's own node requirement %v was lost", name, r)
				}
			}
		}
	}
	if was != nil && was.PodAntiAffinity != nil {
		for _, w := range was.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			if got.PodAntiAffinity == nil || !slices.ContainsFunc(got.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution, func(x corev1.WeightedPodAffinityTerm) bool { return equality.Semantic.DeepEqual(x, w) }) {
				t.Errorf("%s: the pod's anti-affinity %v was lost", name, w)
			}
		}
	}
}

// Required node affinities are ANDed: each of the pod's terms with each of
// the placement's; a term that only narrows another is dropped, so a
// second merge changes nothing.
func TestRequiredNodeAffinitiesAreCombined(t *testing.T) {
	req := func(key, value string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{value}}
	}
	term := func(rs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: rs}
	}
	required := func(ts ...corev1.NodeSelectorTerm) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: ts}}}
	}
	deploy := mustInfo(t, "apps", "Deployment")
	podAffinity, err := runtime.DefaultUnstructuredConverter.ToUnstructured(required(term(req("os", "linux"))))
	if err != nil {
		t.Fatal(err)
	}
	obj := workload(deploy, "virt-api", map[string]any{"affinity": podAffinity, "containers": []any{map[string]any{"name": "c", "image": "i"}}})
	s := &strategy.Strategy{Objects: []*unstructured.Unstructured{obj}}
	spec := placement.Spec{Placement: &identity.Placement{Infra: &identity.NodePlacement{Affinity: required(term(req("zone", "a")), term(req("zone", "b")))}}}
	for range 2 {
		if err := placement.Apply(s, spec); err != nil {
			t.Fatal(err)
		}
	}
	want := required(term(req("os", "linux"), req("zone", "a")), term(req("os", "linux"), req("zone", "b")))
	if got := podSpecOf(t, obj).Affinity; !equality.Semantic.DeepEqual(got.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution, want.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution) {
		t.Errorf("required node affinity after two merges:\n got %v\nwant %v", got.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution, want.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
	}
}
