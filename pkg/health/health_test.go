package health_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/apply/applytest"
	"github.com/installstrategy/installstrategy/pkg/health"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

var id = strategy.Identity{Version: "v1.0.0", Registry: "example.com/r", Identifier: "abc"}

func workload(t *testing.T, kind, ns, name string, podLabels map[string]string) *unstructured.Unstructured {
	labels := map[string]string{"app": name}
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "example.com/r/" + name + ":v1"}}},
	}
	for k, v := range podLabels {
		tmpl.Labels[k] = v
	}
	var obj runtime.Object
	switch kind {
	case "Deployment":
		obj = &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}
	case "DaemonSet":
		obj = &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind(kind))
	return strategy.Stripped(u)
}

func setup(t *testing.T) (*testenv.Env, string, *apply.Applier, *health.Checker) {
	ctx := t.Context()
	env := testenv.New(t)
	ns := env.Namespace(ctx, t)
	a, err := apply.NewForConfig(env.Config, apply.Options{Identity: id})
	if err != nil {
		t.Fatal(err)
	}
	return env, ns, a, &health.Checker{Kube: env.Kube, Identity: id}
}

func TestWorkloadsBecomeRolledOver(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, ns, a, c := setup(t)
	objs := []*unstructured.Unstructured{workload(t, "Deployment", ns, "web", nil), workload(t, "DaemonSet", ns, "agent", nil)}
	for _, o := range objs {
		if _, err := a.Apply(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Wait(ctx, a.Get, objs, health.WaitOptions{Deadline: time.Minute, Interval: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}

	// A new target identity: not rolled over until the pods carry it.
	c2 := &health.Checker{Kube: c.Kube, Identity: strategy.Identity{Version: "v2"}}
	live, _ := a.Get(ctx, objs[0])
	st, err := c2.Check(ctx, live)
	if err != nil || st.Ready {
		t.Errorf("v2 check of v1 pods: %+v, %v", st, err)
	}
}

func TestCrashLoopingPodsAreDegraded(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, ns, a, c := setup(t)
	d := workload(t, "Deployment", ns, "web", testenv.BehaviourLabels(testenv.BehaviourCrashLoop))
	if _, err := a.Apply(ctx, d); err != nil {
		t.Fatal(err)
	}
	// Pod lists spaced as the reconciler spaces them still find it.
	c.PodsEvery = time.Second
	err := c.Wait(ctx, a.Get, []*unstructured.Unstructured{d}, health.WaitOptions{Deadline: time.Minute, Interval: 200 * time.Millisecond})
	var deg *health.DegradedError
	if !errors.As(err, &deg) || deg.Reason != health.ReasonFailed {
		t.Fatalf("wait: %v", err)
	}
	t.Log(err)
}

// A container without a readiness probe that crashes soon after each start
// is Ready between its crashes, and so is its workload's status. With
// VerifyPods its pods decide: a pod whose container restarted after a
// failed exit less than StableAfter ago is not ready, and a wait ends in
// the crash (Failed), never Ready.
func TestFlappingPodsAreNotReadyBetweenCrashes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env, ns, a, c := setup(t)
	d := workload(t, "Deployment", ns, "web", testenv.BehaviourLabels(testenv.BehaviourFlapping))
	if _, err := a.Apply(ctx, d); err != nil {
		t.Fatal(err)
	}
	c.VerifyPods = true
	// Ready again after a crash, and the Deployment's status says rolled
	// out: the moment a status check alone takes for healthy.
	var live *unstructured.Unstructured
	testenv.WaitFor(ctx, t, "the pod ready after a restart, the Deployment rolled out", func(ctx context.Context) (bool, string, error) {
		pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil || len(pods.Items) != 1 {
			return false, "", err
		}
		p := &pods.Items[0]
		if !testenv.PodReady(p) || p.Status.ContainerStatuses[0].RestartCount == 0 {
			return false, testenv.DescribePod(p), nil
		}
		dep, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil || !health.DeploymentRolledOut(dep) {
			return false, "deployment not rolled out", err
		}
		live, err = a.Get(ctx, d)
		return err == nil && live != nil, "", err
	})
	st, err := c.Check(ctx, live)
	if err != nil {
		t.Fatal(err)
	}
	// (It may have crashed again since: then it is Failed.)
	if st.Ready || !st.Failed && !strings.Contains(st.Reason, "restarted") {
		t.Errorf("a pod ready between crashes: %+v, want not ready (restarted ... ago after exit 1)", st)
	}
	err = c.Wait(ctx, a.Get, []*unstructured.Unstructured{d}, health.WaitOptions{Deadline: time.Minute, Interval: 200 * time.Millisecond})
	var deg *health.DegradedError
	if !errors.As(err, &deg) || deg.Reason != health.ReasonFailed {
		t.Fatalf("wait for a flapping Deployment: %v, want Failed", err)
	}
}

// A workload whose status says it is rolling out has its pods listed once
// per PodsEvery, not at every check; one whose status says it is rolled
// out, at every check (its pods decide); a negative PodsEvery never lists
// while rolling out.
func TestPodListsSpacedWhileRollingOut(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env, ns, a, _ := setup(t)
	cfg, rec := applytest.Record(env.Config)
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d := workload(t, "Deployment", ns, "web", nil)
	res, err := a.Apply(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	rolling := res.Object // as written: no status yet
	podLists := func() int {
		n := 0
		for _, r := range rec.Reads() {
			if strings.HasSuffix(r.Path, "/pods") {
				n++
			}
		}
		rec.Reset()
		return n
	}
	check := func(c *health.Checker, live *unstructured.Unstructured, times int) {
		t.Helper()
		for range times {
			if st, err := c.Check(ctx, live); err != nil || st.Ready {
				t.Fatalf("check: %+v, %v", st, err)
			}
		}
	}
	spaced := &health.Checker{Kube: kube, Identity: id, PodsEvery: time.Hour}
	check(spaced, rolling, 5)
	if n := podLists(); n != 0 {
		t.Errorf("5 checks of a rolling-out Deployment in its first PodsEvery listed pods %d times, want 0", n)
	}
	// Once a PodsEvery has passed since the first check, the pods are
	// listed, once per PodsEvery.
	soon := &health.Checker{Kube: kube, Identity: id, PodsEvery: time.Millisecond}
	check(soon, rolling, 1)
	time.Sleep(2 * time.Millisecond)
	check(soon, rolling, 1)
	if n := podLists(); n != 1 {
		t.Errorf("a check a PodsEvery after the first listed pods %d times, want 1", n)
	}
	// Rolled out by its status, but of another identity: the pods decide.
	done := rolling.DeepCopy()
	replicas := map[string]any{"observedGeneration": done.GetGeneration(), "replicas": int64(1), "updatedReplicas": int64(1), "readyReplicas": int64(1), "availableReplicas": int64(1)}
	done.Object["status"] = replicas
	other := &health.Checker{Kube: kube, Identity: strategy.Identity{Version: "v2"}, PodsEvery: time.Hour}
	check(other, done, 3)
	if n := podLists(); n != 3 {
		t.Errorf("3 checks of a Deployment rolled out by its status listed pods %d times, want 3", n)
	}
	never := &health.Checker{Kube: kube, Identity: id, PodsEvery: -1}
	check(never, rolling, 3)
	if n := podLists(); n != 0 {
		t.Errorf("PodsEvery < 0 listed pods %d times while rolling out", n)
	}
}

func TestProgressDeadline(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, ns, a, c := setup(t)
	d := workload(t, "Deployment", ns, "web", testenv.BehaviourLabels(testenv.BehaviourNeverReady))
	if _, err := a.Apply(ctx, d); err != nil {
		t.Fatal(err)
	}
	err := c.Wait(ctx, a.Get, []*unstructured.Unstructured{d}, health.WaitOptions{Deadline: 3 * time.Second, Interval: 200 * time.Millisecond})
	var deg *health.DegradedError
	if !errors.As(err, &deg) || deg.Reason != health.ReasonProgressDeadlineExceeded || len(deg.Objects) != 1 {
		t.Fatalf("wait: %v", err)
	}
	t.Log(err)
}

func TestConditionRules(t *testing.T) {
	c := &health.Checker{}
	for _, tc := range []struct {
		name  string
		obj   string
		ready bool
	}{
		{"crd established", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"a"},"status":{"conditions":[{"type":"Established","status":"True"},{"type":"NamesAccepted","status":"True"}]}}`, true},
		{"crd names not accepted", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"a"},"status":{"conditions":[{"type":"Established","status":"True"},{"type":"NamesAccepted","status":"False"}]}}`, false},
		{"apiservice unavailable", `{"apiVersion":"apiregistration.k8s.io/v1","kind":"APIService","metadata":{"name":"a"},"status":{"conditions":[{"type":"Available","status":"False","message":"no endpoints"}]}}`, false},
		{"apiservice available", `{"apiVersion":"apiregistration.k8s.io/v1","kind":"APIService","metadata":{"name":"a"},"status":{"conditions":[{"type":"Available","status":"True"}]}}`, true},
		{"configmap", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`, true},
		{"job running", `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"a","generation":1},"spec":{},"status":{"active":1}}`, false},
		{"job complete", `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"a","generation":1},"spec":{},"status":{"succeeded":1,"conditions":[{"type":"Complete","status":"True"}]}}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON([]byte(tc.obj)); err != nil {
				t.Fatal(err)
			}
			st, err := c.Check(t.Context(), u)
			if err != nil || st.Ready != tc.ready {
				t.Errorf("Check = %+v, %v; want ready %v", st, err, tc.ready)
			}
		})
	}
}

// A Deployment whose pods cannot be created says why: the ReplicaSet's
// FailedCreate reaches the Deployment's ReplicaFailure condition, and from
// there the reason of the stuck step.
func TestReplicaFailureIsTheReason(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, ns, a, c := setup(t)
	d := workload(t, "Deployment", ns, "web", nil)
	if err := unstructured.SetNestedField(d.Object, "no-such-priority", "spec", "template", "spec", "priorityClassName"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Apply(ctx, d); err != nil {
		t.Fatal(err)
	}
	// Also between pod lists (the checks that decide from the status).
	c.PodsEvery = time.Hour
	var last error
	testenv.WaitFor(ctx, t, "the stuck step names the ReplicaFailure", func(ctx context.Context) (bool, string, error) {
		last = c.Wait(ctx, a.Get, []*unstructured.Unstructured{d}, health.WaitOptions{Deadline: 2 * time.Second, Interval: 200 * time.Millisecond})
		var deg *health.DegradedError
		if !errors.As(last, &deg) {
			return false, "", last
		}
		msg := deg.Error()
		return strings.Contains(msg, "ReplicaFailure: FailedCreate") && strings.Contains(msg, "no-such-priority"), msg, nil
	})
	t.Log(last)
}

// A wait with Changed checks again when the channel it took before a round
// is closed, and soon after its first round (which may judge from copies
// older than the cache's), not at its Interval (an hour here: the test's
// context would end first).
func TestWaitChecksAgainOnChange(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "gizmos.example.com"}}}
	var (
		mu      sync.Mutex
		ready   bool
		rounds  int
		changed = make(chan struct{})
	)
	get := func(context.Context, *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		mu.Lock()
		defer mu.Unlock()
		rounds++
		if rounds == 2 {
			// The round after the first: still not ready; a change
			// comes later.
			go func() {
				mu.Lock()
				ready = true
				mu.Unlock()
				close(changed)
			}()
		}
		status := "False"
		if ready {
			status = "True"
		}
		out := obj.DeepCopy()
		out.Object["status"] = map[string]any{"conditions": []any{
			map[string]any{"type": "NamesAccepted", "status": "True"},
			map[string]any{"type": "Established", "status": status},
		}}
		return out, nil
	}
	c := &health.Checker{}
	err := c.Wait(ctx, get, []*unstructured.Unstructured{obj}, health.WaitOptions{Interval: time.Hour, MinInterval: time.Millisecond,
		Changed: func() <-chan struct{} { return changed }})
	if err != nil {
		t.Fatalf("wait: %v (rounds %d)", err, rounds)
	}
	if rounds != 3 {
		t.Errorf("%d rounds, want 3 (the first, one soon after it, one on the change)", rounds)
	}
}

// A wait reads an object whose rule says it stays ready (a CRD) until it
// is ready, then no more, while it reads the others every round: here a
// CRD established at the first round and a ConfigMap-like object of an
// unknown kind (kstatus) that is ready only at the third, read in
// parallel.
func TestWaitReadsAReadyCRDOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	crd := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "gizmos.example.com"},
		"status": map[string]any{"conditions": []any{
			map[string]any{"type": "NamesAccepted", "status": "True"}, map[string]any{"type": "Established", "status": "True"}}}}}
	gizmo := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Gizmo",
		"metadata": map[string]any{"name": "g1", "namespace": "ns", "generation": int64(1)}}}
	var (
		mu    sync.Mutex
		reads = map[string]int{}
	)
	get := func(_ context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		mu.Lock()
		defer mu.Unlock()
		reads[obj.GetKind()]++
		out := obj.DeepCopy()
		if obj.GetKind() == "Gizmo" {
			ready := "False"
			if reads["Gizmo"] >= 3 {
				ready = "True"
			}
			out.Object["status"] = map[string]any{"observedGeneration": int64(1), "conditions": []any{map[string]any{"type": "Ready", "status": ready}}}
		}
		return out, nil
	}
	c := &health.Checker{}
	if err := c.Wait(ctx, get, []*unstructured.Unstructured{crd, gizmo}, health.WaitOptions{Interval: time.Millisecond}); err != nil {
		t.Fatalf("wait: %v (reads %v)", err, reads)
	}
	if reads["CustomResourceDefinition"] != 1 || reads["Gizmo"] != 3 {
		t.Errorf("reads %v, want the CRD read once and the gizmo 3 times", reads)
	}
}

// Essentials keeps of a CRD or an APIService what their health rules read
// (metadata and status; the schema goes) and a workload whole.
func TestEssentials(t *testing.T) {
	crd := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "gizmos.example.com", "generation": int64(2)},
		"spec":     map[string]any{"versions": []any{map[string]any{"name": "v1", "schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object"}}}}},
		"status": map[string]any{"conditions": []any{
			map[string]any{"type": "NamesAccepted", "status": "True"}, map[string]any{"type": "Established", "status": "True"}}},
	}}
	kept := health.Essentials(crd)
	if _, ok := kept.Object["spec"]; ok {
		t.Errorf("the CRD's spec was kept: %v", kept.Object)
	}
	if kept.GetName() != "gizmos.example.com" || kept.GetGeneration() != 2 {
		t.Errorf("metadata lost: %v", kept.Object)
	}
	st, err := (&health.Checker{}).Check(t.Context(), kept)
	if err != nil || !st.Ready {
		t.Errorf("the kept CRD is not ready: %+v, %v", st, err)
	}
	dep := workload(t, "Deployment", "ns", "api", map[string]string{"app": "api"})
	if got := health.Essentials(dep); got != dep {
		t.Errorf("a Deployment was trimmed: %v", got.Object)
	}
	if health.Essentials(nil) != nil {
		t.Error("Essentials(nil) is not nil")
	}
}
