package apply

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// waitGone polls until the object with the given UID no longer exists.
func waitGone(ctx context.Context, ri dynamic.ResourceInterface, name string, uid types.UID) error {
	return wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		cur, err := ri.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		return cur.GetUID() != uid, nil
	})
}

// Delete deletes a live object (in the background) if it is still the same
// object (same UID). A dry-run applier only asks the server.
func (a *Applier) Delete(ctx context.Context, live *unstructured.Unstructured) error {
	ri, err := a.Resource(live)
	if err != nil {
		return err
	}
	uid := live.GetUID()
	bg := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &bg, DryRun: a.dryRun()}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err = a.retry(ctx, func() error {
		err := ri.Delete(ctx, live.GetName(), opts)
		if apierrors.IsConflict(err) {
			// The UID precondition failed: the object was replaced, and
			// the new one is not the one to delete.
			return nil
		}
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete %s: %w", strategy.RefOf(live), err)
	}
	if a.cache != nil && !a.opts.DryRun {
		a.seen.Store(keyOf(live), "")
	}
	return nil
}

// WaitGone waits until a live object (the one with its UID) no longer
// exists.
func (a *Applier) WaitGone(ctx context.Context, live *unstructured.Unstructured) error {
	ri, err := a.Resource(live)
	if err != nil {
		return err
	}
	if err := waitGone(ctx, ri, live.GetName(), live.GetUID()); err != nil {
		return fmt.Errorf("wait for %s to be gone: %w", strategy.RefOf(live), err)
	}
	return nil
}
