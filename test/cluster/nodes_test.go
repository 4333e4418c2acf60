package cluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
)

// realNodeResources are the resources a real kubelet reports in a node's
// capacity and allocatable (hugepages are reported, as 0, when the host has
// none), each with the least a fake node must offer for the product
// charts' pods to schedule side by side.
var realNodeResources = map[corev1.ResourceName]string{
	corev1.ResourceCPU:              "64",
	corev1.ResourceMemory:           "256Gi",
	corev1.ResourcePods:             "1000",
	corev1.ResourceEphemeralStorage: "100Gi",
	"hugepages-1Gi":                 "0",
	"hugepages-2Mi":                 "0",
}

// TestFakeNodesReportARealNodesResources: kwok's own default node status has
// cpu, memory and pods but no ephemeral-storage, so a pod asking for any (as
// Bitnami charts' resource presets do) never scheduled: "Insufficient
// ephemeral-storage". Every fake node reports each resource of a real node,
// in capacity and allocatable.
func TestFakeNodesReportARealNodesResources(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := t.Context()
	nodes, err := env.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: labels.Set{metakeys.FakeNodeLabel: "true"}.String()})
	if err != nil {
		t.Fatalf("list fake nodes: %v", err)
	}
	if len(nodes.Items) == 0 {
		t.Fatal("the cluster has no fake nodes")
	}
	for _, n := range nodes.Items {
		for what, list := range map[string]corev1.ResourceList{"capacity": n.Status.Capacity, "allocatable": n.Status.Allocatable} {
			for name, least := range realNodeResources {
				got, ok := list[name]
				if !ok {
					t.Errorf("node %s: %s has no %s: %v", n.Name, what, name, list)
					continue
				}
				want := resource.MustParse(least)
				if want.IsZero() && !got.IsZero() {
					t.Errorf("node %s: %s %s = %s, want 0 (no hugepages)", n.Name, what, name, got.String())
				}
				if got.Cmp(want) < 0 {
					t.Errorf("node %s: %s %s = %s, want at least %s", n.Name, what, name, got.String(), least)
				}
			}
		}
	}
}

// resourcePod asks for requests (and the same limits) of a fake node.
func resourcePod(name string, requests corev1.ResourceList) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:      "main",
				Image:     "example.test/app:v1",
				Resources: corev1.ResourceRequirements{Requests: requests, Limits: requests},
			}},
			NodeSelector: map[string]string{metakeys.FakeNodeLabel: "true"},
		},
	}
}

// TestPodAskingForEphemeralStorageIsScheduled: the pod of a Bitnami chart's
// "nano" preset (50Mi of ephemeral-storage among its requests) and a pod
// with a larger ask both run on a fake node.
func TestPodAskingForEphemeralStorageIsScheduled(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	pods := map[string]corev1.ResourceList{
		"bitnami-nano": {
			corev1.ResourceCPU:              resource.MustParse("100m"),
			corev1.ResourceMemory:           resource.MustParse("128Mi"),
			corev1.ResourceEphemeralStorage: resource.MustParse("50Mi"),
		},
		"large-scratch": {
			corev1.ResourceCPU:              resource.MustParse("2"),
			corev1.ResourceMemory:           resource.MustParse("4Gi"),
			corev1.ResourceEphemeralStorage: resource.MustParse("20Gi"),
		},
	}
	for name, requests := range pods {
		if _, err := env.Kube.CoreV1().Pods(ns).Create(ctx, resourcePod(name, requests), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod %s: %v", name, err)
		}
	}
	for name := range pods {
		p := env.WaitPod(ctx, t, ns, name, "ready", testenv.PodReady)
		if p.Spec.NodeName == "" {
			t.Fatalf("pod %s is ready on no node", name)
		}
	}
}

// TestPodAskingForHugepagesIsNotScheduled: a fake node, like a real node of
// a host without hugepages, offers none; the scheduler says why.
func TestPodAskingForHugepagesIsNotScheduled(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	pod := resourcePod("hugepages", corev1.ResourceList{
		corev1.ResourceMemory: resource.MustParse("64Mi"),
		"hugepages-2Mi":       resource.MustParse("4Mi"),
	})
	if _, err := env.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	testenv.WaitFor(ctx, t, "pod hugepages unschedulable", func(ctx context.Context) (bool, string, error) {
		p, err := env.Kube.CoreV1().Pods(ns).Get(ctx, "hugepages", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		if p.Spec.NodeName != "" {
			return false, "", fmt.Errorf("pod asking for hugepages-2Mi scheduled on %s", p.Spec.NodeName)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				if !strings.Contains(c.Message, "Insufficient hugepages-2Mi") {
					return false, "", fmt.Errorf("pod unschedulable for another reason: %s", c.Message)
				}
				return true, "", nil
			}
		}
		return false, "not yet judged by the scheduler", nil
	})
}
