package health_test

import (
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/installstrategy/installstrategy/pkg/health"
)

// The verdicts of the kind table's health rules on fixture objects: the
// workload's status and its pods as a client without a cluster returns
// them. The cluster tests (health_test.go) show that real controllers
// produce these states; these show what each state is judged to be.

var clock = time.Date(2026, 12, 6, 6, 0, 0, 0, time.UTC)

func identityAnnotations() map[string]any {
	return map[string]any{metakeys.InstallStrategyVersionAnnotation: id.Version, metakeys.InstallStrategyRegistryAnnotation: id.Registry, metakeys.InstallStrategyIdentifierAnnotation: id.Identifier}
}

// rolledOut returns a workload of the fixture's identity whose status says
// every one of its want replicas (or scheduled pods) is updated (of
// updated) and ready.
func rolledOut(t *testing.T, kind string, want, updated int64) *unstructured.Unstructured {
	u := workload(t, kind, "app", "web", nil)
	u.SetGeneration(2)
	if err := unstructured.SetNestedField(u.Object, identityAnnotations(), "spec", "template", "metadata", "annotations"); err != nil {
		t.Fatal(err)
	}
	status := map[string]any{"observedGeneration": int64(2)}
	switch kind {
	case "Deployment":
		_ = unstructured.SetNestedField(u.Object, want, "spec", "replicas")
		for _, k := range []string{"replicas", "readyReplicas", "availableReplicas"} {
			status[k] = want
		}
		status["updatedReplicas"] = updated
		status["conditions"] = []any{map[string]any{"type": "Available", "status": "True"}, map[string]any{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}}
	case "DaemonSet":
		for _, k := range []string{"desiredNumberScheduled", "currentNumberScheduled", "numberReady", "numberAvailable"} {
			status[k] = want
		}
		status["updatedNumberScheduled"] = updated
	}
	u.Object["status"] = status
	return u
}

// pod returns a pod of the fixture workload, with the identity or not.
func pod(name string, carries bool, mutate func(*corev1.Pod)) runtime.Object {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "app", Labels: map[string]string{"app": "web"}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(clock.Add(-time.Hour))}}}}}}
	if carries {
		p.Annotations = map[string]string{metakeys.InstallStrategyVersionAnnotation: id.Version, metakeys.InstallStrategyRegistryAnnotation: id.Registry, metakeys.InstallStrategyIdentifierAnnotation: id.Identifier}
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func TestWorkloadVerdicts(t *testing.T) {
	crashLooping := func(p *corev1.Pod) {
		p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
		p.Status.ContainerStatuses[0].RestartCount = 4
	}
	restarted := func(ago time.Duration) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(clock.Add(-ago))
			p.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1}
			p.Status.ContainerStatuses[0].RestartCount = 1
		}
	}
	replicaFailure := rolledOut(t, "Deployment", 2, 0)
	_ = unstructured.SetNestedField(replicaFailure.Object, []any{map[string]any{"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": "quota exceeded"}}, "status", "conditions")
	stale := rolledOut(t, "DaemonSet", 2, 2)
	stale.SetGeneration(3)

	for _, tc := range []struct {
		name       string
		obj        *unstructured.Unstructured
		pods       []runtime.Object
		verifyPods bool
		// podsEvery is Checker.PodsEvery: -1 decides a workload that is
		// rolling out from its status alone.
		podsEvery     time.Duration
		ready, failed bool
		reason        string
	}{
		// A pod without the identity would make it not ready: it is not listed.
		{name: "deployment rolled out of the target template: ready from its status, no pod listed", obj: rolledOut(t, "Deployment", 2, 2), pods: []runtime.Object{pod("a", false, nil)}, ready: true},
		{name: "verified pods ready with the identity", obj: rolledOut(t, "Deployment", 1, 1), verifyPods: true, pods: []runtime.Object{pod("a", true, nil)}, ready: true},
		{name: "a pod without the target identity", obj: rolledOut(t, "Deployment", 1, 1), verifyPods: true, pods: []runtime.Object{pod("a", false, nil)}, reason: "a has not the target identity"},
		{name: "a crash-looping pod fails the workload", obj: rolledOut(t, "Deployment", 1, 1), verifyPods: true, pods: []runtime.Object{pod("a", true, crashLooping)}, failed: true, reason: "pod a: container main: CrashLoopBackOff (restarts 4)"},
		{name: "a container restarted 3s ago is not stable yet", obj: rolledOut(t, "Deployment", 1, 1), verifyPods: true, pods: []runtime.Object{pod("a", true, restarted(3*time.Second))}, reason: "container main restarted 3s ago after exit 1"},
		{name: "a container restarted a minute ago is", obj: rolledOut(t, "Deployment", 1, 1), verifyPods: true, pods: []runtime.Object{pod("a", true, restarted(time.Minute))}, ready: true},
		{name: "deployment rolling out, decided from its status", obj: rolledOut(t, "Deployment", 2, 1), podsEvery: -1, reason: "Updated: 1/2"},
		{name: "deployment's ReplicaFailure is the reason", obj: replicaFailure, podsEvery: -1, reason: "ReplicaFailure: FailedCreate: quota exceeded"},
		{name: "daemonset rolling out", obj: rolledOut(t, "DaemonSet", 2, 1), podsEvery: -1, reason: "1 of 2 pods updated, 2 ready"},
		{name: "daemonset generation not observed", obj: stale, reason: "generation 3 not observed yet (observed 2)"},
		{name: "daemonset rolled out", obj: rolledOut(t, "DaemonSet", 3, 3), ready: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &health.Checker{Kube: fake.NewClientset(tc.pods...), Identity: id, VerifyPods: tc.verifyPods, PodsEvery: tc.podsEvery, Now: func() time.Time { return clock }}
			st, err := c.Check(t.Context(), tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			if st.Ready != tc.ready || st.Failed != tc.failed || !strings.Contains(st.Reason, tc.reason) {
				t.Errorf("Check = %+v; want ready %v, failed %v, reason with %q", st, tc.ready, tc.failed, tc.reason)
			}
		})
	}
}

// TestKstatusVerdicts: StatefulSets, Jobs and kinds outside the table are
// judged by kstatus; a failed Job cannot become ready without a change.
func TestKstatusVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name          string
		obj           string
		ready, failed bool
	}{
		{"job failed", `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"a","generation":1},"spec":{},"status":{"failed":3,"conditions":[{"type":"Failed","status":"True","reason":"BackoffLimitExceeded"}]}}`, false, true},
		{"statefulset ready", `{"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":"a","generation":1},"spec":{"replicas":1},"status":{"observedGeneration":1,"replicas":1,"readyReplicas":1,"currentReplicas":1,"updatedReplicas":1,"availableReplicas":1}}`, true, false},
		{"statefulset updating", `{"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":"a","generation":2},"spec":{"replicas":2},"status":{"observedGeneration":2,"replicas":2,"readyReplicas":2,"currentReplicas":1,"updatedReplicas":1,"availableReplicas":2}}`, false, false},
		{"custom resource with Ready false", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"a","generation":1},"status":{"observedGeneration":1,"conditions":[{"type":"Ready","status":"False"}]}}`, false, false},
		{"custom resource without status", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"a"}}`, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON([]byte(tc.obj)); err != nil {
				t.Fatal(err)
			}
			st, err := (&health.Checker{}).Check(t.Context(), u)
			if err != nil || st.Ready != tc.ready || st.Failed != tc.failed {
				t.Errorf("Check = %+v, %v; want ready %v, failed %v", st, err, tc.ready, tc.failed)
			}
		})
	}
}
