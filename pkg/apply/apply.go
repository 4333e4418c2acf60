package apply

import (
	"context"
	"errors"
	"fmt"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// Apply makes the live object match obj (a strategy object): it prepares
// it, skips the write when nothing changed, and otherwise writes it with
// server-side apply, falling back to create/update when server-side apply
// rejects the object and recreating it when an immutable field changes. A
// kind the cluster does not serve gives ActionSkip with the reason and no
// error; an object that is not ours gives ActionConflict and a
// *ConflictError.
func (a *Applier) Apply(ctx context.Context, obj *unstructured.Unstructured) (Result, error) {
	var res Result
	err := a.retry(ctx, func() error {
		var err error
		res, err = a.applyOnce(ctx, obj)
		return err
	})
	if res.Object != nil {
		res.Generation = res.Object.GetGeneration()
	}
	return res, err
}

func (a *Applier) applyOnce(ctx context.Context, obj *unstructured.Unstructured) (Result, error) {
	ref := strategy.RefOf(obj)
	ri, err := a.Resource(obj)
	var notServed *NotServedError
	if errors.As(err, &notServed) {
		return Result{Ref: ref, Action: ActionSkip, Reason: notServed.Error()}, nil
	}
	if err != nil {
		return Result{Ref: ref}, err
	}
	if sh, ok := a.cache.(sharer); ok && !a.opts.DryRun {
		sh.Share(obj)
	}
	// The write's decision only reads live (and Result.Object is read
	// only): a bulky kind's cached object is not copied for it.
	live, unchanged, err := a.liveForWrite(ctx, ri, obj)
	if err != nil || unchanged != nil {
		return derefOr(unchanged, Result{Ref: ref}), err
	}
	prepared, err := a.Prepare(obj, live)
	if err != nil {
		return Result{Ref: ref}, err
	}
	res := a.Decide(prepared, live)
	switch res.Action {
	case ActionUnchanged:
		return res, nil
	case ActionConflict:
		return res, a.conflictOf(ref, live, ClaimOf(live, a.opts.Owner))
	}
	if a.absent != nil && !a.opts.DryRun {
		// Whatever the write does, later reads ask the API server.
		a.absent.Delete(keyOf(obj))
		a.listed.Delete(keyOf(obj))
		a.listedMeta.Delete(keyOf(obj))
	}
	if res.Adopted && !a.opts.DryRun && writesTemplate(prepared) {
		// An adopted workload whose pod template is replaced gets the
		// strategy's template, not a mix of it and the previous
		// installer's: its fields become ours before the write, so the
		// write removes those the strategy does not set. A mix is a pod
		// spec nobody wrote: virt-operator's required control-plane
		// affinity beside the strategy's tolerations (an atomic list,
		// replaced) schedules nowhere.
		if live, err = a.takeFields(ctx, ri, live, live.GetLabels()[metakeys.ManagedByLabel]); err != nil {
			return res, fmt.Errorf("adopt %s: %w", ref, err)
		}
	}
	return a.writeDecided(ctx, ri, res, prepared, live)
}

// liveForWrite reads the live object a write of obj is decided on. A
// cached copy that is not this installation's decides only that nothing
// is to be written (unchanged, returned as is); otherwise the object is
// read from the API server. An object of ours being deleted is waited for
// and reported absent.
func (a *Applier) liveForWrite(ctx context.Context, ri dynamic.ResourceInterface, obj *unstructured.Unstructured) (live *unstructured.Unstructured, unchanged *Result, err error) {
	ref := strategy.RefOf(obj)
	live, cached, err := a.liveOrCached(ctx, ri, obj, 0, true)
	if err != nil {
		return nil, nil, err
	}
	if cached && ClaimOf(live, a.opts.Owner) != inventory.ClaimOurs {
		// A cached copy that is not this installation's decides only that
		// nothing is to be written: a conflict, a relabelling or an
		// adoption is decided on the live object (with its field
		// managers), not on a copy that may lag behind.
		prepared, err := a.Prepare(obj, live)
		if err != nil {
			return nil, nil, err
		}
		if res := a.Decide(prepared, live); res.Action == ActionUnchanged {
			return nil, &res, nil
		}
		if live, err = a.direct(ctx, ri, obj); err != nil {
			return nil, nil, err
		}
	}
	// A cached copy of our own object is not behind this applier's writes
	// (see usable): the server-side apply below writes the strategy's
	// fields whatever the live object holds, so a copy that lags behind
	// someone else's write costs at most a write that changes nothing.
	if live != nil && live.GetDeletionTimestamp() != nil && !a.opts.DryRun && IsOurs(live, a.opts.Owner) {
		// Writing to an object being deleted would be lost: wait until it
		// is gone, then create it anew.
		if err = waitGone(ctx, ri, live.GetName(), live.GetUID()); err != nil {
			return nil, nil, fmt.Errorf("%s: wait for the deletion in progress: %w", ref, err)
		}
		live = nil
	}
	return live, nil, nil
}

func derefOr(r *Result, or Result) Result {
	if r != nil {
		return *r
	}
	return or
}

// writeDecided writes prepared, which Decide said to write (res): with
// server-side apply, recreating it when an immutable field changed (or
// refusing to, see kinds.Info.NeverRecreate), and taking over the fields
// of an adopted object's previous installer.
func (a *Applier) writeDecided(ctx context.Context, ri dynamic.ResourceInterface, res Result, prepared, live *unstructured.Unstructured) (Result, error) {
	ref := res.Ref
	out, fallback, err := a.write(ctx, ri, prepared, live)
	if err != nil && isImmutable(err) && live != nil {
		if info, _ := kinds.Lookup(ref.GroupKind()); info.NeverRecreate && !a.opts.Recreate[ref] {
			res.Action = ActionRefuse
			res.Reason = "immutable field changed; a " + ref.Kind + " is never deleted to change one (what it defines would go with it): " + err.Error()
			if a.opts.DryRun {
				return res, nil
			}
			return res, fmt.Errorf("apply %s: %s", ref, res.Reason)
		}
		res.Action = ActionRecreate
		res.Reason = "immutable field changed: " + err.Error()
		if a.opts.DryRun {
			return res, nil
		}
		out, fallback, err = a.recreate(ctx, ri, prepared, live)
	}
	if err != nil {
		return res, fmt.Errorf("apply %s: %w", ref, err)
	}
	a.Wrote(out)
	res.Object, res.Fallback = out, fallback
	if res.Adopted && !a.opts.DryRun {
		// The object is ours now: fields other appliers set are ours too,
		// so a later strategy that drops one removes it.
		if res.Object, err = a.takeFields(ctx, ri, out, live.GetLabels()[metakeys.ManagedByLabel]); err != nil {
			return res, fmt.Errorf("adopt %s: %w", ref, err)
		}
		if inventory.MarkAdoption(ref, live) {
			if res.Object, err = a.markAdopted(ctx, ri, res.Object); err != nil {
				return res, fmt.Errorf("adopt %s: %w", ref, err)
			}
		}
		a.Wrote(res.Object)
	}
	if fallback {
		if res.Reason != "" {
			res.Reason += "; "
		}
		res.Reason += "server-side apply rejected the object, written with " + map[bool]string{true: "create", false: "update"}[live == nil]
	}
	return res, nil
}

// sharedReader is a Cache that can return its own copy of an object to a
// reader that does not change it (InformerCache.CachedShared).
type sharedReader interface {
	CachedShared(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, bool, error)
}

// sharer is a Cache that holds the strategy's values of bulky fields
// instead of copies (InformerCache.Share).
type sharer interface {
	Share(obj *unstructured.Unstructured)
}

func (a *Applier) dryRun() []string {
	if a.opts.DryRun {
		return []string{metav1.DryRunAll}
	}
	return nil
}

// write applies prepared with server-side apply, or with create/update when
// server-side apply rejects the object itself.
func (a *Applier) write(ctx context.Context, ri dynamic.ResourceInterface, prepared, live *unstructured.Unstructured) (*unstructured.Unstructured, bool, error) {
	force := true
	out, err := ri.Apply(ctx, prepared.GetName(), prepared, metav1.ApplyOptions{FieldManager: a.opts.FieldManager, Force: force, DryRun: a.dryRun()})
	if err == nil || !isSSARejection(err) {
		return out, false, err
	}
	if live == nil {
		out, err = ri.Create(ctx, prepared, metav1.CreateOptions{FieldManager: a.opts.FieldManager, DryRun: a.dryRun()})
		return out, true, err
	}
	// Update with the full object, carrying the live resourceVersion; the
	// live object may have moved on (status writes), so retry on conflict.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		upd := prepared.DeepCopy()
		upd.SetResourceVersion(live.GetResourceVersion())
		var uerr error
		out, uerr = ri.Update(ctx, upd, metav1.UpdateOptions{FieldManager: a.opts.FieldManager, DryRun: a.dryRun()})
		if apierrors.IsConflict(uerr) {
			cur, gerr := ri.Get(ctx, prepared.GetName(), metav1.GetOptions{})
			if gerr != nil {
				return gerr
			}
			live = cur
		}
		return uerr
	})
	return out, true, err
}

// recreate deletes live, waits until it is gone and writes prepared anew.
func (a *Applier) recreate(ctx context.Context, ri dynamic.ResourceInterface, prepared, live *unstructured.Unstructured) (*unstructured.Unstructured, bool, error) {
	uid := live.GetUID()
	bg := metav1.DeletePropagationBackground
	err := ri.Delete(ctx, live.GetName(), metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return nil, false, fmt.Errorf("delete for recreate: %w", err)
	}
	if err := waitGone(ctx, ri, live.GetName(), uid); err != nil {
		return nil, false, fmt.Errorf("delete for recreate: %w", err)
	}
	return a.write(ctx, ri, prepared, nil)
}

// isSSARejection reports whether server-side apply refused an object
// because the object itself cannot be converted to its structured form
// (e.g. a list keyed by containerPort holding the same key twice), the case
// in which create/update still works.
func isSSARejection(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "duplicate entries for key") || strings.Contains(msg, "failed to create typed")
}

// isImmutable reports whether the server refused a change to an immutable
// field.
func isImmutable(err error) bool {
	return apierrors.IsInvalid(err) && (strings.Contains(err.Error(), "immutable") || strings.Contains(err.Error(), "may not change"))
}

// The informer cache serves the applier's optional interfaces: a rename of
// their methods must not compile (a type assertion would fail silently).
var (
	_ sharer       = (*InformerCache)(nil)
	_ sharedReader = (*InformerCache)(nil)
	_ keeper       = (*InformerCache)(nil)
)
