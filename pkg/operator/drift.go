package operator

import (
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// workloadDrift passes spec changes and deletions of workloads written by
// an Installation, so that drift is repaired at once, not at the next
// resync. While a rollout runs in the workload's namespace it records
// them instead (driftLog): most are the rollout's own writes, and
// passing them would queue a second, complete reconcile right after it.
// The rollout asks the log at its end whether any was someone else's.
func (r *Reconciler) workloadDrift() predicate.Predicate {
	pass := func(o client.Object, generation int64) bool {
		if !inventory.ByAnInstallation(o.GetLabels()) {
			return false
		}
		if v, ok := r.drifts.Load(o.GetNamespace()); ok {
			v.(*driftLog).record(o, generation)
			return false
		}
		return true
	}
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		DeleteFunc:  func(e event.DeleteEvent) bool { return pass(e.Object, deletion) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() && pass(e.ObjectNew, e.ObjectNew.GetGeneration())
		},
	}
}

// deletion is the generation passed to driftLog.record for a deletion.
const deletion = -1

// driftLog holds the workload changes seen in a namespace while a rollout
// runs there.
type driftLog struct {
	mu   sync.Mutex
	seen map[strategy.ObjectRef]*drift
}

// drift is what changed of one workload: whether it was deleted, and the
// highest generation it changed to since (of the object created anew,
// after a deletion).
type drift struct {
	deleted    bool
	generation int64
}

// watchDrift starts recording the workload changes of namespace until
// the returned function stops it and returns the log.
func (r *Reconciler) watchDrift(namespace string) func() *driftLog {
	log := &driftLog{seen: map[strategy.ObjectRef]*drift{}}
	if v, loaded := r.drifts.LoadOrStore(namespace, log); loaded {
		// Another rollout of the namespace records already (only one
		// Installation of a namespace rolls out; see stageActive):
		// share its log, and leave stopping it to that one.
		shared := v.(*driftLog)
		return func() *driftLog { return shared }
	}
	return func() *driftLog {
		r.drifts.CompareAndDelete(namespace, log)
		return log
	}
}

func (d *driftLog) record(o client.Object, generation int64) {
	ref := strategy.RefOf(o)
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.seen[ref]
	if c == nil {
		c = &drift{}
		d.seen[ref] = c
	}
	if generation == deletion {
		c.deleted, c.generation = true, 0
		return
	}
	c.generation = max(c.generation, generation)
}

// foreign returns a workload change the rollout res did not make itself
// (ok false when there is none): a generation beyond the one the rollout
// wrote or found, a deletion of an object it neither pruned nor
// recreated, a change of a workload it did not apply.
func (d *driftLog) foreign(res *engine.Result) (strategy.ObjectRef, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.seen) == 0 {
		return strategy.ObjectRef{}, false
	}
	applied := map[strategy.ObjectRef]apply.Result{}
	pruned := map[strategy.ObjectRef]bool{}
	if res != nil {
		for _, a := range res.Applied {
			applied[a.Ref] = a
		}
		for _, p := range res.Pruned {
			pruned[p] = true
		}
	}
	for ref, c := range d.seen {
		a, wasApplied := applied[ref]
		switch {
		case pruned[ref]:
			// Its deletion, and the generation deleting it set.
		case !wasApplied || a.Action == apply.ActionSkip || a.Action == apply.ActionConflict:
			return ref, true
		case c.deleted && a.Action != apply.ActionRecreate:
			return ref, true
		case c.generation > a.Generation:
			return ref, true
		}
	}
	return strategy.ObjectRef{}, false
}
