// Package health owns the "rolled over" checks: whether an applied object is
// ready for the next reconcile stage. The rule of each kind comes from the
// kind table (kinds.Info.Health); workloads are also checked through their
// pods, which must carry the target identity annotations and be ready.
// Wait polls a set of objects with a progress deadline and reports a
// *DegradedError, with a clear reason, instead of waiting forever.
package health

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// Status is the health of one object.
type Status struct {
	Ref strategy.ObjectRef `json:"ref"`
	// Ready is true when the object is rolled over.
	Ready bool `json:"ready"`
	// Failed is true when the object cannot become ready without a change
	// (a pod crash-looping or failed, a Job failed).
	Failed bool `json:"failed,omitempty"`
	// Reason says what is missing or what failed.
	Reason string `json:"reason,omitempty"`
	// Replicas are the pod counts of a workload that keeps pods running
	// (kinds.KeepsPods), as the object read reports them; nil for other
	// kinds and when the object could not be read.
	Replicas *Replicas `json:"replicas,omitempty"`
}

// Checker checks objects against the live cluster.
type Checker struct {
	// Kube lists pods of workloads.
	Kube kubernetes.Interface
	// Identity is the target identity pods must carry; an empty Version
	// skips the pod annotation check.
	Identity strategy.Identity
	// PodsEvery spaces the pod lists of a workload whose own status says
	// it is still rolling out (they look for a failed pod): at most one
	// per PodsEvery for each workload, the first a PodsEvery after the
	// first check (a workload just written has no pod that could have
	// failed yet), the checks between deciding from the workload's status
	// alone. A workload whose status says it is
	// rolled out has its pods listed at every check. 0 lists at every
	// check; a negative PodsEvery never lists while the status says the
	// workload is rolling out (progress read from caches only).
	PodsEvery time.Duration
	// VerifyPods lists the pods of every workload at every check, also of
	// one whose status says it is rolled out (which is otherwise healthy
	// from its status alone). A workload's status counts a pod Ready the
	// moment its containers run when they have no readiness probe, so a
	// container that crashes soon after each start looks rolled out between
	// its crashes; its pods show the restarts (see StableAfter). The
	// operator sets it while an Installation is Degraded, so such a moment
	// does not clear the condition.
	VerifyPods bool
	// StableAfter is how long a container that restarted after a failed
	// exit (its last termination a non-zero exit code) must have been
	// running before its pod counts as ready: until then it is "restarted
	// Ns ago". 0 means defaultStableAfter; a negative value turns the rule
	// off. The start time is the node's, compared with this process's
	// clock.
	StableAfter time.Duration
	// Now is the checker's clock (PodsEvery, StableAfter); nil means
	// time.Now.
	Now func() time.Time

	mu     sync.Mutex
	listed map[strategy.ObjectRef]time.Time
}

// defaultStableAfter is Checker.StableAfter's default: the kubelet's first
// crash-loop back-off, so a container that crashes soon after it starts is
// back in CrashLoopBackOff before it would count as ready.
const defaultStableAfter = 10 * time.Second

func (c *Checker) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// listDue reports whether the pods of a workload that is rolling out are
// to be listed now (see PodsEvery), and if so records the list.
func (c *Checker) listDue(live *unstructured.Unstructured) bool {
	if c.PodsEvery == 0 {
		return true
	}
	if c.PodsEvery < 0 {
		return false
	}
	ref := strategy.RefOf(live)
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.listed == nil {
		c.listed = map[strategy.ObjectRef]time.Time{}
	}
	switch last, ok := c.listed[ref]; {
	case !ok:
		c.listed[ref] = now // the first list is due a PodsEvery from now
		return false
	case now.Sub(last) < c.PodsEvery:
		return false
	}
	c.listed[ref] = now
	return true
}

// Essentials returns what the health rule of obj's kind reads of it: obj
// itself for the rules that read its spec (workloads, kstatus), only its
// apiVersion, kind, metadata and status for those that read conditions (a
// CRD, an APIService) or nothing. A copy kept for a later check (a write's
// response, until the step's wait) then drops the rest: KubeVirt's 21 CRD
// responses held their 8 MB of schemas while the CRDs were established.
// The result shares obj's metadata and status.
func Essentials(obj *unstructured.Unstructured) *unstructured.Unstructured {
	if obj == nil {
		return nil
	}
	info, _ := kinds.Lookup(obj.GroupVersionKind().GroupKind())
	switch info.Health {
	case kinds.HealthNone, kinds.HealthCRD, kinds.HealthAPIService:
	default:
		return obj
	}
	out := &unstructured.Unstructured{Object: make(map[string]any, 4)}
	for _, k := range []string{"apiVersion", "kind", "metadata", "status"} {
		if v, ok := obj.Object[k]; ok {
			out.Object[k] = v
		}
	}
	return out
}

// Check returns the health of a live object by the rule of its kind.
func (c *Checker) Check(ctx context.Context, live *unstructured.Unstructured) (Status, error) {
	ref := strategy.RefOf(live)
	info, _ := kinds.Lookup(ref.GroupKind())
	st := Status{Ref: ref}
	var err error
	switch info.Health {
	case kinds.HealthNone:
		st.Ready = true
	case kinds.HealthCRD:
		st.Ready, st.Reason = conditionsTrue(live, "Established", "NamesAccepted")
	case kinds.HealthAPIService:
		st.Ready, st.Reason = conditionsTrue(live, "Available")
	case kinds.HealthDeployment:
		st, err = c.deployment(ctx, live)
	case kinds.HealthDaemonSet:
		st, err = c.daemonSet(ctx, live)
	case kinds.HealthStatefulSet, kinds.HealthJob, kinds.HealthKStatus:
		st = fromKstatus(live)
	default:
		return st, fmt.Errorf("health of %s: unknown rule %q", ref, info.Health)
	}
	st.Ref = ref
	if kinds.KeepsPods(ref.GroupKind()) {
		st.Replicas = replicasOf(live, info.Health)
	}
	return st, err
}

func fromKstatus(live *unstructured.Unstructured) Status {
	res, err := kstatus.Compute(live)
	if err != nil {
		return Status{Reason: err.Error()}
	}
	return Status{Ready: res.Status == kstatus.CurrentStatus, Failed: res.Status == kstatus.FailedStatus, Reason: res.Message}
}

// conditionsTrue reports whether every named condition is True.
func conditionsTrue(live *unstructured.Unstructured, types ...string) (bool, string) {
	conds, _, _ := unstructured.NestedSlice(live.Object, "status", "conditions")
	status := map[string]string{}
	for _, c := range conds {
		m, _ := c.(map[string]any)
		t, _ := m["type"].(string)
		s, _ := m["status"].(string)
		msg, _ := m["message"].(string)
		status[t] = s
		if s != "True" && msg != "" {
			status[t] = s + ": " + msg
		}
	}
	var missing []string
	for _, t := range types {
		if status[t] != "True" {
			missing = append(missing, fmt.Sprintf("%s is %s", t, orUnknown(status[t])))
		}
	}
	return len(missing) == 0, strings.Join(missing, ", ")
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func (c *Checker) deployment(ctx context.Context, live *unstructured.Unstructured) (Status, error) {
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(live.Object, &d); err != nil {
		return Status{}, fmt.Errorf("health of %s: %w", strategy.RefOf(live), err)
	}
	if !c.VerifyPods && DeploymentRolledOut(&d) && c.templateCarries(live) && fromKstatus(live).Ready {
		// Every replica is of the current template, which carries the
		// target identity, and ready and available: its pods need no
		// listing.
		return Status{Ready: true}, nil
	}
	if !DeploymentRolledOut(&d) && !c.listDue(live) {
		st := deploymentStatus(live, &d)
		st.Ready = false
		if st.Reason == "" {
			st.Reason = "replicas not all updated, ready and available"
		}
		return st, nil
	}
	pods, err := c.pods(ctx, live, d.Namespace, d.Spec.Selector)
	if err != nil || pods.Failed {
		return pods, err
	}
	if st := deploymentStatus(live, &d); !st.Ready {
		return st, nil
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	if want > 0 && d.Status.ReadyReplicas == 0 {
		return Status{Reason: "no ready replicas"}, nil
	}
	return pods, nil
}

// deploymentStatus is a Deployment's kstatus with, when it is not ready,
// its ReplicaFailure condition in the reason: why pods are missing (a
// quota, a missing PriorityClass, an admission webhook refusing them) is
// only there.
func deploymentStatus(live *unstructured.Unstructured, d *appsv1.Deployment) Status {
	st := fromKstatus(live)
	if st.Ready {
		return st
	}
	for _, cond := range d.Status.Conditions {
		if cond.Type == appsv1.DeploymentReplicaFailure && cond.Status == corev1.ConditionTrue {
			if st.Reason != "" {
				st.Reason += "; "
			}
			st.Reason += fmt.Sprintf("ReplicaFailure: %s: %s", cond.Reason, cond.Message)
		}
	}
	return st
}

func (c *Checker) daemonSet(ctx context.Context, live *unstructured.Unstructured) (Status, error) {
	var ds appsv1.DaemonSet
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(live.Object, &ds); err != nil {
		return Status{}, fmt.Errorf("health of %s: %w", strategy.RefOf(live), err)
	}
	s := ds.Status
	switch {
	case !c.VerifyPods && DaemonSetRolledOut(&ds) && c.templateCarries(live):
		// Every scheduled pod is of the current template, which carries
		// the target identity, and ready and available: they need no
		// listing.
		return Status{Ready: true}, nil
	case s.ObservedGeneration < ds.Generation:
		return Status{Reason: fmt.Sprintf("generation %d not observed yet (observed %d)", ds.Generation, s.ObservedGeneration)}, nil
	case s.UpdatedNumberScheduled != s.DesiredNumberScheduled || s.NumberReady != s.DesiredNumberScheduled:
		reason := fmt.Sprintf("%d of %d pods updated, %d ready", s.UpdatedNumberScheduled, s.DesiredNumberScheduled, s.NumberReady)
		if !c.listDue(live) {
			return Status{Reason: reason}, nil
		}
		st, err := c.pods(ctx, live, ds.Namespace, ds.Spec.Selector)
		st.Ready = false
		if !st.Failed {
			st.Reason = reason
		}
		return st, err
	}
	return c.pods(ctx, live, ds.Namespace, ds.Spec.Selector)
}

// DeploymentRolledOut reports whether a Deployment's controller observed
// its current generation and every replica it wants is updated (of the
// current template), ready and available, with no other replica left.
func DeploymentRolledOut(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	return s.ObservedGeneration >= d.Generation && s.Replicas == want && s.UpdatedReplicas == want &&
		s.ReadyReplicas == want && s.AvailableReplicas == want && s.UnavailableReplicas == 0
}

// DaemonSetRolledOut reports whether a DaemonSet's controller observed its
// current generation and every pod it schedules is updated, ready and
// available, none misscheduled.
func DaemonSetRolledOut(ds *appsv1.DaemonSet) bool {
	s := ds.Status
	return s.ObservedGeneration >= ds.Generation && s.UpdatedNumberScheduled == s.DesiredNumberScheduled &&
		s.NumberReady == s.DesiredNumberScheduled && s.NumberAvailable == s.DesiredNumberScheduled &&
		s.NumberUnavailable == 0 && s.NumberMisscheduled == 0
}
