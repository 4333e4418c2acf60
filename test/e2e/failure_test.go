package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/loader"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/operator"
)

// waitDegraded waits until the Installation is Degraded with reason.
func (e *e2e) waitDegraded(ctx context.Context, t *testing.T, name, reason string) *v1alpha1.Installation {
	t.Helper()
	var last *v1alpha1.Installation
	if err := pollInstallation(ctx, e, name, func(in *v1alpha1.Installation) bool {
		last = in
		c := in.Condition(v1alpha1.ConditionDegraded)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == reason
	}); err != nil {
		t.Fatalf("%s degraded with %s: %v; last %s", name, reason, err, describe(last))
	}
	return last
}

// A strategy ConfigMap deploys as it is, placed by the Installation (pull
// secrets and placement reach every source); once its digest no longer
// matches, the Installation is Degraded with StrategyTampered and nothing
// is applied or removed.
func TestConfigMapSourceAndTampering(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	s, entry := e.publishSample(ctx, t, "v1.0.0")
	spec := sampleSpec("v1.0.0")
	// Unsigned: applied because its digest is pinned (see trust_test.go).
	spec.Strategy = &v1alpha1.StrategySource{ConfigMap: &v1alpha1.ConfigMapStrategySource{Name: entry.Name, Digest: entry.Digest}}
	spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "cm-pull"}}
	spec.Workloads = &v1alpha1.NodePlacement{NodeSelector: map[string]string{kwokTypeLabel: "kwok"}}
	e.create(ctx, t, "sample", spec)
	in := e.waitDeployed(ctx, t, "sample", "v1.0.0")
	var ds appsv1.DaemonSet
	if !e.exists(ctx, t, &ds, "sample-handler") {
		t.Fatal("daemonset sample-handler missing")
	}
	if pod := ds.Spec.Template.Spec; len(pod.ImagePullSecrets) != 1 || pod.ImagePullSecrets[0].Name != "cm-pull" || pod.NodeSelector[kwokTypeLabel] != "kwok" {
		t.Errorf("sample-handler from a stored strategy: imagePullSecrets %v nodeSelector %v, want cm-pull and %s=kwok", pod.ImagePullSecrets, pod.NodeSelector, kwokTypeLabel)
	}
	if src := in.Status.Strategy; src == nil || src.Source != v1alpha1.StrategySourceConfigMap || src.ConfigMap != e.ns+"/"+entry.Name || src.Digest != entry.Digest {
		t.Errorf("status.strategy %+v, want configmap %s with digest %s", src, entry.Name, entry.Digest)
	}
	if in.Status.ObservedIdentifier != s.Identity.Identifier {
		t.Errorf("observed identifier %s, want the stored strategy's %s", in.Status.ObservedIdentifier, s.Identity.Identifier)
	}

	// Tamper with the recorded digest; the ConfigMap watch reconciles.
	patch := []byte(`{"metadata":{"annotations":{"` + metakeys.DigestAnnotation + `":"sha256:` + strings.Repeat("0", 64) + `"}}}`)
	if _, err := e.env.Kube.CoreV1().ConfigMaps(e.ns).Patch(ctx, entry.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	in = e.waitDegraded(ctx, t, "sample", v1alpha1.ReasonStrategyTampered)
	if in.Status.Phase != v1alpha1.PhaseFailed || !strings.Contains(in.Condition(v1alpha1.ConditionDegraded).Message, entry.Name) {
		t.Errorf("tampered: %s; message %q", describe(in), in.Condition(v1alpha1.ConditionDegraded).Message)
	}
	var d appsv1.Deployment
	if !e.exists(ctx, t, &d, "sample-api") {
		t.Error("a tampered strategy removed sample-api")
	}
}

// A dump Job that completes without publishing a strategy (kwok runs no
// container) is noticed: Degraded with DumpJobFailed. Once the image works
// — the test does what the container would, the dump mode with the Job's
// own configuration — a later attempt finds the strategy and the
// Installation recovers to Deployed.
func TestImageSourceDumpJobFails(t *testing.T) {
	e := setup(t, withOptions(func(o *operator.Options) { o.DumpPodLabels = testenv.BehaviourLabels(testenv.BehaviourAwaitResult) }))
	ctx := t.Context()
	spec := sampleSpec("v1.0.0")
	spec.Strategy = &v1alpha1.StrategySource{Image: "registry.example/sample/sample-operator:v1.0.0"}
	e.create(ctx, t, "sample", spec)
	first, _ := e.env.WaitDumpJob(ctx, t, e.ns)
	e.env.FinishDumpJob(ctx, t, e.ns, first.Name, "") // succeeds, reports nothing
	in := e.waitDegraded(ctx, t, "sample", v1alpha1.ReasonDumpJobFailed)
	if in.Status.Strategy != nil && in.Status.ObservedIdentifier != "" {
		t.Errorf("a failed dump deployed something: %s", describe(in))
	}
	if e.exists(ctx, t, &appsv1.Deployment{}, "sample-api") {
		t.Error("sample-api exists without a strategy")
	}
	// The failed Job was cleaned up by the loader.
	jobs := &batchv1.JobList{}
	if err := e.c.List(ctx, jobs, client.InNamespace(e.ns), client.HasLabels{metakeys.DumpJobLabel}); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs.Items {
		if cond, _ := testenv.JobFinished(&j); cond != "" {
			t.Errorf("finished dump job %s left behind", j.Name)
		}
	}

	// The loader tries again with a new Job; this time it does its work.
	e.env.RunDumpJob(ctx, t, e.ns)
	in = e.waitDeployed(ctx, t, "sample", "v1.0.0")
	if c := in.Condition(v1alpha1.ConditionDegraded); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("recovered, but Degraded is %+v", c)
	}
}

// The built-in product at a version other than the operator's own is
// dumped by a Job of the operator's image (which, on kwok, publishes
// nothing: DumpJobFailed).
func TestProductOfAnotherVersionIsDumped(t *testing.T) {
	const image = "registry.example/sample/sample-operator:v1.0.0"
	e := setup(t, withOptions(func(o *operator.Options) {
		o.Defaults.Version = "v1.0.0"
		o.OperatorImage = image
	}))
	ctx := t.Context()
	e.create(ctx, t, "sample", sampleSpec("v1.1.0"))
	in := e.waitDegraded(ctx, t, "sample", v1alpha1.ReasonDumpJobFailed)
	if !strings.Contains(in.Condition(v1alpha1.ConditionDegraded).Message, loader.JobNamePrefix) {
		t.Errorf("degraded message %q does not name the dump job", in.Condition(v1alpha1.ConditionDegraded).Message)
	}
	if e.exists(ctx, t, &appsv1.Deployment{}, "sample-api") {
		t.Error("sample-api exists without a strategy")
	}
}

// An upgrade whose handler pods crash-loop stops at the DaemonSet canary:
// Degraded with CanaryFailed, phase Failed, and the api Deployment (last on
// the update path) still runs the old version.
func TestCanaryFailureStopsUpgrade(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	e.create(ctx, t, "sample", sampleSpec("v1.0.0"))
	e.waitDeployed(ctx, t, "sample", "v1.0.0")
	e.update(ctx, t, "sample", func(in *v1alpha1.Installation) {
		in.Spec.Version = "v1.1.0"
		in.Spec.CustomizeComponents = &v1alpha1.CustomizeComponents{Patches: []v1alpha1.CustomizePatch{{
			ResourceKind: "DaemonSet", ResourceName: "sample-handler", Type: v1alpha1.StrategicMergePatchType,
			Patch: `{"spec":{"template":{"metadata":{"labels":{"` + testenv.BehaviourLabel + `":"` + string(testenv.BehaviourCrashLoop) + `"}}}}}`,
		}}}
	})
	in := e.waitDegraded(ctx, t, "sample", v1alpha1.ReasonCanaryFailed)
	if in.Status.Phase != v1alpha1.PhaseFailed || in.Status.ObservedVersion != "v1.0.0" || in.Status.TargetVersion != "v1.1.0" {
		t.Errorf("after the failed canary: %s", describe(in))
	}
	var d appsv1.Deployment
	e.exists(ctx, t, &d, "sample-api")
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "registry.example/sample/sample-api:v1.0.0" {
		t.Errorf("sample-api runs %s, want v1.0.0 (api is updated last)", img)
	}
}

// A deleted workload is recreated (the Deployment watch reconciles).
func TestDriftIsRepaired(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	e.create(ctx, t, "sample", sampleSpec("v1.0.0"))
	e.waitDeployed(ctx, t, "sample", "v1.0.0")
	var d appsv1.Deployment
	if !e.exists(ctx, t, &d, "sample-controller") {
		t.Fatal("sample-controller missing")
	}
	uid := d.UID
	if err := e.c.Delete(ctx, &d); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(ctx, t, "sample-controller recreated", func(ctx context.Context) (bool, string, error) {
		var now appsv1.Deployment
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "sample-controller"}, &now); err != nil {
			return false, "", err
		}
		return now.UID != uid, "uid " + string(now.UID), nil
	})
	e.env.WaitDeploymentRolledOut(ctx, t, e.ns, "sample-controller")
}

// A deployed Installation whose workload starts to fail after the rollout
// is Degraded with DeploymentFailed by a later reconcile, keeps its phase
// and observed version, stays Degraded while the workload fails, and is no
// longer Degraded once it is healthy again. The workload's pods flap as a
// container without a readiness probe that crashes soon after each start
// does (someone else's change to its template adds the kwok behaviour):
// Ready for a few seconds between crashes, when the Deployment's status
// says it is rolled out. Seen on the real node: a resync in such a moment
// cleared Degraded, and the Installation showed Deployed with
// Degraded=False while its other resyncs failed.
func TestResyncFailureStaysDegraded(t *testing.T) {
	var metrics *operator.Metrics
	e := setup(t, withOptions(func(o *operator.Options) {
		o.ResyncPeriod, o.StageDeadline = 2*time.Second, 20*time.Second
		metrics = o.Metrics
	}))
	ctx := t.Context()
	e.create(ctx, t, "sample", sampleSpec("v1.0.0"))
	e.waitDeployed(ctx, t, "sample", "v1.0.0")
	flap := func(on bool) {
		t.Helper()
		value := `"` + string(testenv.BehaviourFlapping) + `"`
		if !on {
			value = "null"
		}
		patch := `{"spec":{"template":{"metadata":{"labels":{"` + testenv.BehaviourLabel + `":` + value + `}}}}}`
		if _, err := e.env.Kube.AppsV1().Deployments(e.ns).Patch(ctx, "sample-controller", types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "someone-else"}); err != nil {
			t.Fatal(err)
		}
	}
	flap(true)
	in := e.waitDegraded(ctx, t, "sample", v1alpha1.ReasonDeploymentFailed)
	if in.Status.Phase != v1alpha1.PhaseDeployed || in.Status.ObservedVersion != "v1.0.0" {
		t.Errorf("after the failed resync: %s", describe(in))
	}
	if c := in.Condition(v1alpha1.ConditionDegraded); !strings.Contains(c.Message, "sample-controller") {
		t.Errorf("Degraded does not name the failing workload: %q", c.Message)
	}
	// The resyncs that follow meet the pods between crashes too: the
	// condition stays.
	reconciles := func() (n float64) {
		for _, o := range operator.Outcomes {
			n += testutil.ToFloat64(metrics.Reconciles.WithLabelValues(o))
		}
		return n
	}
	start := reconciles()
	testenv.WaitFor(ctx, t, "eight more reconciles, Degraded all along", func(ctx context.Context) (bool, string, error) {
		in, err := e.get(ctx, "sample")
		if err != nil {
			return false, "", err
		}
		if c := in.Condition(v1alpha1.ConditionDegraded); c == nil || c.Status != metav1.ConditionTrue {
			t.Fatalf("Degraded cleared while the workload still fails: %s", describe(in))
		}
		n := reconciles()
		return n >= start+8, fmt.Sprintf("%v reconciles", n-start), nil
	})
	flap(false)
	testenv.WaitFor(ctx, t, "Degraded=False once the workload is healthy", func(ctx context.Context) (bool, string, error) {
		in, err := e.get(ctx, "sample")
		if err != nil {
			return false, "", err
		}
		c := in.Condition(v1alpha1.ConditionDegraded)
		return c != nil && c.Status == metav1.ConditionFalse && in.Status.Phase == v1alpha1.PhaseDeployed, describe(in), nil
	})
}
