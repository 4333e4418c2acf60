package apply_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/apply/applytest"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

var testID = strategy.Identity{Version: "v1.0.0", Registry: "example.com/r", Identifier: "abc"}

func toUnstructured(t *testing.T, obj runtime.Object, gvk schema.GroupVersionKind) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return strategy.Stripped(u)
}

func deployment(t *testing.T, ns, name, image string, ports ...corev1.ContainerPort) *unstructured.Unstructured {
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: image, Ports: ports}}},
			},
		},
	}
	return toUnstructured(t, d, appsv1.SchemeGroupVersion.WithKind("Deployment"))
}

func configMap(t *testing.T, ns, name string, data map[string]string) *unstructured.Unstructured {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: data}
	return toUnstructured(t, cm, corev1.SchemeGroupVersion.WithKind("ConfigMap"))
}

// testOwner is the installation of these tests' objects.
var testOwner = inventory.Owner{Namespace: "apply-test", Name: "test"}

func newApplier(t *testing.T, env *testenv.Env, opts apply.Options) (*apply.Applier, *applytest.Recorder) {
	t.Helper()
	cfg, rec := applytest.Record(env.Config)
	a, err := apply.NewForConfig(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return a, rec
}

func mustApply(t *testing.T, a *apply.Applier, obj *unstructured.Unstructured, want apply.Action) apply.Result {
	t.Helper()
	res, err := a.Apply(t.Context(), obj)
	if err != nil {
		t.Fatalf("apply %s: %v", strategy.RefOf(obj), err)
	}
	if res.Action != want {
		t.Fatalf("apply %s: action %s (%s), want %s", strategy.RefOf(obj), res.Action, res.Reason, want)
	}
	return res
}

func TestApplyCreateSkipUnchangedAndRepairDrift(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := testenv.New(t)
	ns := env.Namespace(ctx, t)
	a, rec := newApplier(t, env, apply.Options{Owner: testOwner, Identity: testID})

	d := deployment(t, ns, "web", "example.com/r/web:v1")
	cm := configMap(t, ns, "settings", map[string]string{"a": "1"})
	mustApply(t, a, d, apply.ActionCreate)
	mustApply(t, a, cm, apply.ActionCreate)

	live, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !testOwner.Owns(live.Labels) || live.Annotations[metakeys.InstallStrategyVersionAnnotation] != "v1.0.0" ||
		live.Spec.Template.Annotations[metakeys.InstallStrategyIdentifierAnnotation] != "abc" || live.Spec.Template.Annotations[metakeys.InstallStrategyRegistryAnnotation] != "example.com/r" {
		t.Errorf("identity not injected: labels %v annotations %v template annotations %v", live.Labels, live.Annotations, live.Spec.Template.Annotations)
	}

	rec.Reset()
	mustApply(t, a, d, apply.ActionUnchanged)
	mustApply(t, a, cm, apply.ActionUnchanged)
	if w := rec.Writes(); len(w) != 0 {
		t.Errorf("no-op resync wrote %v", w)
	}

	// Drift: someone edits the image and deletes the ConfigMap.
	patch := []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"main","image":"evil:latest"}]}}}}`)
	if _, err := env.Kube.AppsV1().Deployments(ns).Patch(ctx, "web", types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := env.Kube.CoreV1().ConfigMaps(ns).Delete(ctx, "settings", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	res := mustApply(t, a, d, apply.ActionUpdate)
	if !strings.Contains(res.Reason, "drift at .spec.template.spec.containers[0].image") {
		t.Errorf("reason %q", res.Reason)
	}
	mustApply(t, a, cm, apply.ActionCreate)
	live, err = env.Kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if img := live.Spec.Template.Spec.Containers[0].Image; img != "example.com/r/web:v1" {
		t.Errorf("image after repair: %s", img)
	}

	// A new target identity is an update of object and template.
	a2 := a.WithOptions(apply.Options{Owner: testOwner, Identity: strategy.Identity{Version: "v1.1.0", Registry: "example.com/r", Identifier: "def"}})
	res = mustApply(t, a2, d, apply.ActionUpdate)
	if res.Reason != "strategy changed" {
		t.Errorf("reason %q", res.Reason)
	}
	live, _ = env.Kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if live.Spec.Template.Annotations[metakeys.InstallStrategyVersionAnnotation] != "v1.1.0" {
		t.Errorf("template annotations %v", live.Spec.Template.Annotations)
	}
}

func TestApplyConflictWithUnmanagedObject(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := testenv.New(t)
	ns := env.Namespace(ctx, t)
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns, Labels: map[string]string{metakeys.ManagedByLabel: "someone-else"}}, Data: map[string]string{"a": "theirs"}}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, theirs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a, rec := newApplier(t, env, apply.Options{Owner: testOwner, Identity: testID})
	res, err := a.Apply(ctx, configMap(t, ns, "settings", map[string]string{"a": "ours"}))
	var conflict *apply.ConflictError
	if !errors.As(err, &conflict) || res.Action != apply.ActionConflict || conflict.ManagedBy != "someone-else" {
		t.Fatalf("apply: %v, %+v", err, res)
	}
	if want := `ConfigMap/` + ns + `/settings exists and is managed by someone else (managed-by "someone-else"); not overwritten (adopt it to take it over)`; err.Error() != want {
		t.Errorf("conflict error %q, want %q", err, want)
	}
	if w := rec.Writes(); len(w) != 0 {
		t.Errorf("conflict wrote %v", w)
	}
	live, _ := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
	if live.Data["a"] != "theirs" {
		t.Errorf("unmanaged object overwritten: %v", live.Data)
	}

	adopt := a.WithOptions(apply.Options{Owner: testOwner, Identity: testID, Adopt: apply.AdoptAll})
	res = mustApply(t, adopt, configMap(t, ns, "settings", map[string]string{"a": "ours"}), apply.ActionUpdate)
	if !res.Adopted || !strings.Contains(res.Reason, "adopted from managed-by someone-else") {
		t.Errorf("adoption result %+v", res)
	}
	live, _ = env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
	if live.Data["a"] != "ours" || !testOwner.Owns(live.Labels) {
		t.Errorf("not adopted: %v %v", live.Labels, live.Data)
	}

	// Another installation's object is never adopted.
	other := a.WithOptions(apply.Options{Owner: inventory.Owner{Namespace: ns, Name: "other"}, Identity: testID, Adopt: apply.AdoptAll})
	res, err = other.Apply(ctx, configMap(t, ns, "settings", map[string]string{"a": "other"}))
	if !errors.As(err, &conflict) || conflict.Installation != testOwner.Namespace+"/"+testOwner.Name {
		t.Fatalf("other installation's apply: %v, %+v", err, res)
	}
	if want := "belongs to installation " + testOwner.String(); !strings.Contains(err.Error(), want) {
		t.Errorf("conflict %q does not say %q", err, want)
	}

	// Released (its installation is gone, pkg/engine's claim check):
	// taken over, but only while its labels still name that installation.
	ref := strategy.ObjectRef{Kind: "ConfigMap", Namespace: ns, Name: "settings"}
	otherOwner := inventory.Owner{Namespace: ns, Name: "other"}
	stale := a.WithOptions(apply.Options{Owner: otherOwner, Identity: testID, Released: map[strategy.ObjectRef]string{ref: ns + "/someone-else"}})
	if _, err = stale.Apply(ctx, configMap(t, ns, "settings", map[string]string{"a": "other"})); !errors.As(err, &conflict) {
		t.Fatalf("released for another installation: %v, want a conflict", err)
	}
	released := a.WithOptions(apply.Options{Owner: otherOwner, Identity: testID, Released: map[strategy.ObjectRef]string{ref: testOwner.String()}})
	res = mustApply(t, released, configMap(t, ns, "settings", map[string]string{"a": "other"}), apply.ActionUpdate)
	if want := "taken over from installation " + testOwner.String() + ", which no longer exists"; res.Reason != want {
		t.Errorf("take-over reason %q, want %q", res.Reason, want)
	}
	live, _ = env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
	if live.Data["a"] != "other" || !otherOwner.Owns(live.Labels) {
		t.Errorf("not taken over: %v %v", live.Labels, live.Data)
	}
}

// An object installed with `kubectl apply --server-side` (field manager
// kubectl) is adopted: its fields become ours, so a later strategy that
// drops one removes it.
func TestAdoptTakesFieldOwnership(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := testenv.New(t)
	ns := env.Namespace(ctx, t)
	theirs := configMap(t, ns, "settings", map[string]string{"a": "theirs", "b": "extra"})
	if _, err := env.Dynamic.Resource(corev1.SchemeGroupVersion.WithResource("configmaps")).Namespace(ns).Apply(ctx, "settings", theirs, metav1.ApplyOptions{FieldManager: "kubectl"}); err != nil {
		t.Fatal(err)
	}
	a, _ := newApplier(t, env, apply.Options{Owner: testOwner, Identity: testID, Adopt: apply.AdoptAll})
	res := mustApply(t, a, configMap(t, ns, "settings", map[string]string{"a": "ours"}), apply.ActionUpdate)
	if !res.Adopted || !strings.Contains(res.Reason, "field managers kubectl") {
		t.Errorf("adoption result %+v", res)
	}
	live, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range live.ManagedFields {
		if f.Manager != metakeys.FieldManager {
			t.Errorf("field manager %s still owns fields after adoption", f.Manager)
		}
	}
	// The next strategy drops b: server-side apply removes it, since it is ours.
	mustApply(t, a.WithOptions(apply.Options{Owner: testOwner, Identity: strategy.Identity{Version: "v2"}}), configMap(t, ns, "settings", map[string]string{"a": "ours"}), apply.ActionUpdate)
	live, _ = env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
	if _, ok := live.Data["b"]; ok || live.Data["a"] != "ours" {
		t.Errorf("after the next apply data is %v, want only a=ours", live.Data)
	}
}

// A workload that another installer placed (virt-operator: a required
// control-plane affinity and its tolerations) is adopted with a new pod
// template: the template becomes the strategy's, not the strategy's with
// the previous installer's affinity left beside the strategy's
// tolerations (a pod spec that schedules nowhere).
func TestAdoptWritingTheTemplateLeavesNoPreviousPlacement(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := testenv.New(t)
	ns := env.Namespace(ctx, t)
	theirs := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(deployment(t, ns, "controller", "example.com/r/controller:v1").Object, theirs); err != nil {
		t.Fatal(err)
	}
	theirs.Labels = map[string]string{metakeys.ManagedByLabel: "virt-operator"}
	theirs.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists},
		{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	theirs.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.NodeSelectorOpExists}}}}}}}
	if _, err := env.Kube.AppsV1().Deployments(ns).Create(ctx, theirs, metav1.CreateOptions{FieldManager: "virt-operator"}); err != nil {
		t.Fatal(err)
	}
	ours := deployment(t, ns, "controller", "example.com/r/controller:v2")
	if err := unstructured.SetNestedSlice(ours.Object, []any{map[string]any{"key": "CriticalAddonsOnly", "operator": "Exists"}}, "spec", "template", "spec", "tolerations"); err != nil {
		t.Fatal(err)
	}
	a, _ := newApplier(t, env, apply.Options{Owner: testOwner, Identity: testID, Adopt: apply.AdoptAll})
	if res := mustApply(t, a, ours, apply.ActionUpdate); !res.Adopted {
		t.Errorf("not adopted: %+v", res)
	}
	live, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, "controller", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := live.Spec.Template.Spec
	if pod.Affinity != nil || len(pod.Tolerations) != 1 || pod.Containers[0].Image != "example.com/r/controller:v2" {
		t.Errorf("adopted template: affinity %+v, tolerations %+v, image %s; want the strategy's (no affinity, one toleration, v2)", pod.Affinity, pod.Tolerations, pod.Containers[0].Image)
	}
}

func TestApplyFallsBackWhenServerSideApplyRejects(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := testenv.New(t)
	ns := env.Namespace(ctx, t)
	a, rec := newApplier(t, env, apply.Options{Owner: testOwner, Identity: testID})
	// The same containerPort twice, as in KubeVirt's virt-api.
	ports := []corev1.ContainerPort{{Name: "https", ContainerPort: 8443, Protocol: corev1.ProtocolTCP}, {Name: "metrics", ContainerPort: 8443, Protocol: corev1.ProtocolTCP}}
	d := deployment(t, ns, "api", "example.com/r/api:v1", ports...)
	res := mustApply(t, a, d, apply.ActionCreate)
	if !res.Fallback {
		t.Errorf("expected a fallback, got %+v", res)
	}
	rec.Reset()
	mustApply(t, a, d, apply.ActionUnchanged)
	if w := rec.Writes(); len(w) != 0 {
		t.Errorf("no-op resync wrote %v", w)
	}
	d2 := deployment(t, ns, "api", "example.com/r/api:v2", ports...)
	res = mustApply(t, a, d2, apply.ActionUpdate)
	if !res.Fallback {
		t.Errorf("expected a fallback, got %+v", res)
	}
	live, _ := env.Kube.AppsV1().Deployments(ns).Get(ctx, "api", metav1.GetOptions{})
	if img := live.Spec.Template.Spec.Containers[0].Image; img != "example.com/r/api:v2" {
		t.Errorf("image %s", img)
	}
}

func TestApplyRecreatesOnImmutableFieldChange(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := testenv.New(t)
	ns := env.Namespace(ctx, t)
	a, _ := newApplier(t, env, apply.Options{Owner: testOwner, Identity: testID})
	d := deployment(t, ns, "web", "example.com/r/web:v1")
	first := mustApply(t, a, d, apply.ActionCreate)

	// A new selector (immutable in apps/v1).
	d2 := d.DeepCopy()
	labels := map[string]any{"app": "web", "tier": "front"}
	_ = unstructured.SetNestedMap(d2.Object, labels, "spec", "selector", "matchLabels")
	_ = unstructured.SetNestedMap(d2.Object, labels, "spec", "template", "metadata", "labels")
	res := mustApply(t, a, d2, apply.ActionRecreate)
	if !strings.Contains(res.Reason, "immutable") {
		t.Errorf("reason %q", res.Reason)
	}
	live, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if live.UID == first.Object.GetUID() || live.Spec.Selector.MatchLabels["tier"] != "front" {
		t.Errorf("not recreated: uid %s selector %v", live.UID, live.Spec.Selector)
	}
}

func TestApplySkipsKindsNotServed(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	a, rec := newApplier(t, env, apply.Options{Owner: testOwner, Identity: testID})
	route := &unstructured.Unstructured{}
	route.SetAPIVersion("route.openshift.io/v1")
	route.SetKind("Route")
	route.SetNamespace("default")
	route.SetName("r")
	res := mustApply(t, a, route, apply.ActionSkip)
	if !strings.Contains(res.Reason, "not served") {
		t.Errorf("reason %q", res.Reason)
	}
	if w := rec.Writes(); len(w) != 0 {
		t.Errorf("wrote %v", w)
	}
}

// LeavePodTemplates leaves a workload's pod template without the identity
// annotations (taking running workloads over restarts no pod); by default
// they are put on it, and on the object either way.
func TestPrepareLeavePodTemplates(t *testing.T) {
	dep := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "apps"},
		"spec":     map[string]any{"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "web"}}}},
	}}
	id := strategy.Identity{Version: "v1"}
	owner := inventory.Owner{Namespace: "apps", Name: "web", Kind: inventory.KindPlugin}
	for _, leave := range []bool{false, true} {
		a := apply.New(nil, nil, apply.Options{Identity: id, Owner: owner, LeavePodTemplates: leave})
		got, err := a.Prepare(dep, nil)
		if err != nil {
			t.Fatal(err)
		}
		tmpl, _, _ := unstructured.NestedStringMap(got.Object, "spec", "template", "metadata", "annotations")
		if (tmpl[metakeys.InstallStrategyVersionAnnotation] == "v1") == leave {
			t.Errorf("LeavePodTemplates %v: pod template annotations %v", leave, tmpl)
		}
		if got.GetAnnotations()[metakeys.InstallStrategyVersionAnnotation] != "v1" {
			t.Errorf("LeavePodTemplates %v: object annotations %v", leave, got.GetAnnotations())
		}
	}
}

// Prepare (and PrepareShared, and the kept template of an adoption)
// leaves the strategy's object as it was: the prepared copy shares the
// object's values below its top level and metadata, so every field it
// changes (labels, annotations, the pod template's annotations, a
// Secret's stringData, status and server fields) must be changed on its
// own maps. The strategy's objects are held across rollouts; a change
// leaking into them would be applied by every later one.
func TestPrepareLeavesTheStrategyObjectAlone(t *testing.T) {
	objs := []*unstructured.Unstructured{
		{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "web", "namespace": "apps", "labels": map[string]any{"app": "web"},
				"annotations": map[string]any{"note": "x"}, "resourceVersion": "7", "uid": "u", "creationTimestamp": "2026-01-01T00:00:00Z"},
			"spec": map[string]any{"replicas": int64(2), "template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": "web"}, "annotations": map[string]any{"a": "b"}, "creationTimestamp": nil},
				"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": "i"}}}}},
			"status": map[string]any{"replicas": int64(2)},
		}},
		{Object: map[string]any{
			"apiVersion": "batch/v1", "kind": "CronJob", "metadata": map[string]any{"name": "tick", "namespace": "apps"},
			"spec": map[string]any{"schedule": "* * * * *", "jobTemplate": map[string]any{"spec": map[string]any{"template": map[string]any{
				"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "i"}}}}}}},
		}},
		{Object: map[string]any{
			"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s", "namespace": "apps"},
			"data": map[string]any{"a": "YQ=="}, "stringData": map[string]any{"b": "b"},
		}},
		{Object: map[string]any{
			"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "apps", "annotations": map[string]any{metakeys.ImplicitAnnotation: "true"}},
		}},
	}
	owner := inventory.Owner{Namespace: "apps", Name: "web", Kind: inventory.KindPlugin}
	id := strategy.Identity{Version: "v1", Registry: "r", Identifier: "i"}
	for _, obj := range objs {
		before := obj.DeepCopy()
		for _, a := range []*apply.Applier{
			apply.New(nil, nil, apply.Options{Identity: id, Owner: owner}),
			apply.New(nil, nil, apply.Options{Identity: id, Owner: owner, LeavePodTemplates: true}),
			apply.New(nil, nil, apply.Options{Identity: id, Owner: owner, Adopt: apply.AdoptAll}),
		} {
			got, err := a.Prepare(obj, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got.GetAnnotations()[metakeys.AppliedHashAnnotation] == "" && obj.GetKind() != "Namespace" {
				t.Errorf("%s: prepared without the applied hash", obj.GetKind())
			}
			// An adopted object: its live copy, unlabelled, with the
			// template the strategy has (kept).
			live := obj.DeepCopy()
			live.SetLabels(nil)
			if _, err := a.Prepare(obj, live); err != nil {
				t.Fatal(err)
			}
			apply.PrepareShared(obj)
			if !reflect.DeepEqual(obj.Object, before.Object) {
				t.Fatalf("%s: Prepare changed the strategy's object:\n%v\nwas\n%v", obj.GetKind(), obj.Object, before.Object)
			}
		}
	}
	// What strip drops and what prepare adds are on the prepared copy.
	got, _ := apply.Prepare(objs[0], id, owner)
	if _, has := got.Object["status"]; has || got.GetResourceVersion() != "" || got.GetUID() != "" {
		t.Errorf("prepared Deployment keeps server fields: %v", got.Object)
	}
	tmplAnn, _, _ := unstructured.NestedStringMap(got.Object, "spec", "template", "metadata", "annotations")
	if tmplAnn[metakeys.InstallStrategyVersionAnnotation] != "v1" || tmplAnn["a"] != "b" {
		t.Errorf("prepared pod template annotations %v", tmplAnn)
	}
	sec, _ := apply.Prepare(objs[2], id, owner)
	if data, _, _ := unstructured.NestedStringMap(sec.Object, "data"); data["a"] != "YQ==" || data["b"] != "Yg==" || sec.Object["stringData"] != nil {
		t.Errorf("prepared Secret: %v", sec.Object)
	}
}
