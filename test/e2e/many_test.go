package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/operator"
	"github.com/installstrategy/installstrategy/pkg/store"
)

// syntheticName is the name of every Installation of the synthetic
// product (one per namespace).
const syntheticName = "synthetic"

// publishSynthetic publishes testenv.NamespacedProduct at version in each
// namespace, unsigned (the Installation pins its digest), a few at a time.
func publishSynthetic(ctx context.Context, tb testing.TB, env *testenv.Env, namespaces []string, version string) []store.Entry {
	tb.Helper()
	st, err := store.NewForConfig(env.Config, store.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	entries := make([]store.Entry, len(namespaces))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, ns := range namespaces {
		g.Go(func() error {
			var err error
			if entries[i], err = st.Publish(gctx, ns, testenv.NamespacedProduct(tb, ns, version)); err != nil {
				return fmt.Errorf("publish in %s: %w", ns, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		tb.Fatal(err)
	}
	return entries
}

// createSynthetic creates in each namespace an Installation of the
// strategy publishSynthetic stored there, removing its workloads when
// deleted; a few at a time.
func createSynthetic(ctx context.Context, tb testing.TB, c client.Client, namespaces []string, entries []store.Entry) {
	tb.Helper()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, ns := range namespaces {
		g.Go(func() error {
			in := &v1alpha1.Installation{
				ObjectMeta: metav1.ObjectMeta{Name: syntheticName, Namespace: ns},
				Spec: v1alpha1.InstallationSpec{
					Version: entries[i].Identity.Version, Registry: entries[i].Identity.Registry,
					Strategy:          &v1alpha1.StrategySource{ConfigMap: configMapSource(entries[i])},
					UninstallStrategy: v1alpha1.UninstallRemoveWorkloads,
				},
			}
			if err := c.Create(gctx, in); err != nil {
				return fmt.Errorf("create installation in %s: %w", ns, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		tb.Fatal(err)
	}
}

// deployedAmong counts the Installations of namespaces (total) and those
// of them deployed at version, with one list of every namespace, and
// describes one that is not.
func deployedAmong(ctx context.Context, c client.Client, namespaces []string, version string) (deployed, total int, pending string, err error) {
	want := map[string]bool{}
	for _, ns := range namespaces {
		want[ns] = true
	}
	var list v1alpha1.InstallationList
	if err := c.List(ctx, &list); err != nil {
		return 0, 0, "", err
	}
	for i := range list.Items {
		in := &list.Items[i]
		if !want[in.Namespace] {
			continue
		}
		total++
		if in.IsDeployed() && in.Status.ObservedVersion == version {
			deployed++
		} else if pending == "" {
			pending = in.Namespace + "/" + in.Name + ": " + describe(in)
		}
	}
	return deployed, total, pending, nil
}

// waitAllDeployed waits until the Installation of every namespace is
// deployed at version.
func waitAllDeployed(ctx context.Context, tb testing.TB, c client.Client, namespaces []string, version string) {
	tb.Helper()
	testenv.WaitFor(ctx, tb, fmt.Sprintf("%d installations deployed at %s", len(namespaces), version), func(ctx context.Context) (bool, string, error) {
		n, _, pending, err := deployedAmong(ctx, c, namespaces, version)
		return n == len(namespaces), fmt.Sprintf("%d deployed; first not: %s", n, pending), err
	})
}

// Many Installations of a namespaced product, one per namespace, in one
// operator: all reach Deployed, and their idle resyncs write nothing and
// read as little each as one Installation's does (the bound of
// TestIdleResyncOfKubeVirtReadsFromCaches), so the cost per resync does
// not grow with the number of Installations.
func TestManyInstallationsIdleResyncs(t *testing.T) {
	const installations = 10
	var metrics *operator.Metrics
	e := setup(t, withNamespaces(installations), recorded(), withOptions(func(o *operator.Options) {
		o.ResyncPeriod = 3 * time.Second
		metrics = o.Metrics
	}))
	rec := e.recorder
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	namespaces := e.namespaces()
	createSynthetic(ctx, t, e.c, namespaces, publishSynthetic(ctx, t, e.env, namespaces, "v1.0.0"))
	waitAllDeployed(ctx, t, e.c, namespaces, "v1.0.0")
	deployed := metrics.Reconciles.WithLabelValues("deployed")
	// Let each Installation have a resync after it was found deployed,
	// then count over two more rounds.
	start := testutil.ToFloat64(deployed)
	testenv.WaitFor(ctx, t, "a round of resyncs", func(context.Context) (bool, string, error) {
		return testutil.ToFloat64(deployed) >= start+installations, "", nil
	})
	rec.Reset()
	start = testutil.ToFloat64(deployed)
	testenv.WaitFor(ctx, t, "two rounds of resyncs", func(context.Context) (bool, string, error) {
		n := testutil.ToFloat64(deployed) - start
		return n >= 2*installations, fmt.Sprintf("%v deployed reconciles", n), nil
	})
	writes, reads := rec.Writes(), rec.Reads()
	n := testutil.ToFloat64(deployed) - start
	perResync := float64(len(reads)) / n
	t.Logf("%d installations, %v idle resyncs: %d writes, %d reads (%.1f per resync); reads by resource: %v", installations, n, len(writes), len(reads), perResync, readsByResource(reads))
	if len(writes) != 0 {
		t.Errorf("idle resyncs sent %d writes: %v", len(writes), writes)
	}
	if perResync > 25 {
		t.Errorf("idle resyncs read %.1f times each, want at most 25", perResync)
	}
	if got, _, _, err := deployedAmong(ctx, e.c, namespaces, "v1.0.0"); err != nil || got != installations {
		t.Errorf("after the resyncs %d of %d installations are deployed (%v)", got, installations, err)
	}
}
