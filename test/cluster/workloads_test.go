// Package cluster_test checks that the local control plane (hack/localcluster)
// behaves like a real cluster for the workloads the project manages:
// Deployments roll out, DaemonSets cover the schedulable nodes, Jobs complete,
// CRDs become Established, and kwok's test behaviours make pods fail,
// crash-loop or never become ready.
package cluster_test

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
)

func podTemplate(app, image string, extraLabels map[string]string) corev1.PodTemplateSpec {
	l := map[string]string{"app": app}
	for k, v := range extraLabels {
		l[k] = v
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: l},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "main", Image: image}},
		},
	}
}

func deployment(name string, replicas int32, image string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: podTemplate(name, image, nil),
		},
	}
}

func TestDeploymentBecomesAvailableAndRollsOutNewImage(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := testenv.New(t)
	ns := env.Namespace(ctx, t)
	deployments := env.Kube.AppsV1().Deployments(ns)

	if _, err := deployments.Create(ctx, deployment("web", 3, "example.test/web:v1"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	d := env.WaitDeploymentRolledOut(ctx, t, ns, "web")
	if d.Status.AvailableReplicas != 3 || d.Status.ReadyReplicas != 3 {
		t.Fatalf("deployment web: available %d ready %d, want 3/3", d.Status.AvailableReplicas, d.Status.ReadyReplicas)
	}
	firstRS := onlyActiveReplicaSet(ctx, t, env, ns, "web")

	d.Spec.Template.Spec.Containers[0].Image = "example.test/web:v2"
	if _, err := deployments.Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update deployment image: %v", err)
	}
	env.WaitDeploymentRolledOut(ctx, t, ns, "web")
	secondRS := onlyActiveReplicaSet(ctx, t, env, ns, "web")
	if secondRS.Name == firstRS.Name {
		t.Fatalf("image change kept replica set %s, want a new one", firstRS.Name)
	}
	if got := secondRS.Spec.Template.Spec.Containers[0].Image; got != "example.test/web:v2" {
		t.Fatalf("new replica set %s has image %s, want example.test/web:v2", secondRS.Name, got)
	}
	// Every pod left is a ready pod of the new replica set.
	testenv.WaitFor(ctx, t, "only new pods left", func(ctx context.Context) (bool, string, error) {
		pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, "", err
		}
		ok := len(pods.Items) == 3
		state := fmt.Sprintf("%d pods:", len(pods.Items))
		for _, p := range pods.Items {
			state += " " + testenv.DescribePod(&p)
			if p.Spec.Containers[0].Image != "example.test/web:v2" || !testenv.PodReady(&p) || p.DeletionTimestamp != nil {
				ok = false
			}
		}
		return ok, state, nil
	})
}

// onlyActiveReplicaSet returns the one replica set of the deployment that has
// replicas, failing when there is not exactly one.
func onlyActiveReplicaSet(ctx context.Context, t *testing.T, env *testenv.Env, ns, app string) *appsv1.ReplicaSet {
	t.Helper()
	list, err := env.Kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatalf("list replica sets: %v", err)
	}
	var active []appsv1.ReplicaSet
	for _, rs := range list.Items {
		if ptr.Deref(rs.Spec.Replicas, 0) > 0 {
			active = append(active, rs)
		}
	}
	if len(active) != 1 {
		t.Fatalf("deployment %s has %d active replica sets of %d, want 1", app, len(active), len(list.Items))
	}
	return &active[0]
}

func TestDaemonSetRunsOneReadyPodPerSchedulableNode(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := testenv.New(t)
	ns := env.Namespace(ctx, t)

	nodes, err := env.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list nodes: %v", err)
	}
	schedulable := map[string]bool{}
	// The real node (hack/localcluster) has a NoSchedule taint of its own,
	// which the "everywhere" DaemonSet does not tolerate.
	controlPlaneOrSchedulable := 0
	for _, n := range nodes.Items {
		if !hasNoScheduleTaint(&n) && !n.Spec.Unschedulable {
			schedulable[n.Name] = true
		}
		if _, real := n.Labels[metakeys.RealNodeLabel]; !real {
			controlPlaneOrSchedulable++
		}
	}
	if len(schedulable) == 0 || len(schedulable) == len(nodes.Items) {
		t.Fatalf("want some but not all of the %d nodes schedulable (the control plane is tainted), got %d", len(nodes.Items), len(schedulable))
	}

	cases := []struct {
		name        string
		tolerations []corev1.Toleration
		wantNodes   int
	}{
		{name: "agent", wantNodes: len(schedulable)},
		{
			name:        "everywhere",
			tolerations: []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			wantNodes:   controlPlaneOrSchedulable,
		},
	}
	for _, tc := range cases {
		tmpl := podTemplate(tc.name, "example.test/agent:v1", nil)
		tmpl.Spec.Tolerations = tc.tolerations
		ds := &appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Name: tc.name},
			Spec: appsv1.DaemonSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": tc.name}},
				Template: tmpl,
			},
		}
		if _, err := env.Kube.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create daemonset %s: %v", tc.name, err)
		}
	}
	for _, tc := range cases {
		ds := env.WaitDaemonSetRolledOut(ctx, t, ns, tc.name)
		if int(ds.Status.DesiredNumberScheduled) != tc.wantNodes || int(ds.Status.NumberReady) != tc.wantNodes {
			t.Errorf("daemonset %s: desired %d ready %d, want %d", tc.name, ds.Status.DesiredNumberScheduled, ds.Status.NumberReady, tc.wantNodes)
		}
		pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + tc.name})
		if err != nil {
			t.Fatalf("list pods: %v", err)
		}
		perNode := map[string]int{}
		for _, p := range pods.Items {
			if !testenv.PodReady(&p) {
				t.Errorf("daemonset %s: pod not ready: %s", tc.name, testenv.DescribePod(&p))
			}
			perNode[p.Spec.NodeName]++
			if tc.tolerations == nil && !schedulable[p.Spec.NodeName] {
				t.Errorf("daemonset %s without toleration has a pod on tainted node %s", tc.name, p.Spec.NodeName)
			}
		}
		if len(perNode) != tc.wantNodes || len(pods.Items) != tc.wantNodes {
			t.Errorf("daemonset %s: %d pods on %d nodes (%v), want one on each of %d nodes", tc.name, len(pods.Items), len(perNode), perNode, tc.wantNodes)
		}
	}
}

func hasNoScheduleTaint(n *corev1.Node) bool {
	for _, taint := range n.Spec.Taints {
		if taint.Effect == corev1.TaintEffectNoSchedule || taint.Effect == corev1.TaintEffectNoExecute {
			return true
		}
	}
	return false
}

func TestControlPlaneNodeIsLabelledAndTainted(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := testenv.New(t)
	ns := env.Namespace(ctx, t)

	const role = "node-role.kubernetes.io/control-plane"
	nodes, err := env.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: labels.Set{role: ""}.String()})
	if err != nil {
		t.Fatalf("list control-plane nodes: %v", err)
	}
	if len(nodes.Items) != 1 {
		t.Fatalf("%d control-plane nodes, want 1", len(nodes.Items))
	}
	cp := nodes.Items[0]
	tainted := false
	for _, taint := range cp.Spec.Taints {
		tainted = tainted || (taint.Key == role && taint.Effect == corev1.TaintEffectNoSchedule)
	}
	if !tainted {
		t.Fatalf("control-plane node %s has taints %v, want %s:NoSchedule", cp.Name, cp.Spec.Taints, role)
	}

	// A pod with control-plane placement (as a dump Job uses) lands there.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "placed"},
		Spec: corev1.PodSpec{
			Containers:   []corev1.Container{{Name: "main", Image: "example.test/dump:v1"}},
			NodeSelector: map[string]string{role: ""},
			Tolerations:  []corev1.Toleration{{Key: role, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		},
	}
	if _, err := env.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	p := env.WaitPod(ctx, t, ns, "placed", "ready", testenv.PodReady)
	if p.Spec.NodeName != cp.Name {
		t.Fatalf("pod with control-plane placement runs on %s, want %s", p.Spec.NodeName, cp.Name)
	}
}

func TestJobCompletes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := testenv.New(t)
	ns := env.Namespace(ctx, t)

	tmpl := podTemplate("job", "example.test/job:v1", nil)
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "once"},
		Spec:       batchv1.JobSpec{Template: tmpl, BackoffLimit: ptr.To[int32](0)},
	}
	if _, err := env.Kube.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create job: %v", err)
	}
	j := env.WaitJobFinished(ctx, t, ns, "once")
	if cond, state := testenv.JobFinished(j); cond != batchv1.JobComplete || j.Status.Succeeded != 1 {
		t.Fatalf("job once: %s, want Complete with 1 succeeded", state)
	}
	if j.Status.CompletionTime == nil {
		t.Fatalf("job once is Complete without completionTime")
	}
}
