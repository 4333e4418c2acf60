package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/health"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// CanaryOptions tunes the DaemonSet canary rollout of the update path: the
// DaemonSet is applied with maxUnavailable as the strategy says (normally
// 1); once the first pod of the new version is ready, maxUnavailable is
// widened to Step; when every pod is updated the strategy's value is
// restored. A canary pod that crash-loops or fails stops the rollout with
// a FailedUpdate event on the DaemonSet. The zero value widens to 10%.
type CanaryOptions struct {
	// Disabled rolls DaemonSets out like every other workload.
	Disabled bool
	// Step is maxUnavailable after the canary pod is ready; zero means
	// "10%".
	Step intstr.IntOrString
}

// FailedUpdateReason is the reason of the event a failed canary emits.
const FailedUpdateReason = "FailedUpdate"

// CanaryError is the error of a rollout stopped by a failed DaemonSet
// canary: an updated pod failed, so the DaemonSet's other pods were left on
// the old version. It wraps the *health.DegradedError naming the DaemonSet
// (errors.As finds either).
type CanaryError struct {
	// DaemonSet is the DaemonSet whose canary failed.
	DaemonSet strategy.ObjectRef
	// Err says why.
	Err *health.DegradedError
}

func (e *CanaryError) Error() string { return e.Err.Error() }

func (e *CanaryError) Unwrap() error { return e.Err }

// canary applies a DaemonSet and rolls it out with a canary pod when its
// pods do not all run the target identity yet (a change that does not touch
// the pod template never starts a canary).
func (r *run) canary(ctx context.Context, step plan.Step, obj *unstructured.Unstructured) (apply.Result, error) {
	ref := strategy.RefOf(obj)
	// The pods are judged before the write: once the new template is
	// written, the DaemonSet controller may delete the outdated pods
	// (maxUnavailable) before they could be listed, and a rollout with no
	// outdated pod left in sight would start no canary.
	outdated, err := r.outdatedPods(ctx, obj)
	if err != nil {
		return apply.Result{Ref: ref}, err
	}
	res, err := r.a.Apply(ctx, obj)
	if err != nil || res.Object == nil || res.Action == apply.ActionSkip {
		return res, err
	}
	var ds appsv1.DaemonSet
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(res.Object.Object, &ds); err != nil {
		return res, fmt.Errorf("canary %s: %w", ref, err)
	}
	if _, kept := res.Object.GetAnnotations()[metakeys.KeptTemplateAnnotation]; !outdated || kept {
		// A kept template (see apply.Applier.Prepare) was not written:
		// its pods, which carry the previous installer's identity
		// annotations, are not replaced, and there is no canary.
		return res, nil
	}
	original, wide := canaryWidths(&ds, r.opts.Canary)
	r.emit(Event{Type: EventCanary, Step: step.Name, Ref: ref, Reason: "canary started, maxUnavailable " + original.String()})
	if err := r.waitCanaryPod(ctx, &ds, ref); err != nil {
		return res, err
	}

	if err := r.setMaxUnavailable(ctx, &ds, wide); err != nil {
		return res, err
	}
	r.emit(Event{Type: EventCanary, Step: step.Name, Ref: ref, Reason: "canary ready, maxUnavailable " + wide.String()})
	written := res.Object.GetGeneration()
	getter := func(ctx context.Context, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		return r.a.GetAtLeast(ctx, o, written)
	}
	err = r.checker.Wait(ctx, getter, []*unstructured.Unstructured{obj}, health.WaitOptions{Deadline: r.opts.StageDeadline, Interval: r.opts.Interval, Changed: r.a.Changed(),
		OnProgress: func(st []health.Status) { r.emit(Event{Type: EventProgress, Step: step.Name, Progress: st}) }})
	if err != nil {
		if deg, ok := err.(*health.DegradedError); ok && deg.Reason == health.ReasonFailed {
			return res, r.failCanary(ctx, &ds, ref, deg.Error())
		}
		return res, err
	}
	// Restore the strategy's value by applying the object again, read
	// from the API server: a cache may not have seen the patch yet, and
	// would call the object unchanged.
	restored, err := r.a.Direct().Apply(ctx, obj)
	if err != nil {
		return res, err
	}
	r.emit(Event{Type: EventCanary, Step: step.Name, Ref: ref, Reason: "rollout done, maxUnavailable " + original.String()})
	restored.Action = res.Action
	if restored.Reason == "" || res.Reason != "" {
		restored.Reason = res.Reason
	}
	return restored, nil
}

// outdatedPods reports whether the live DaemonSet of obj has pods that do
// not carry the target identity. A DaemonSet that is absent, or rolled out
// with the target identity on its template, has none (and its pods are not
// listed).
func (r *run) outdatedPods(ctx context.Context, obj *unstructured.Unstructured) (bool, error) {
	live, err := r.a.Get(ctx, obj)
	if err != nil || live == nil {
		return false, err
	}
	var ds appsv1.DaemonSet
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(live.Object, &ds); err != nil {
		return false, fmt.Errorf("canary %s: %w", strategy.RefOf(obj), err)
	}
	if health.DaemonSetRolledOut(&ds) && health.TemplateCarries(live, r.s.Identity) {
		return false, nil
	}

	pods, err := r.daemonSetPods(ctx, &ds)
	if err != nil {
		return false, err
	}
	for _, p := range pods {
		if !health.PodCarriesIdentity(p, r.s.Identity) {
			return true, nil
		}
	}
	return false, nil
}

// canaryMinInterval spaces the canary's pod lists woken by changes in the
// cache (each is a request).
// canaryWidths returns the DaemonSet's maxUnavailable as the strategy
// has it (1 when unset) and as the canary widens it once its pod is ready
// (CanaryOptions.Step, 10% when unset).
func canaryWidths(ds *appsv1.DaemonSet, opts CanaryOptions) (original, wide intstr.IntOrString) {
	original = intstr.FromInt32(1)
	if ru := ds.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.MaxUnavailable != nil {
		original = *ru.MaxUnavailable
	}
	wide = opts.Step
	if wide == (intstr.IntOrString{}) {
		wide = intstr.FromString("10%")
	}
	return original, wide
}

// canaryVerdict judges a DaemonSet's pods during its canary: failed names
// the first pod of the target identity that failed or crash-loops (the
// rollout stops); otherwise ready says whether one of them is ready (the
// rollout widens). Pods of other identities (the old version) do not
// count.
func canaryVerdict(pods []*corev1.Pod, id strategy.Identity) (ready bool, failed string) {
	for _, p := range pods {
		if !health.PodCarriesIdentity(p, id) {
			continue
		}
		if why, bad := health.PodFailure(p); bad {
			return false, fmt.Sprintf("canary pod %s: %s", p.Name, why)
		}
		if health.PodReady(p) {
			ready = true
		}
	}
	return ready, ""
}

// waitCanaryPod waits for the first updated pod of a DaemonSet to be
// ready; a failed one fails the canary (failCanary), and none ready by the
// stage deadline is a *health.DegradedError.
func (r *run) waitCanaryPod(ctx context.Context, ds *appsv1.DaemonSet, ref strategy.ObjectRef) error {
	deadline := time.Now().Add(r.opts.StageDeadline)
	changes := r.a.Changed()
	for {
		// The pods are not cached, but the DaemonSet's status follows
		// them: a change in the cache wakes the next list, not sooner
		// than canaryMinInterval after this one.
		var changed <-chan struct{}
		if changes != nil {
			changed = changes()
		}
		listed := time.Now()
		pods, err := r.daemonSetPods(ctx, ds)
		if err != nil {
			return err
		}
		ready, failed := canaryVerdict(pods, r.s.Identity)
		if failed != "" {
			return r.failCanary(ctx, ds, ref, failed)
		}
		if ready {
			return nil
		}
		if !time.Now().Before(deadline) {
			return &health.DegradedError{Reason: health.ReasonProgressDeadlineExceeded, Objects: []health.Status{{Ref: ref, Reason: "no canary pod became ready"}}}
		}
		if err := health.SleepUntilChanged(ctx, r.opts.Interval, changed, listed.Add(canaryMinInterval)); err != nil {
			return err
		}
	}
}

const canaryMinInterval = 250 * time.Millisecond

func (r *run) daemonSetPods(ctx context.Context, ds *appsv1.DaemonSet) ([]*corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("daemonset %s/%s: selector: %w", ds.Namespace, ds.Name, err)
	}
	list, err := r.kube.CoreV1().Pods(ds.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("daemonset %s/%s: list pods: %w", ds.Namespace, ds.Name, err)
	}
	out := make([]*corev1.Pod, 0, len(list.Items))
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp == nil {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// setMaxUnavailable changes the rolling update's maxUnavailable with a
// merge patch under the canary's own field manager (the next apply takes
// the field back).
func (r *run) setMaxUnavailable(ctx context.Context, ds *appsv1.DaemonSet, v intstr.IntOrString) error {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"updateStrategy": map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxUnavailable": v}}}})
	if err != nil {
		return err
	}
	_, err = r.kube.AppsV1().DaemonSets(ds.Namespace).Patch(ctx, ds.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: r.opts.FieldManager + "-canary"})
	if err != nil {
		return fmt.Errorf("daemonset %s/%s: set maxUnavailable %s: %w", ds.Namespace, ds.Name, v.String(), err)
	}
	return nil
}

// failCanary records a FailedUpdate event on the DaemonSet and returns the
// Degraded error that stops the run.
func (r *run) failCanary(ctx context.Context, ds *appsv1.DaemonSet, ref strategy.ObjectRef, why string) error {
	now := metav1.NewTime(time.Now())
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: ds.Name + ".", Namespace: ds.Namespace},
		InvolvedObject: corev1.ObjectReference{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: kinds.DaemonSet.Kind, Namespace: ds.Namespace, Name: ds.Name, UID: ds.UID},
		Reason:         FailedUpdateReason,
		Message:        "rollout stopped: " + why,
		Type:           corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: "installstrategy"},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	canaryErr := &CanaryError{DaemonSet: ref, Err: &health.DegradedError{Reason: health.ReasonFailed, Objects: []health.Status{{Ref: ref, Failed: true, Reason: why}}}}
	if _, err := r.kube.CoreV1().Events(ds.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("%w (and the FailedUpdate event could not be written: %v)", canaryErr, err)
	}
	return canaryErr
}
