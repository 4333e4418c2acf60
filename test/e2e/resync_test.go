package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/apply/applytest"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/operator"
)

// An unchanged resync writes nothing, status included: over resyncs that
// found the Installation deployed, the operator sends no write request at
// all. (A resourceVersion cannot show it: the API server keeps it for an
// update that changes nothing.)
func TestUnchangedResyncWritesNoStatus(t *testing.T) {
	e, rec, metrics := setupResyncing(t)
	ctx := t.Context()
	e.create(ctx, t, "sample", sampleSpec("v1.0.0"))
	in := e.waitDeployed(ctx, t, "sample", "v1.0.0")
	deployed := metrics.Reconciles.WithLabelValues("deployed")
	// Let the reconcile that found the rollout done settle, then watch
	// two more.
	testenv.WaitFor(ctx, t, "a resync after deployed", func(context.Context) (bool, string, error) {
		return testutil.ToFloat64(deployed) >= 1, "", nil
	})
	in, err := e.get(ctx, "sample")
	if err != nil {
		t.Fatal(err)
	}
	rec.Reset()
	rv := in.ResourceVersion
	waitResyncs(ctx, t, deployed, 2)
	in, err = e.get(ctx, "sample")
	if err != nil {
		t.Fatal(err)
	}
	if w := rec.Writes(); len(w) != 0 {
		t.Errorf("resyncs of a deployed Installation sent %d writes: %v", len(w), w)
	}
	if in.ResourceVersion != rv {
		t.Errorf("resyncs of a deployed Installation wrote it: resourceVersion %s -> %s; status now %s", rv, in.ResourceVersion, describe(in))
	}
}

// setupResyncing starts an operator that resyncs every 2 seconds and
// records its requests.
func setupResyncing(t *testing.T) (*e2e, *applytest.Recorder, *operator.Metrics) {
	var metrics *operator.Metrics
	e := setup(t, recorded(), withOptions(func(o *operator.Options) {
		o.ResyncPeriod = 2 * time.Second
		metrics = o.Metrics
	}))
	return e, e.recorder, metrics
}

// waitResyncs waits until the counter of reconciles has grown by n.
func waitResyncs(ctx context.Context, t *testing.T, reconciles prometheus.Counter, n float64) {
	t.Helper()
	start := testutil.ToFloat64(reconciles)
	testenv.WaitFor(ctx, t, fmt.Sprintf("%v resyncs", n), func(context.Context) (bool, string, error) {
		got := testutil.ToFloat64(reconciles)
		return got >= start+n, fmt.Sprintf("%v reconciles", got), nil
	})
}

// setupCounted starts an operator that resyncs hourly (no resync within a
// test) and returns its metrics and a count of its reconciles so far.
func setupCounted(t *testing.T) (*e2e, *operator.Metrics, func() float64) {
	var metrics *operator.Metrics
	e := setup(t, recorded(), withOptions(func(o *operator.Options) {
		o.ResyncPeriod = time.Hour
		metrics = o.Metrics
	}))
	return e, metrics, func() (n float64) {
		for _, o := range operator.Outcomes {
			n += testutil.ToFloat64(metrics.Reconciles.WithLabelValues(o))
		}
		return n
	}
}

// A new Installation's rollout is one reconcile: the finalizer the
// operator adds in it queues no second one, which would load, parse and
// apply the whole strategy again at once.
func TestFirstRolloutIsOneReconcile(t *testing.T) {
	e, metrics, reconciles := setupCounted(t)
	ctx := t.Context()
	e.create(ctx, t, "sample", sampleSpec("v1.0.0"))
	e.waitDeployed(ctx, t, "sample", "v1.0.0")
	testenv.WaitFor(ctx, t, "the rollout's reconcile to return", func(context.Context) (bool, string, error) {
		return reconciles() >= 1, "", nil
	})
	// A key queued while its reconcile ran is reconciled again as soon as
	// that one returns: give it the time to show.
	time.Sleep(2 * time.Second)
	if n := reconciles(); n != 1 {
		t.Errorf("%v reconciles after the first rollout, want 1", n)
	}
	if n := testutil.ToFloat64(metrics.StrategyLoads.WithLabelValues("product")); n != 1 {
		t.Errorf("strategy loaded %v times, want 1", n)
	}
}

// An upgrade is one reconcile too: the rollout's own writes of its
// workloads (a new generation of each) do not queue another complete pass
// right after it, which would read and parse the strategy again.
func TestUpgradeIsOneReconcile(t *testing.T) {
	e, _, reconciles := setupCounted(t)
	ctx := t.Context()
	e.create(ctx, t, "sample", sampleSpec("v1.0.0"))
	e.waitDeployed(ctx, t, "sample", "v1.0.0")
	deploys, err := e.env.Kube.AppsV1().Deployments(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(deploys.Items) == 0 {
		t.Fatalf("no Deployment of the sample product: %v", err)
	}
	time.Sleep(2 * time.Second)
	before := reconciles()
	e.update(ctx, t, "sample", func(in *v1alpha1.Installation) { in.Spec.Version = "v1.1.0" })
	e.waitDeployed(ctx, t, "sample", "v1.1.0")
	after, err := e.env.Kube.AppsV1().Deployments(e.ns).Get(ctx, deploys.Items[0].Name, metav1.GetOptions{})
	if err != nil || after.Generation <= deploys.Items[0].Generation {
		t.Fatalf("the upgrade wrote no new generation of Deployment %s (%v): the test shows nothing", deploys.Items[0].Name, err)
	}
	testenv.WaitFor(ctx, t, "the upgrade's reconcile to return", func(context.Context) (bool, string, error) {
		return reconciles() >= before+1, "", nil
	})
	time.Sleep(2 * time.Second)
	if n := reconciles() - before; n != 1 {
		t.Errorf("%v reconciles for the upgrade, want 1", n)
	}
}

// A workload someone deletes while a rollout runs is recreated right after
// it, not at the next resync (an hour here): changes seen during a rollout
// are judged at its end, and one it did not make reconciles again. The
// deletion comes once the workload's step is ready and while the last
// step waits, so the rollout itself does not fail on it.
func TestDeletionDuringRolloutIsRepaired(t *testing.T) {
	e, metrics, _ := setupCounted(t)
	ctx := t.Context()
	failed := func() (n float64) {
		for _, o := range []string{"degraded", "error"} {
			n += testutil.ToFloat64(metrics.Reconciles.WithLabelValues(o))
		}
		return n
	}
	// The API's step, the last, takes a few seconds: its pods count as
	// available 4 s after they are ready.
	spec := sampleSpec("v1.0.0")
	spec.CustomizeComponents = &v1alpha1.CustomizeComponents{Patches: []v1alpha1.CustomizePatch{{
		ResourceKind: "Deployment", ResourceName: "sample-api", Type: v1alpha1.MergePatchType, Patch: `{"spec":{"minReadySeconds":4}}`,
	}}}
	e.create(ctx, t, "sample", spec)
	e.waitDeployed(ctx, t, "sample", "v1.0.0")
	// The controller's step is ready and the API's, after it on the
	// update path, is not: the status reports the components at each
	// step's end (and those of the previous version, all rolled over,
	// before the first), and the Deployment runs the target, rolled out.
	stepReady := func(in *v1alpha1.Installation, d *appsv1.Deployment, version string) bool {
		rolled := map[string]bool{}
		for _, c := range in.Status.Components {
			rolled[c.Name] = c.RolledOver
		}
		st := d.Status
		return in.Status.Phase == v1alpha1.PhaseDeploying && in.Status.TargetVersion == version &&
			rolled["sample-controller"] && !rolled["sample-api"] &&
			strings.HasSuffix(d.Spec.Template.Spec.Containers[0].Image, ":"+version) &&
			st.ObservedGeneration == d.Generation && d.Spec.Replicas != nil && st.UpdatedReplicas == *d.Spec.Replicas &&
			st.AvailableReplicas == *d.Spec.Replicas && st.Replicas == *d.Spec.Replicas
	}
	// A rollout can end before the deletion is seen: try again.
	for attempt, version := range []string{"v1.1.0", "v1.0.0", "v1.1.0", "v1.0.0", "v1.1.0", "v1.0.0"} {
		before := failed()
		e.update(ctx, t, "sample", func(in *v1alpha1.Installation) { in.Spec.Version = version })
		var deleted types.UID
		for {
			in, err := e.get(ctx, "sample")
			if err != nil {
				t.Fatal(err)
			}
			if in.IsDeployed() && in.Status.ObservedVersion == version {
				break
			}
			d, err := e.env.Kube.AppsV1().Deployments(e.ns).Get(ctx, "sample-controller", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if stepReady(in, d, version) {
				if err := e.env.Kube.AppsV1().Deployments(e.ns).Delete(ctx, d.Name, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				if in, err := e.get(ctx, "sample"); err == nil && in.Status.Phase == v1alpha1.PhaseDeploying {
					deleted = d.UID
				}
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		e.waitDeployed(ctx, t, "sample", version)
		if deleted == "" {
			t.Logf("attempt %d: the rollout to %s ended before the deletion", attempt+1, version)
			continue
		}
		testenv.WaitFor(ctx, t, "sample-controller recreated after the rollout", func(ctx context.Context) (bool, string, error) {
			d, err := e.env.Kube.AppsV1().Deployments(e.ns).Get(ctx, "sample-controller", metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			return d.UID != deleted, "uid " + string(d.UID), nil
		})
		if n := failed() - before; n != 0 {
			t.Errorf("%v reconciles failed: the rollout stumbled on the deletion instead of finishing and repairing it after", n)
		}
		return
	}
	t.Fatal("in 6 rollouts, no deletion of sample-controller landed while one ran")
}

// The informers of the kind table's kinds start with the operator, as
// virt-operator's do, not one kind at a time during the first rollout:
// installing the sample product starts no watch of them.
func TestInformersStartBeforeTheFirstRollout(t *testing.T) {
	e := setup(t, recorded())
	rec := e.recorder
	ctx := t.Context()
	select {
	case <-e.reconciler.Warmed():
	case <-ctx.Done():
		t.Fatal("the informers never started")
	}
	if err := e.reconciler.InformersStarted(nil); err != nil {
		t.Fatalf("readiness after the informers started: %v", err)
	}
	// Informers watch cluster-wide: /api/v1/RES, /apis/G/V/RES.
	table := map[string]string{}
	for _, info := range kinds.All() {
		p := "apis/" + info.GroupKind.Group + "/" + info.Version + "/" + info.Resource
		if info.GroupKind.Group == "" {
			p = "api/" + info.Version + "/" + info.Resource
		}
		table[p] = info.GroupKind.String()
	}
	watchedKinds := func() map[string]string {
		out := map[string]string{}
		for _, w := range rec.Watches() {
			if k, ok := table[strings.Trim(w.Path, "/")]; ok {
				out[k] = w.Path + "?" + w.Query
			}
		}
		return out
	}
	started := watchedKinds()
	for _, k := range []string{"Deployment.apps", "ClusterRole.rbac.authorization.k8s.io", "Secret", "CustomResourceDefinition.apiextensions.k8s.io", "ValidatingWebhookConfiguration.admissionregistration.k8s.io"} {
		if started[k] == "" {
			t.Errorf("no informer of %s started with the operator (watches: %v)", k, started)
		}
	}
	rec.Reset()
	e.create(ctx, t, "sample", sampleSpec("v1.0.0"))
	e.waitDeployed(ctx, t, "sample", "v1.0.0")
	for k, w := range watchedKinds() {
		t.Errorf("the first rollout started the informer of %s: GET %s", k, w)
	}
}

// An idle resync of KubeVirt v1.9.0 (its 245 objects, from its stored
// ConfigMap) costs almost nothing: no write, and at most 25 reads, since
// live objects come from caches of the installation's objects, not from
// one GET each.
func TestIdleResyncOfKubeVirtReadsFromCaches(t *testing.T) {
	const resyncs = 3
	var metrics *operator.Metrics
	e := setup(t, recorded(), withOptions(func(o *operator.Options) {
		o.ResyncPeriod = 3 * time.Second
		metrics = o.Metrics
	}))
	rec := e.recorder
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	// KubeVirt as shipped: a stand-in serves virt-api's webhooks
	// (failurePolicy Fail) with the certificate in its Secret.
	s := testenv.KubeVirtStrategyAsShipped(t, "v1.9.0")
	e.env.ServeWebhookStandIn(ctx, t, "kubevirt", "virt-api", "kubevirt-virt-api-certs")
	entry := e.publish(ctx, t, s)
	spec := v1alpha1.InstallationSpec{Version: s.Identity.Version, Registry: s.Identity.Registry,
		Strategy: &v1alpha1.StrategySource{ConfigMap: configMapSource(entry)}, PruneCRDs: true}
	rec.Reset()
	e.create(ctx, t, "kubevirt", spec)
	e.waitDeployed(ctx, t, "kubevirt", s.Identity.Version)
	// While installing, each workload is read a few times (before its
	// write, the final status refresh), not at every progress refresh.
	workloadGets := map[string]int{}
	for _, r := range rec.Reads() {
		if p := resourcePath(r.Path); strings.HasSuffix(p, "/deployments") || strings.HasSuffix(p, "/daemonsets") {
			workloadGets[r.Path]++
		}
	}
	for path, n := range workloadGets {
		if n > 3 {
			t.Errorf("installing read %s %d times, want at most 3", path, n)
		}
	}
	t.Logf("workload reads while installing: %v", workloadGets)
	// Objects the cache does not hold yet are looked up with a list per
	// resource and namespace (apply.Probe), not a read each; a status
	// write starts from the reconcile's last one, not from a read.
	objectGets, installationGets := 0, 0
	paths := map[string]bool{}
	for _, o := range s.Objects {
		paths[o.GetName()] = true
	}
	for _, r := range rec.Reads() {
		name := r.Path[strings.LastIndex(r.Path, "/")+1:]
		switch {
		case strings.Contains(r.Path, "/installations/"):
			installationGets++
		case r.Query == "" && paths[name]:
			objectGets++
		}
	}
	reconciles := counterSum(t, metrics.Reconciles)
	t.Logf("installing: %d writes, %d reads (%d of single strategy objects, %d of the Installation over %v reconciles); reads by resource: %v",
		len(rec.Writes()), len(rec.Reads()), objectGets, installationGets, reconciles, readsByResource(rec.Reads()))
	if limit := len(s.Objects) / 5; objectGets > limit {
		t.Errorf("installing read single strategy objects %d times, want at most %d (a fifth of the objects)", objectGets, limit)
	}
	if float64(installationGets) > reconciles+1 {
		t.Errorf("installing read the Installation %d times in %v reconciles, want at most one each", installationGets, reconciles)
	}
	deployed := metrics.Reconciles.WithLabelValues("deployed")
	testenv.WaitFor(ctx, t, "a resync after deployed", func(context.Context) (bool, string, error) {
		return testutil.ToFloat64(deployed) >= 1, "", nil
	})
	// Start counting at the end of a resync.
	start := testutil.ToFloat64(deployed)
	testenv.WaitFor(ctx, t, "the next resync", func(context.Context) (bool, string, error) {
		return testutil.ToFloat64(deployed) > start, "", nil
	})
	rec.Reset()
	start = testutil.ToFloat64(deployed)
	testenv.WaitFor(ctx, t, fmt.Sprintf("%d resyncs", resyncs), func(context.Context) (bool, string, error) {
		n := testutil.ToFloat64(deployed)
		return n >= start+resyncs, fmt.Sprintf("%v deployed reconciles", n-start), nil
	})
	writes, reads := rec.Writes(), rec.Reads()
	n := testutil.ToFloat64(deployed) - start
	perResync := float64(len(reads)) / n
	t.Logf("%v idle resyncs of %d objects: %d writes, %d reads (%.1f per resync); reads by resource: %v", n, len(s.Objects), len(writes), len(reads), perResync, readsByResource(reads))
	if len(writes) != 0 {
		t.Errorf("idle resyncs sent %d writes: %v", len(writes), writes)
	}
	if perResync > 25 {
		t.Errorf("idle resyncs read %.1f times each, want at most 25", perResync)
	}
}

// readsByResource counts reads by the resource they read.
func readsByResource(reads []applytest.Read) map[string]int {
	byPath := map[string]int{}
	for _, r := range reads {
		byPath[resourcePath(r.Path)]++
	}
	return byPath
}

// resourcePath is a request path without the object's name: the resource
// it reads.
func resourcePath(p string) string {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	// /api/v1/namespaces/NS/RES/NAME, /apis/G/V/namespaces/NS/RES/NAME,
	// /apis/G/V/RES/NAME: keep up to the resource.
	for i := 0; i+1 < len(parts); i++ {
		if parts[i] == "namespaces" && i+2 < len(parts) {
			return strings.Join(append(parts[:i+1:i+1], parts[i+2]), "/")
		}
	}
	if len(parts) > 3 && parts[0] == "apis" {
		return strings.Join(parts[:4], "/")
	}
	if len(parts) > 2 && parts[0] == "api" {
		return strings.Join(parts[:3], "/")
	}
	return p
}

// counterSum is the sum of a counter over all its labels.
func counterSum(t *testing.T, c *prometheus.CounterVec) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 64)
	go func() { c.Collect(ch); close(ch) }()
	sum := 0.0
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		sum += pb.GetCounter().GetValue()
	}
	return sum
}
