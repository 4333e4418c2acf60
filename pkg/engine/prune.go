package engine

import (
	"context"

	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// prune deletes what the strategy no longer holds and the installation's
// inventory does, in the kind table's prune order (see deleteItems).
func (r *run) prune(ctx context.Context) error {
	r.emit(Event{Type: EventStepStarted, Step: plan.PruneStep})
	items, err := plan.Prunable(ctx, r.a, r.s, plan.ObserveOptions{PruneCRDs: r.opts.PruneCRDs, Parallelism: r.opts.Parallelism, Inventory: r.inv})
	if err != nil {
		return err
	}
	r.res.Plan.Prune = items
	// Entries whose objects are gone leave the inventory.
	listed := map[strategy.ObjectRef]bool{}
	for _, it := range items {
		listed[it.Ref] = true
	}
	target := r.s.Index()
	for ref := range r.inv.Entries {
		if target[ref] == nil && !listed[ref] {
			delete(r.inv.Entries, ref)
		}
	}
	deleted, kept, err := deleteItems(ctx, newDeleteClients(r.a, r.kube), r.inv, r.opts.Certificates.CASecret, items, func(e Event) {
		e.Step = plan.PruneStep
		r.emit(e)
	})
	r.res.Pruned = append(r.res.Pruned, deleted...)
	r.res.Kept = append(r.res.Kept, kept...)
	if err != nil {
		return err
	}
	r.emit(Event{Type: EventStepReady, Step: plan.PruneStep})
	return nil
}
