package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/operator"
)

// This test is in a file of its own, sorted after the others: run before
// TestStoredProductTamperedAndKeyRotation in the same process, that test's
// operator did not notice the tampered ConfigMap for two minutes (seen on
// 2026-12-01, not yet understood; see docs/NOTES.md).

// Workloads of other products do not enter the operator's caches: with
// 2,000 unrelated Deployments created while the operator runs, the
// informers it reads from and watches through hold the product's
// Deployments only. (They are paused, so the controller-manager makes no
// ReplicaSets for them.)
func TestUnrelatedDeploymentsStayOutOfTheCache(t *testing.T) {
	const unrelated = 2000
	var metrics *operator.Metrics
	e := setup(t, withOptions(func(o *operator.Options) {
		o.ResyncPeriod = 2 * time.Second
		metrics = o.Metrics
	}))
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	e.create(ctx, t, "sample", sampleSpec("v1.0.0"))
	e.waitDeployed(ctx, t, "sample", "v1.0.0")
	other := e.env.Namespace(ctx, t)
	// Removed at the end in one request and waited for: left to the
	// namespace's deletion, 2,000 objects keep the API server busy well
	// into the next tests.
	t.Cleanup(func() {
		cctx := context.WithoutCancel(ctx)
		deployments := e.env.Kube.AppsV1().Deployments(other)
		if err := deployments.DeleteCollection(cctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Errorf("delete the unrelated Deployments: %v", err)
			return
		}
		testenv.WaitFor(cctx, t, "the unrelated Deployments gone", func(ctx context.Context) (bool, string, error) {
			l, err := deployments.List(ctx, metav1.ListOptions{Limit: 1})
			return err == nil && len(l.Items) == 0, "", err
		})
	})
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	zero := int32(0)
	for i := range unrelated {
		g.Go(func() error {
			d := &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("unrelated-%04d", i), Namespace: other, Labels: map[string]string{"app.kubernetes.io/managed-by": "Helm"}},
				Spec: appsv1.DeploymentSpec{
					Replicas: &zero,
					Paused:   true,
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "unrelated"}},
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "unrelated"}},
						Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/unrelated:v1"}}},
					},
				},
			}
			_, err := e.env.Kube.AppsV1().Deployments(other).Create(gctx, d, metav1.CreateOptions{})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	// A resync after they exist.
	deployed := metrics.Reconciles.WithLabelValues("deployed")
	start := testutil.ToFloat64(deployed)
	testenv.WaitFor(ctx, t, "a resync", func(context.Context) (bool, string, error) {
		return testutil.ToFloat64(deployed) > start, "", nil
	})
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("DeploymentList"))
	if err := e.reconciler.LiveCache().List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	product := 0
	for _, d := range list.Items {
		if d.GetNamespace() == other || d.GetLabels()[metakeys.ManagedByLabel] != metakeys.ManagedBy {
			t.Fatalf("Deployment %s/%s (labels %v) is in the operator's cache", d.GetNamespace(), d.GetName(), d.GetLabels())
		}
		if d.GetNamespace() == e.ns {
			product++
		}
	}
	t.Logf("the operator's cache holds %d Deployments, %d of them the product's; the %d unrelated ones are not", len(list.Items), product, unrelated)
	if product == 0 {
		t.Errorf("the product's Deployments are not in the operator's cache")
	}
}
