package engine

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// completedJob reports a Job the inventory records as completed with the
// applied hash obj has now, and that no longer exists (plan.CompletedJob).
func (r *run) completedJob(ctx context.Context, obj *unstructured.Unstructured) (apply.Result, bool, error) {
	ref := strategy.RefOf(obj)
	r.mu.Lock()
	e := r.inv.Entries[ref]
	r.mu.Unlock()
	if e.Hash == "" {
		return apply.Result{}, false, nil
	}
	live, err := r.a.Get(ctx, obj)
	if err != nil || live != nil {
		return apply.Result{}, false, err
	}
	prepared, err := r.a.Prepare(obj, nil)
	if err != nil {
		return apply.Result{Ref: ref}, true, err
	}
	r.mu.Lock()
	done := plan.CompletedJob(r.inv, prepared)
	r.mu.Unlock()
	if !done {
		return apply.Result{}, false, nil
	}
	return apply.Result{Ref: ref, Action: apply.ActionUnchanged, Reason: plan.CompletedJobReason}, true, nil
}

// finishedJob returns obj with the Complete or Failed condition its
// Events report for the Job with uid, or nil when they report neither.
func (r *run) finishedJob(ctx context.Context, obj *unstructured.Unstructured, uid types.UID) (*unstructured.Unstructured, error) {
	evs, err := r.kube.CoreV1().Events(obj.GetNamespace()).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(uid)})
	if err != nil {
		return nil, fmt.Errorf("events of %s: %w", strategy.RefOf(obj), err)
	}
	cond := ""
	msg := ""
	for _, ev := range evs.Items {
		switch {
		case ev.Reason == "Completed":
			cond, msg = "Complete", ev.Message
		case ev.Type == "Warning" && (ev.Reason == "BackoffLimitExceeded" || ev.Reason == "DeadlineExceeded" || ev.Reason == "PodFailurePolicy" || ev.Reason == "MaxFailedIndexesExceeded"):
			cond, msg = "Failed", ev.Reason+": "+ev.Message
		}
		if cond == "Failed" {
			break
		}
	}
	if cond == "" {
		return nil, nil
	}
	out := obj.DeepCopy()
	out.SetUID(uid)
	_ = unstructured.SetNestedSlice(out.Object, []any{map[string]any{"type": cond, "status": "True", "message": msg}}, "status", "conditions")
	return out, nil
}
