package testenv

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
)

// CachedReader reads an object from a cache (a controller-runtime cache's
// Get into an unstructured.Unstructured): nil and no error when the cache
// does not hold it.
type CachedReader func(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error)

// WorkloadReport describes the workloads of namespace ns as the API server
// has them now: each Deployment and DaemonSet with its generation,
// resourceVersion and rollout counters, the ReplicaSets and the pods (the
// Events are logged by Namespace's cleanup of a failed test). When cached is set, each workload's copy in that cache is shown beside
// the live one, so a failed wait tells a cache that stopped following the
// cluster (another resourceVersion, other counters) from a rollout that
// stopped in the cluster itself. A test prints it when a wait fails.
func WorkloadReport(ctx context.Context, kube kubernetes.Interface, ns string, cached CachedReader) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
	defer cancel()
	var b strings.Builder
	fmt.Fprintf(&b, "workloads of namespace %s, live:", ns)
	cache := func(gvk schema.GroupVersionKind, name string) {
		if cached == nil {
			return
		}
		u, err := cached(ctx, gvk, ns, name)
		switch {
		case err != nil:
			fmt.Fprintf(&b, "\n    cached: %v", err)
		case u == nil:
			b.WriteString("\n    cached: absent")
		default:
			st, _, _ := unstructured.NestedMap(u.Object, "status")
			fmt.Fprintf(&b, "\n    cached: gen %d rv %s status %v", u.GetGeneration(), u.GetResourceVersion(), st)
		}
	}
	if ds, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{}); err != nil {
		fmt.Fprintf(&b, "\n  deployments: %v", err)
	} else {
		for _, d := range ds.Items {
			s := d.Status
			fmt.Fprintf(&b, "\n  Deployment %s gen %d rv %s: observedGen %d replicas %d updated %d ready %d available %d unavailable %d",
				d.Name, d.Generation, d.ResourceVersion, s.ObservedGeneration, s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas, s.UnavailableReplicas)
			for _, c := range s.Conditions {
				fmt.Fprintf(&b, " %s=%s/%s", c.Type, c.Status, c.Reason)
			}
			cache(appsv1.SchemeGroupVersion.WithKind("Deployment"), d.Name)
		}
	}
	if ds, err := kube.AppsV1().DaemonSets(ns).List(ctx, metav1.ListOptions{}); err != nil {
		fmt.Fprintf(&b, "\n  daemonsets: %v", err)
	} else {
		for _, d := range ds.Items {
			s := d.Status
			fmt.Fprintf(&b, "\n  DaemonSet %s gen %d rv %s: observedGen %d desired %d updated %d ready %d available %d",
				d.Name, d.Generation, d.ResourceVersion, s.ObservedGeneration, s.DesiredNumberScheduled, s.UpdatedNumberScheduled, s.NumberReady, s.NumberAvailable)
			cache(appsv1.SchemeGroupVersion.WithKind("DaemonSet"), d.Name)
		}
	}
	if rss, err := kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{}); err != nil {
		fmt.Fprintf(&b, "\n  replicasets: %v", err)
	} else {
		for _, rs := range rss.Items {
			want := int32(0)
			if rs.Spec.Replicas != nil {
				want = *rs.Spec.Replicas
			}
			fmt.Fprintf(&b, "\n  ReplicaSet %s: spec %d replicas %d ready %d available %d observedGen %d/%d",
				rs.Name, want, rs.Status.Replicas, rs.Status.ReadyReplicas, rs.Status.AvailableReplicas, rs.Status.ObservedGeneration, rs.Generation)
		}
	}
	// The pods now: the test's cleanup logs them too, but only after the
	// uninstall removed them.
	if pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err != nil {
		fmt.Fprintf(&b, "\n  pods: %v", err)
	} else {
		for i := range pods.Items {
			p := &pods.Items[i]
			owner := ""
			if len(p.OwnerReferences) > 0 {
				owner = " of " + p.OwnerReferences[0].Kind + " " + p.OwnerReferences[0].Name
			}
			fmt.Fprintf(&b, "\n  Pod %s%s", DescribePod(p), owner)
		}
	}
	return b.String()
}
