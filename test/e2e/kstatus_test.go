package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/operator"
)

// kstatusOf reads the Installation from the API server as a GitOps tool
// does (unstructured) and returns what kstatus computes for it, and the
// Installation.
func (e *e2e) kstatusOf(ctx context.Context, t *testing.T, name string) (*kstatus.Result, *v1alpha1.Installation) {
	t.Helper()
	u, err := e.env.Dynamic.Resource(v1alpha1.GroupVersion.WithResource("installations")).Namespace(e.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := kstatus.Compute(u)
	if err != nil {
		t.Fatal(err)
	}
	in := &v1alpha1.Installation{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, in); err != nil {
		t.Fatal(err)
	}
	return res, in
}

// assertCurrentMeansRolledOver fails the test when kstatus says Current
// while the Installation is not fully rolled over at version for its
// generation: Ready=True for this generation, phase Deployed, the target
// observed, every component rolled over.
func assertCurrentMeansRolledOver(t *testing.T, res *kstatus.Result, in *v1alpha1.Installation, version string) {
	t.Helper()
	if res.Status != kstatus.CurrentStatus {
		return
	}
	ready := in.Condition(v1alpha1.ConditionReady)
	ok := ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == in.Generation &&
		in.IsDeployed() && in.Status.ObservedVersion == version && len(in.Status.Components) > 0
	for _, c := range in.Status.Components {
		ok = ok && c.RolledOver
	}
	if !ok {
		t.Fatalf("kstatus Current before %s is rolled over: %s; components %+v", version, describe(in), in.Status.Components)
	}
}

// waitKstatus polls kstatus until it is want, asserting on every look that
// Current means rolled over at version, and returns the Installation and
// the statuses seen on the way.
func (e *e2e) waitKstatus(ctx context.Context, t *testing.T, name, version string, want kstatus.Status) (*v1alpha1.Installation, map[kstatus.Status]bool) {
	t.Helper()
	seen := map[kstatus.Status]bool{}
	var last *v1alpha1.Installation
	testenv.WaitFor(ctx, t, fmt.Sprintf("kstatus %s of %s", want, name), func(ctx context.Context) (bool, string, error) {
		res, in := e.kstatusOf(ctx, t, name)
		seen[res.Status] = true
		last = in
		assertCurrentMeansRolledOver(t, res, in, version)
		return res.Status == want, fmt.Sprintf("kstatus %s (%s); %s", res.Status, res.Message, describe(in)), nil
	})
	return last, seen
}

// kstatus (what Flux's wait, Helm 4's --wait and cli-utils use) follows
// the rollout: InProgress from the moment the Installation exists, Current
// only once the product is rolled over; an upgrade is InProgress at once
// after the spec change (observedGeneration) and until the new version is
// rolled over; kubectl wait --for=condition=Ready returns only then.
func TestKstatusFollowsTheRollout(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	e.create(ctx, t, "sample", sampleSpec("v1.0.0"))
	if res, in := e.kstatusOf(ctx, t, "sample"); res.Status != kstatus.InProgressStatus {
		t.Errorf("kstatus right after create = %s (%s), want InProgress; %s", res.Status, res.Message, describe(in))
	}
	in, seen := e.waitKstatus(ctx, t, "sample", "v1.0.0", kstatus.CurrentStatus)
	if !seen[kstatus.InProgressStatus] || seen[kstatus.FailedStatus] {
		t.Errorf("kstatus seen during the install: %v, want InProgress then Current", seen)
	}
	assertCondition(t, in, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllComponentsReady)
	assertCondition(t, in, v1alpha1.ConditionReconciling, metav1.ConditionFalse, v1alpha1.ReasonAllComponentsReady)
	assertCondition(t, in, v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonAllComponentsReady)
	// Today's conditions are kept.
	assertCondition(t, in, v1alpha1.ConditionAvailable, metav1.ConditionTrue, v1alpha1.ReasonAllComponentsReady)
	assertCondition(t, in, v1alpha1.ConditionProgressing, metav1.ConditionFalse, v1alpha1.ReasonAllComponentsReady)

	// Upgrade: InProgress at once, and kubectl wait (run from the spec
	// change on) returns only once v1.1.0 is rolled over.
	e.update(ctx, t, "sample", func(in *v1alpha1.Installation) { in.Spec.Version = "v1.1.0" })
	res, cur := e.kstatusOf(ctx, t, "sample")
	if res.Status != kstatus.InProgressStatus {
		t.Errorf("kstatus right after the spec change = %s (%s), want InProgress; %s", res.Status, res.Message, describe(cur))
	}
	waited := make(chan error, 1)
	go func() {
		waited <- kubectlWait(ctx, t, "installation/sample", "-n", e.ns, "--for", "condition=Ready", "--timeout", "3m")
	}()
	var sawReconciling bool
	testenv.WaitFor(ctx, t, "kubectl wait --for=condition=Ready returns", func(ctx context.Context) (bool, string, error) {
		res, in := e.kstatusOf(ctx, t, "sample")
		assertCurrentMeansRolledOver(t, res, in, "v1.1.0")
		if c := in.Condition(v1alpha1.ConditionReconciling); c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonUpdateInProgress {
			sawReconciling = true
		}
		select {
		case err := <-waited:
			if err != nil {
				t.Fatalf("kubectl wait: %v", err)
			}
			return true, "", nil
		default:
			return false, fmt.Sprintf("kstatus %s; %s", res.Status, describe(in)), nil
		}
	})
	// kubectl wait returned: the product is rolled over at v1.1.0.
	res, in = e.kstatusOf(ctx, t, "sample")
	if res.Status != kstatus.CurrentStatus || !in.IsDeployed() || in.Status.ObservedVersion != "v1.1.0" {
		t.Errorf("after kubectl wait: kstatus %s (%s); %s", res.Status, res.Message, describe(in))
	}
	if !sawReconciling {
		t.Error("never saw Reconciling=True/UpdateInProgress during the upgrade")
	}
}

// waitStalled waits until kstatus says Failed, with Stalled=True for
// reason (Ready and Reconciling False), and returns the Installation.
func (e *e2e) waitStalled(ctx context.Context, t *testing.T, name, version, reason string) *v1alpha1.Installation {
	t.Helper()
	in, _ := e.waitKstatus(ctx, t, name, version, kstatus.FailedStatus)
	assertCondition(t, in, v1alpha1.ConditionStalled, metav1.ConditionTrue, reason)
	assertCondition(t, in, v1alpha1.ConditionReady, metav1.ConditionFalse, reason)
	assertCondition(t, in, v1alpha1.ConditionReconciling, metav1.ConditionFalse, reason)
	if c := in.Condition(v1alpha1.ConditionStalled); c != nil && c.ObservedGeneration != in.Generation {
		t.Errorf("Stalled observed generation %d, want %d", c.ObservedGeneration, in.Generation)
	}
	return in
}

// A refused strategy is Stalled (kstatus Failed) rather than InProgress
// for ever: an unsigned strategy ConfigMap without a pinned digest, and an
// invalid spec (a customizeComponents patch that does not apply) on an
// upgrade. Fixing the spec makes it Current again.
func TestKstatusStalledOnRefusal(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	_, entry := e.publishSample(ctx, t, "v1.0.0")
	spec := sampleSpec("v1.0.0")
	spec.Strategy = &v1alpha1.StrategySource{ConfigMap: &v1alpha1.ConfigMapStrategySource{Name: entry.Name}}
	e.create(ctx, t, "sample", spec)
	in := e.waitStalled(ctx, t, "sample", "v1.0.0", v1alpha1.ReasonUntrustedStrategy)
	if !strings.Contains(in.Condition(v1alpha1.ConditionStalled).Message, entry.Name) {
		t.Errorf("Stalled does not name the ConfigMap: %q", in.Condition(v1alpha1.ConditionStalled).Message)
	}

	// Pinned: trusted, rolled out, Current.
	e.update(ctx, t, "sample", func(in *v1alpha1.Installation) { in.Spec.Strategy.ConfigMap.Digest = entry.Digest })
	e.waitKstatus(ctx, t, "sample", "v1.0.0", kstatus.CurrentStatus)

	// An upgrade whose patch cannot apply: refused before anything is
	// written, the deployed version runs on.
	e.update(ctx, t, "sample", func(in *v1alpha1.Installation) {
		in.Spec.Strategy = nil
		in.Spec.Version = "v1.1.0"
		in.Spec.CustomizeComponents = &v1alpha1.CustomizeComponents{Patches: []v1alpha1.CustomizePatch{{
			ResourceKind: "Deployment", ResourceName: "sample-api", Type: v1alpha1.JSONPatchType,
			Patch: `[{"op":"replace","path":"/spec/no/such/field","value":1}]`,
		}}}
	})
	if res, cur := e.kstatusOf(ctx, t, "sample"); res.Status != kstatus.InProgressStatus {
		t.Errorf("kstatus right after the spec change = %s (%s), want InProgress; %s", res.Status, res.Message, describe(cur))
	}
	in = e.waitStalled(ctx, t, "sample", "v1.1.0", v1alpha1.ReasonInvalidSpec)
	if msg := in.Condition(v1alpha1.ConditionStalled).Message; !strings.Contains(msg, "customize patch 0") {
		t.Errorf("Stalled message %q does not name the patch", msg)
	}
	if in.Status.ObservedVersion != "v1.0.0" {
		t.Errorf("the refused upgrade changed what runs: %s", describe(in))
	}
	assertCondition(t, in, v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonInvalidSpec)

	e.update(ctx, t, "sample", func(in *v1alpha1.Installation) { in.Spec.CustomizeComponents = nil })
	e.waitKstatus(ctx, t, "sample", "v1.1.0", kstatus.CurrentStatus)
}

// A rollout that exceeds its progress deadline (a workload whose pods
// never become ready) is Stalled, saying ProgressDeadlineExceeded and
// naming the workload; once the workload is fixed it is Current.
func TestKstatusStalledOnProgressDeadline(t *testing.T) {
	e := setup(t, withOptions(func(o *operator.Options) { o.StageDeadline = 10 * time.Second }))
	ctx := t.Context()
	spec := sampleSpec("v1.0.0")
	spec.CustomizeComponents = &v1alpha1.CustomizeComponents{Patches: []v1alpha1.CustomizePatch{{
		ResourceKind: "Deployment", ResourceName: "sample-controller", Type: v1alpha1.StrategicMergePatchType,
		Patch: `{"spec":{"template":{"metadata":{"labels":{"` + testenv.BehaviourLabel + `":"` + string(testenv.BehaviourNeverReady) + `"}}}}}`,
	}}}
	e.create(ctx, t, "sample", spec)
	in := e.waitStalled(ctx, t, "sample", "v1.0.0", v1alpha1.ReasonDeploymentFailed)
	if msg := in.Condition(v1alpha1.ConditionStalled).Message; !strings.Contains(msg, "ProgressDeadlineExceeded") || !strings.Contains(msg, "sample-controller") {
		t.Errorf("Stalled message %q does not say ProgressDeadlineExceeded of sample-controller", msg)
	}
	// The fix is a new generation: the failure of the previous one does
	// not make it Failed while it rolls out.
	e.update(ctx, t, "sample", func(in *v1alpha1.Installation) { in.Spec.CustomizeComponents = nil })
	if _, seen := e.waitKstatus(ctx, t, "sample", "v1.0.0", kstatus.CurrentStatus); seen[kstatus.FailedStatus] {
		t.Errorf("kstatus Failed while the fixed generation rolled out: %v", seen)
	}
}
