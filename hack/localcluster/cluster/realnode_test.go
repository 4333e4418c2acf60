package cluster_test

import (
	"net"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/hack/localcluster/cluster"
	"github.com/installstrategy/installstrategy/internal/testenv"
)

// TestRealNode runs real containers on the test cluster's real node: a pod
// that asks for it runs the imported pause image on the node's bridge; an
// image that was not imported fails to pull at once against the closed
// loopback port every registry resolves to (no pull leaves the machine);
// and a pod that selects the node without tolerating its taint is never
// scheduled there.
func TestRealNode(t *testing.T) {
	e := testenv.New(t)
	rn := e.RealNode(t)
	ctx := t.Context()
	ns := e.Namespace(ctx, t)
	pod := func(name, image string, tolerate bool) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: new(int64),
				Containers:                    []corev1.Container{{Name: "c", Image: image, ImagePullPolicy: corev1.PullIfNotPresent}},
			},
		}
		testenv.OnRealNode(&p.Spec)
		if !tolerate {
			p.Spec.Tolerations = nil
		}
		if _, err := e.Kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod %s: %v", name, err)
		}
		return p
	}
	pod("runs", cluster.PauseImage, true)
	pod("not-imported", "registry.example/not-imported:v1", true)
	pod("no-toleration", cluster.PauseImage, false)

	running := e.WaitPod(ctx, t, ns, "runs", "Ready", testenv.PodReady)
	if running.Spec.NodeName != rn.Name {
		t.Errorf("pod runs on %q, want the real node %q", running.Spec.NodeName, rn.Name)
	}
	_, bridge, _ := net.ParseCIDR(rn.APIHost + "/24")
	if ip := net.ParseIP(running.Status.PodIP); ip == nil || !bridge.Contains(ip) {
		t.Errorf("pod IP %q is not on the real node's bridge %s", running.Status.PodIP, bridge)
	}

	e.WaitPod(ctx, t, ns, "not-imported", "failing to pull", func(p *corev1.Pod) bool {
		for _, c := range p.Status.ContainerStatuses {
			if w := c.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") {
				if !strings.Contains(w.Message, "127.0.0.1:9") {
					t.Fatalf("the pull went elsewhere than the closed loopback port: %s", w.Message)
				}
				return true
			}
		}
		return false
	})

	e.WaitPod(ctx, t, ns, "no-toleration", "unschedulable", func(p *corev1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return true
			}
		}
		return false
	})
}
