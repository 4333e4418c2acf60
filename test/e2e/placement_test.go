package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/generate"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
)

// Labels and the taint of the local cluster's fake nodes
// (hack/localcluster): every node has type=kwok; the first is a tainted
// control plane.
const (
	controlPlaneLabel = "node-role.kubernetes.io/control-plane"
	kwokTypeLabel     = "type"
)

var controlPlaneToleration = corev1.Toleration{Key: controlPlaneLabel, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}

func requireNode(key string, values ...string) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}}}},
	}}}
}

// An Installation's infra and workloads placement and pull secrets reach the
// sample product's pod templates, the pods schedule where they say, and a
// change of placement rolls out under a new identifier.
func TestPlacementAndPullSecrets(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	nodes, err := e.env.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwokTypeLabel + "=kwok"})
	if err != nil {
		t.Fatal(err)
	}
	var controlPlane string
	var workers []string
	for _, n := range nodes.Items {
		if _, ok := n.Labels[controlPlaneLabel]; ok {
			controlPlane = n.Name
		} else {
			workers = append(workers, n.Name)
		}
	}
	if controlPlane == "" || len(workers) < 1 {
		t.Fatalf("want a control-plane node and a worker labelled %s=kwok, have %d nodes", kwokTypeLabel, len(nodes.Items))
	}
	slices.Sort(workers)

	// Infra on the tainted control plane; the handler on every kwok node,
	// the control plane included.
	spec := sampleSpec("v1.0.0")
	spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "pull-a"}, {Name: "pull-b"}}
	spec.Infra = &v1alpha1.NodePlacement{
		NodeSelector: map[string]string{controlPlaneLabel: ""},
		Tolerations:  []corev1.Toleration{controlPlaneToleration},
		Affinity:     requireNode(kwokTypeLabel, "kwok"),
	}
	spec.Workloads = &v1alpha1.NodePlacement{
		NodeSelector: map[string]string{kwokTypeLabel: "kwok"},
		Tolerations:  []corev1.Toleration{controlPlaneToleration},
		Affinity:     requireNode("kubernetes.io/os", "linux"),
	}
	e.create(ctx, t, "sample", spec)
	in := e.waitDeployed(ctx, t, "sample", "v1.0.0")
	firstID := in.Status.ObservedIdentifier
	if want, _ := identityOf(t, in); firstID != want {
		t.Errorf("observed identifier %s, want %s", firstID, want)
	}
	e.checkPlacement(ctx, t, in, map[string][]string{
		"sample-api": {controlPlane}, "sample-controller": {controlPlane},
		"sample-handler": append([]string{controlPlane}, workers...),
	})

	// Move infra to one worker and keep the handler off the control plane.
	e.update(ctx, t, "sample", func(in *v1alpha1.Installation) {
		in.Spec.Infra = &v1alpha1.NodePlacement{
			NodeSelector: map[string]string{"kubernetes.io/hostname": workers[0]},
			Affinity:     requireNode(kwokTypeLabel, "kwok"),
		}
		in.Spec.Workloads.Tolerations = nil
	})
	var last *v1alpha1.Installation
	if err := pollInstallation(ctx, e, "sample", func(cur *v1alpha1.Installation) bool {
		last = cur
		return cur.IsDeployed() && cur.Status.ObservedIdentifier != firstID
	}); err != nil {
		t.Fatalf("placement change: %v; last %s", err, describe(last))
	}
	if want, _ := identityOf(t, last); last.Status.ObservedIdentifier != want {
		t.Errorf("observed identifier %s, want the new spec's %s", last.Status.ObservedIdentifier, want)
	}
	e.checkPlacement(ctx, t, last, map[string][]string{
		"sample-api": {workers[0]}, "sample-controller": {workers[0]}, "sample-handler": workers,
	})
}

// checkPlacement checks that the sample product's pod templates carry the
// Installation's placement (by role) and pull secrets, and waits until the
// running pods of each workload are on exactly the nodes given.
func (e *e2e) checkPlacement(ctx context.Context, t *testing.T, in *v1alpha1.Installation, nodes map[string][]string) {
	t.Helper()
	var secrets []string
	for _, s := range in.Spec.ImagePullSecrets {
		secrets = append(secrets, s.Name)
	}
	check := func(name string, meta metav1.ObjectMeta, pod *corev1.PodSpec) {
		want := in.Spec.Infra
		if meta.Annotations[metakeys.RoleAnnotation] == string(generate.RoleHandler) {
			want = in.Spec.Workloads
		}
		var got []string
		for _, s := range pod.ImagePullSecrets {
			got = append(got, s.Name)
		}
		if !slices.Equal(got, secrets) {
			t.Errorf("%s: imagePullSecrets %v, want %v", name, got, secrets)
		}
		if !maps.Equal(pod.NodeSelector, want.NodeSelector) {
			t.Errorf("%s: nodeSelector %v, want %v", name, pod.NodeSelector, want.NodeSelector)
		}
		if !equality.Semantic.DeepEqual(pod.Tolerations, want.Tolerations) {
			t.Errorf("%s: tolerations %v, want %v", name, pod.Tolerations, want.Tolerations)
		}
		if !equality.Semantic.DeepEqual(pod.Affinity, want.Affinity) {
			t.Errorf("%s: affinity %v, want %v", name, pod.Affinity, want.Affinity)
		}
	}
	for _, name := range []string{"sample-api", "sample-controller"} {
		var d appsv1.Deployment
		if !e.exists(ctx, t, &d, name) {
			t.Fatalf("deployment %s missing", name)
		}
		check(name, d.ObjectMeta, &d.Spec.Template.Spec)
	}
	var ds appsv1.DaemonSet
	if !e.exists(ctx, t, &ds, "sample-handler") {
		t.Fatal("daemonset sample-handler missing")
	}
	check("sample-handler", ds.ObjectMeta, &ds.Spec.Template.Spec)
	if int(ds.Status.DesiredNumberScheduled) != len(nodes["sample-handler"]) {
		t.Errorf("sample-handler desires %d pods, want one on each of %v", ds.Status.DesiredNumberScheduled, nodes["sample-handler"])
	}

	// Old pods may still be terminating right after the rollout.
	for _, name := range slices.Sorted(maps.Keys(nodes)) {
		want := slices.Sorted(slices.Values(nodes[name]))
		sel := labels.Set{metakeys.AppNameLabel: name}.String()
		testenv.WaitFor(ctx, t, name+" pods on "+strings.Join(want, ","), func(ctx context.Context) (bool, string, error) {
			pods, err := e.env.Kube.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
			if err != nil {
				return false, "", err
			}
			on := map[string]bool{}
			var state []string
			ok := true
			for i := range pods.Items {
				p := &pods.Items[i]
				state = append(state, fmt.Sprintf("%s@%s ready=%t deleting=%t", p.Name, p.Spec.NodeName, testenv.PodReady(p), p.DeletionTimestamp != nil))
				if p.DeletionTimestamp != nil || !testenv.PodReady(p) || !slices.Contains(want, p.Spec.NodeName) {
					ok = false
				}
				on[p.Spec.NodeName] = true
			}
			return ok && len(on) > 0 && (name != "sample-handler" || len(on) == len(want)), strings.Join(state, "; "), nil
		})
	}
}
