package reconcile

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/client-go/rest"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// UninstallOptions tunes Uninstall. The zero value deletes the objects
// marked with apply.DefaultManagedBy, CRDs included.
type UninstallOptions struct {
	// ManagedBy is the managed-by value of the installation; "" means
	// apply.DefaultManagedBy.
	ManagedBy string
	// KeepCRDs leaves CRDs (and so the users' custom resources).
	KeepCRDs bool
	// Wait waits until every deleted object is gone.
	Wait bool
	// OnEvent, when set, is called for every deleted object.
	OnEvent func(Event)
}

// Uninstall deletes every object that is ours (see plan.Prunable), in
// prune order: webhooks and
// APIServices first, CRDs last. It returns the deleted objects.
func Uninstall(ctx context.Context, cfg *rest.Config, opts UninstallOptions) ([]strategy.ObjectRef, error) {
	a, err := apply.NewForConfig(cfg, apply.Options{ManagedBy: opts.ManagedBy})
	if err != nil {
		return nil, err
	}
	items, err := plan.Prunable(ctx, a, &strategy.Strategy{}, plan.ObserveOptions{PruneCRDs: !opts.KeepCRDs})
	if err != nil {
		return nil, fmt.Errorf("uninstall: %w", err)
	}
	var (
		deleted []strategy.ObjectRef
		errs    []error
	)
	for _, it := range items {
		if it.Action != apply.ActionDelete {
			continue
		}
		if err := a.Delete(ctx, it.Live); err != nil {
			errs = append(errs, err)
			continue
		}
		deleted = append(deleted, it.Ref)
		if opts.OnEvent != nil {
			opts.OnEvent(Event{Type: EventPruned, Step: "uninstall", Ref: it.Ref, Action: apply.ActionDelete})
		}
	}
	if opts.Wait {
		for _, it := range items {
			if it.Action == apply.ActionDelete {
				if err := a.WaitGone(ctx, it.Live); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return deleted, fmt.Errorf("uninstall: %w", err)
	}
	return deleted, nil
}
