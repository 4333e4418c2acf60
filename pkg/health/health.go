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
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
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
	// Ns ago". 0 means DefaultStableAfter; a negative value turns the rule
	// off. The start time is the node's, compared with this process's
	// clock.
	StableAfter time.Duration

	mu     sync.Mutex
	listed map[strategy.ObjectRef]time.Time
}

// DefaultStableAfter is Checker.StableAfter's default: the kubelet's first
// crash-loop back-off, so a container that crashes soon after it starts is
// back in CrashLoopBackOff before it would count as ready.
const DefaultStableAfter = 10 * time.Second

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
	now := time.Now()
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

// pods checks the pods of a workload: none failed, every one not being
// deleted is ready and carries the target identity annotations. The pods
// of a template kept at adoption (metakeys.KeptTemplateAnnotation) carry the
// previous installer's annotations, not ours: the workload's status, which
// the callers check, says whether they are of its current template.
func (c *Checker) pods(ctx context.Context, live *unstructured.Unstructured, ns string, sel *metav1.LabelSelector) (Status, error) {
	selector, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return Status{}, fmt.Errorf("pod selector: %w", err)
	}
	list, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return Status{}, fmt.Errorf("list pods in %s: %w", ns, err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	_, kept := live.GetAnnotations()[metakeys.KeptTemplateAnnotation]
	var waiting []string
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		if reason, failed := PodFailure(p); failed {
			return Status{Failed: true, Reason: fmt.Sprintf("pod %s: %s", p.Name, reason)}, nil
		}
		if c.Identity.Version != "" && !kept && !PodCarriesIdentity(p, c.Identity) {
			waiting = append(waiting, p.Name+" has not the target identity")
			continue
		}
		if !PodReady(p) {
			waiting = append(waiting, p.Name+" not ready")
		} else if why, ok := c.restartedRecently(p); ok {
			waiting = append(waiting, p.Name+" "+why)
		}
	}
	if len(waiting) > 0 {
		return Status{Reason: "pods: " + strings.Join(waiting, ", ")}, nil
	}
	return Status{Ready: true}, nil
}

// PodCarriesIdentity reports whether a pod carries the identity
// annotations of id (so it runs the target version).
func PodCarriesIdentity(p *corev1.Pod, id strategy.Identity) bool {
	return AnnotationsCarry(p.Annotations, id)
}

// AnnotationsCarry reports whether annotations (a pod's, a pod template's)
// carry the identity.
func AnnotationsCarry(a map[string]string, id strategy.Identity) bool {
	return a[metakeys.InstallStrategyVersionAnnotation] == id.Version && a[metakeys.InstallStrategyRegistryAnnotation] == id.Registry && a[metakeys.InstallStrategyIdentifierAnnotation] == id.Identifier
}

// templateCarries reports whether a live workload's pod template was
// applied for the checker's target identity (always, when it has none; see
// apply.TemplateIdentity).
func (c *Checker) templateCarries(live *unstructured.Unstructured) bool {
	return c.Identity.Version == "" || TemplateCarries(live, c.Identity)
}

// TemplateCarries reports whether a live workload's pod template was
// applied for identity id: it carries id's annotations, or it was kept at
// adoption by the write that gave the workload id (apply.TemplateIdentity).
func TemplateCarries(live *unstructured.Unstructured, id strategy.Identity) bool {
	return apply.TemplateIdentity(live) == id
}

// PodReady reports whether a pod is Running and Ready.
func PodReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// restartedRecently reports whether a container of a ready pod restarted
// after a failed exit less than StableAfter ago, and how.
func (c *Checker) restartedRecently(p *corev1.Pod) (string, bool) {
	stable := c.StableAfter
	if stable == 0 {
		stable = DefaultStableAfter
	}
	if stable < 0 {
		return "", false
	}
	for _, cs := range p.Status.ContainerStatuses {
		last := cs.LastTerminationState.Terminated
		if cs.State.Running == nil || last == nil || last.ExitCode == 0 {
			continue
		}
		if up := time.Since(cs.State.Running.StartedAt.Time); up < stable {
			return fmt.Sprintf("container %s restarted %s ago after exit %d (restarts %d)", cs.Name, up.Round(time.Second), last.ExitCode, cs.RestartCount), true
		}
	}
	return "", false
}

// PodFailure reports whether a pod has failed or crash-loops, and how.
func PodFailure(p *corev1.Pod) (string, bool) {
	if p.Status.Phase == corev1.PodFailed {
		return "failed: " + p.Status.Reason + " " + p.Status.Message, true
	}
	for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && (w.Reason == "CrashLoopBackOff" || w.Reason == "ImagePullBackOff" || w.Reason == "ErrImagePull" || w.Reason == "CreateContainerConfigError") {
			return fmt.Sprintf("container %s: %s (restarts %d)", cs.Name, w.Reason, cs.RestartCount), true
		}
	}
	return "", false
}

// DegradedError reports objects that did not become ready: they failed, or
// the progress deadline passed.
type DegradedError struct {
	// Reason is "Failed" or "ProgressDeadlineExceeded".
	Reason string
	// Objects holds the health of every object that is not ready.
	Objects []Status
}

// Degraded reasons.
const (
	ReasonFailed                   = "Failed"
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
)

func (e *DegradedError) Error() string {
	parts := make([]string, 0, len(e.Objects))
	for _, s := range e.Objects {
		parts = append(parts, fmt.Sprintf("%s: %s", s.Ref, s.Reason))
	}
	return fmt.Sprintf("%s: %s", e.Reason, strings.Join(parts, "; "))
}

// Getter returns the live state of an object (nil when it does not exist).
type Getter func(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error)

// WaitOptions tunes Wait. The zero value polls every second for at most
// ten minutes.
type WaitOptions struct {
	// Deadline bounds the wait; 0 means 10 minutes.
	Deadline time.Duration
	// Interval is the time between checks; 0 means 1 second.
	Interval time.Duration
	// OnProgress, when set, is called with the health of every object
	// after each round.
	OnProgress func([]Status)
	// Changed, when set, returns a channel closed at the next change of
	// what the getter reads (an informer cache's; see
	// apply.Applier.Changed): a round then runs without waiting out the
	// Interval, but not sooner than MinInterval after the last one.
	Changed func() <-chan struct{}
	// MinInterval spaces rounds woken by Changed; 0 means 100 ms.
	MinInterval time.Duration
}

// Wait polls objs until every one is ready. It returns a *DegradedError when
// one fails or the deadline passes, and ctx's error when ctx ends.
func (c *Checker) Wait(ctx context.Context, get Getter, objs []*unstructured.Unstructured, opts WaitOptions) error {
	if opts.Deadline == 0 {
		opts.Deadline = 10 * time.Minute
	}
	if opts.Interval == 0 {
		opts.Interval = time.Second
	}
	if opts.MinInterval == 0 {
		opts.MinInterval = 100 * time.Millisecond
	}
	deadline := time.Now().Add(opts.Deadline)
	first := true
	// kept holds the statuses of objects found ready whose rule says
	// they stay ready (kinds.Health.StaysReady): later rounds do not read
	// them again (without a cache, each read is a request, and a CRD's
	// can be megabytes).
	kept := map[int]Status{}
	for {
		var changed <-chan struct{}
		if opts.Changed != nil {
			// Taken before the round's reads: a change during them wakes
			// the next round.
			changed = opts.Changed()
		}
		started := time.Now()
		all, err := c.round(ctx, get, objs, kept)
		if err != nil {
			return err
		}
		for i, st := range all {
			if info, _ := kinds.Lookup(st.Ref.GroupKind()); st.Ready && info.Health.StaysReady() {
				kept[i] = st
			}
		}
		if opts.OnProgress != nil {
			opts.OnProgress(all)
		}
		var notReady, failed []Status
		for _, s := range all {
			if s.Failed {
				failed = append(failed, s)
			}
			if !s.Ready {
				notReady = append(notReady, s)
			}
		}
		switch {
		case len(failed) > 0:
			return &DegradedError{Reason: ReasonFailed, Objects: failed}
		case len(notReady) == 0:
			return nil
		case !time.Now().Before(deadline):
			return &DegradedError{Reason: ReasonProgressDeadlineExceeded, Objects: notReady}
		}
		interval := opts.Interval
		if first && changed != nil {
			// The first round may judge from copies older than the
			// cache's (a getter answers it with what the writes
			// returned, which for CRDs applied a step ago is long
			// past): the cache is asked again soon.
			interval = opts.MinInterval
		}
		first = false
		if err := SleepUntilChanged(ctx, interval, changed, started.Add(opts.MinInterval)); err != nil {
			return err
		}
	}
}

// SleepUntilChanged returns after interval, or once changed is closed
// (never when nil) but not before notBefore, or with ctx's error.
func SleepUntilChanged(ctx context.Context, interval time.Duration, changed <-chan struct{}, notBefore time.Time) error {
	t := time.NewTimer(interval)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	case <-changed:
	}
	if d := time.Until(notBefore); d > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
	}
	return nil
}

// roundParallelism bounds the reads of one round that run at once: a
// getter without a cache sends a GET for each object (KubeVirt's 21 CRDs
// took 130 ms one after the other).
const roundParallelism = 8

// round reads and checks every object of objs but those kept (by index:
// their status is taken as it is), up to roundParallelism at once; the
// statuses keep objs' order.
func (c *Checker) round(ctx context.Context, get Getter, objs []*unstructured.Unstructured, kept map[int]Status) ([]Status, error) {
	out := make([]Status, len(objs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(roundParallelism)
	for i, o := range objs {
		if st, ok := kept[i]; ok {
			out[i] = st
			continue
		}
		g.Go(func() error {
			live, err := get(gctx, o)
			switch {
			case err != nil:
				if ctx.Err() != nil {
					return ctx.Err()
				}
				out[i] = Status{Ref: strategy.RefOf(o), Reason: err.Error()}
			case live == nil:
				out[i] = Status{Ref: strategy.RefOf(o), Reason: "does not exist"}
			default:
				st, err := c.Check(gctx, live)
				if err != nil {
					// A read that failed is reported and retried next round.
					st.Ready, st.Reason = false, err.Error()
				}
				out[i] = st
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return out, nil
}
