package testenv

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

// The report shows a workload's live counters beside its cached copy, and
// the ReplicaSets and pods of the namespace.
func TestWorkloadReport(t *testing.T) {
	kube := fake.NewClientset(
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "ctl", Namespace: "ns", Generation: 3, ResourceVersion: "42"},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "ctl-1", Namespace: "ns"}, Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](2)}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ctl-1-abc", Namespace: "ns", OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "ctl-1"}}},
			Spec: corev1.PodSpec{NodeName: "kwok-worker-1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
	)
	var asked []string
	cached := func(_ context.Context, gvk schema.GroupVersionKind, ns, name string) (*unstructured.Unstructured, error) {
		asked = append(asked, gvk.Kind+" "+ns+"/"+name)
		u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"updatedReplicas": int64(1)}}}
		u.SetGeneration(3)
		u.SetResourceVersion("17")
		return u, nil
	}
	got := WorkloadReport(t.Context(), kube, "ns", cached)
	for _, want := range []string{
		"Deployment ctl gen 3 rv 42: observedGen 3 replicas 2 updated 2 ready 2 available 2",
		"cached: gen 3 rv 17 status map[updatedReplicas:1]",
		"ReplicaSet ctl-1: spec 2",
		`Pod ctl-1-abc phase=Running ready=false node="kwok-worker-1" of ReplicaSet ctl-1`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	if strings.Join(asked, ",") != "Deployment ns/ctl" {
		t.Errorf("cache asked for %v, want the one Deployment", asked)
	}
	if got := WorkloadReport(t.Context(), kube, "ns", nil); strings.Contains(got, "cached:") {
		t.Errorf("report without a cache shows a cached copy:\n%s", got)
	}
}
