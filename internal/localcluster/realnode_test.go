package localcluster_test

import (
	"maps"
	"net"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/internal/localcluster"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
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
	pod("runs", localcluster.PauseImage, true)
	pod("not-imported", "registry.example/not-imported:v1", true)
	pod("no-toleration", localcluster.PauseImage, false)

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

// TestRealNodeKeepsProductsOff: with a real node, a DaemonSet and a Pod
// that tolerate every taint (as node-exporter and CNI agents do) stay on
// the fake nodes (the admission policies of realnodepolicy.go give them
// the node selector metakeys.FakeNodeLabel=true, on create and on update, beside
// their own selector), while a DaemonSet that tolerates every taint and
// selects the real node runs there only and keeps its selector as written.
func TestRealNodeKeepsProductsOff(t *testing.T) {
	e := testenv.New(t)
	rn := e.RealNode(t)
	ctx := t.Context()
	ns := e.Namespace(ctx, t)
	everything := []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	daemonSet := func(name string, selector map[string]string) *appsv1.DaemonSet {
		labels := map[string]string{"app": name}
		ds := &appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: appsv1.DaemonSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						TerminationGracePeriodSeconds: new(int64),
						Containers:                    []corev1.Container{{Name: "c", Image: localcluster.PauseImage, ImagePullPolicy: corev1.PullIfNotPresent}},
						NodeSelector:                  selector,
						Tolerations:                   everything,
					},
				},
			},
		}
		created, err := e.Kube.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create DaemonSet %s: %v", name, err)
		}
		return created
	}
	nodesOf := func(name string) map[string]int {
		t.Helper()
		pods, err := e.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, p := range pods.Items {
			out[p.Spec.NodeName]++
		}
		return out
	}
	nodes, err := e.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fake := 0
	for _, n := range nodes.Items {
		if n.Labels[metakeys.FakeNodeLabel] == "true" {
			fake++
		}
		if n.Name == rn.Name && n.Labels[metakeys.FakeNodeLabel] != "" {
			t.Errorf("the real node carries %s", metakeys.FakeNodeLabel)
		}
	}

	ds := daemonSet("everywhere", map[string]string{"kubernetes.io/os": "linux"})
	want := map[string]string{"kubernetes.io/os": "linux", metakeys.FakeNodeLabel: "true"}
	if got := ds.Spec.Template.Spec.NodeSelector; !maps.Equal(got, want) {
		t.Errorf("DaemonSet everywhere: node selector %v, want %v", got, want)
	}
	ds = e.WaitDaemonSetRolledOut(ctx, t, ns, "everywhere")
	if int(ds.Status.DesiredNumberScheduled) != fake || nodesOf("everywhere")[rn.Name] != 0 {
		t.Errorf("DaemonSet everywhere: %d pods desired, on nodes %v; want one on each of the %d fake nodes, none on %s",
			ds.Status.DesiredNumberScheduled, nodesOf("everywhere"), fake, rn.Name)
	}
	// An update that drops the selector gets it again.
	ds.Spec.Template.Spec.NodeSelector = nil
	ds.Spec.Template.Labels["version"] = "2"
	updated, err := e.Kube.AppsV1().DaemonSets(ns).Update(ctx, ds, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := updated.Spec.Template.Spec.NodeSelector; !maps.Equal(got, map[string]string{metakeys.FakeNodeLabel: "true"}) {
		t.Errorf("DaemonSet everywhere after an update without a node selector: %v, want only %s=true", got, metakeys.FakeNodeLabel)
	}

	asks := daemonSet("asks", map[string]string{metakeys.RealNodeLabel: "true"})
	if got := asks.Spec.Template.Spec.NodeSelector; !maps.Equal(got, map[string]string{metakeys.RealNodeLabel: "true"}) {
		t.Errorf("DaemonSet asks: node selector %v, want it as written", got)
	}
	asks = e.WaitDaemonSetRolledOut(ctx, t, ns, "asks")
	if on := nodesOf("asks"); asks.Status.DesiredNumberScheduled != 1 || on[rn.Name] != 1 {
		t.Errorf("DaemonSet asks: %d pods desired, on nodes %v; want one, on %s", asks.Status.DesiredNumberScheduled, on, rn.Name)
	}

	pod, err := e.Kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "tolerates-everything"},
		Spec: corev1.PodSpec{
			Containers:  []corev1.Container{{Name: "c", Image: "registry.example/not-imported:v1"}},
			Tolerations: everything,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeSelector[metakeys.FakeNodeLabel] != "true" {
		t.Errorf("a Pod that tolerates every taint: node selector %v, want %s=true", pod.Spec.NodeSelector, metakeys.FakeNodeLabel)
	}
	pod = e.WaitPod(ctx, t, ns, pod.Name, "Ready", testenv.PodReady)
	if pod.Spec.NodeName == rn.Name {
		t.Errorf("a Pod that tolerates every taint runs on the real node")
	}
}
