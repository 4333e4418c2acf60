package engine

import (
	"context"
	"errors"
	"fmt"
	"github.com/installstrategy/installstrategy/pkg/metakeys"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/health"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// withImplicitNamespaces adds a Namespace object for every namespace the
// objects of s (and the owner's inventory) live in that s does not define:
// created as the installation's own when absent, merged into (never
// deleted) when someone else made it (kinds.Info.MergeIntoExisting).
func withImplicitNamespaces(s *strategy.Strategy, ownerNS string) *strategy.Strategy {
	defined := map[string]bool{}
	for _, o := range s.Objects {
		if o.GroupVersionKind().GroupKind() == namespaceKind {
			defined[o.GetName()] = true
		}
	}
	var add []*unstructured.Unstructured
	need := func(ns string) {
		if ns == "" || defined[ns] {
			return
		}
		defined[ns] = true
		ob := &unstructured.Unstructured{}
		ob.SetGroupVersionKind(namespaceKind.WithVersion("v1"))
		ob.SetName(ns)
		ob.SetAnnotations(map[string]string{metakeys.ImplicitAnnotation: "true"})
		add = append(add, ob)
	}
	need(ownerNS)
	for _, o := range s.Objects {
		need(o.GetNamespace())
	}
	if len(add) == 0 {
		return s
	}
	out := &strategy.Strategy{Identity: s.Identity, Objects: append(append([]*unstructured.Unstructured{}, s.Objects...), add...)}
	out.Sort()
	return out
}

// recordable returns what the inventory records before anything is
// written: every strategy object of a kind the cluster serves (or a CRD of
// the strategy defines), except Namespaces, which are recorded once they
// are known to be the installation's (created by it, or its own), not
// someone else's that it merged into (see recordNamespaces).
func (r *run) recordable() ([]strategy.ObjectRef, error) {
	crdKinds := plan.CRDKinds(r.s)
	out := make([]strategy.ObjectRef, 0, len(r.s.Objects))
	for _, o := range r.s.Objects {
		ref := strategy.RefOf(o)
		if ref.GroupKind() == namespaceKind {
			continue
		}
		if _, defined := crdKinds[ref.GroupKind()]; !defined {
			_, err := r.a.Mapping(ref, o.GroupVersionKind().Version)
			var notServed *apply.NotServedError
			if errors.As(err, &notServed) {
				continue
			}
			if err != nil {
				return nil, err
			}
		}
		out = append(out, ref)
	}
	return out, nil
}

// recordAdopted marks ref's inventory entry as adopted, not created
// (inventory.Entry.Adopted), holding r.mu.
func (r *run) recordAdopted(ref strategy.ObjectRef) {
	e := r.inv.Entries[ref]
	e.ObjectRef, e.Adopted = ref, true
	r.inv.Entries[ref] = e
}

// recordNamespaces adds the Namespaces of results that are the
// installation's to the inventory, and writes it when that changed it.
func (r *run) recordNamespaces(ctx context.Context, results ...apply.Result) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, res := range results {
		if res.Ref.GroupKind() == namespaceKind && !res.Shared && res.Action != apply.ActionSkip && res.Action != apply.ActionConflict && res.Action != "" {
			r.inv.Add(res.Ref)
		}
	}
	return r.invs.Write(ctx, r.inv)
}

// ensureNamespace applies the strategy's Namespace object named ns (its
// own, or an implicit one) ahead of the namespace step, and records it when
// it is the installation's: the inventory lives in the owner's namespace,
// the CA Secret in the namespace of the first certificate, and both are
// written before any step.
func (r *run) ensureNamespace(ctx context.Context, ns string) error {
	for _, o := range r.s.Objects {
		if o.GroupVersionKind().GroupKind() == namespaceKind && o.GetName() == ns {
			if _, ok := r.ensuredResult(o); ok {
				return nil
			}
			res, err := r.a.Apply(ctx, o)
			r.emit(Event{Type: EventApplied, Step: "namespace", Ref: res.Ref, Action: res.Action, Reason: res.Reason})
			if err != nil {
				return fmt.Errorf("namespace %s of installation %s: %w", ns, r.opts.Owner, err)
			}
			r.mu.Lock()
			if !res.Shared {
				r.inv.Add(res.Ref)
			}
			if res.Adopted {
				r.recordAdopted(res.Ref)
			}
			r.mu.Unlock()
			// Its step takes this result instead of applying it again.
			res.Object = health.Essentials(res.Object)
			r.mu.Lock()
			if r.ensured == nil {
				r.ensured = map[string]apply.Result{}
			}
			r.ensured[ns] = res
			r.mu.Unlock()
			return nil
		}
	}
	return nil
}

// ensuredResult returns the result of obj's apply by ensureNamespace in
// this run, when obj is a Namespace it applied.
func (r *run) ensuredResult(obj *unstructured.Unstructured) (apply.Result, bool) {
	if obj.GroupVersionKind().GroupKind() != namespaceKind {
		return apply.Result{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	res, ok := r.ensured[obj.GetName()]
	return res, ok
}

// recordApplied writes the inventory after prune: the strategy's objects
// that were applied or are in conflict (not skipped for a kind not served,
// not someone else's Namespace merged into), the CRDs prune kept, and what
// it could not delete; without prune, what it held too.
func (r *run) recordApplied(ctx context.Context) error {
	next := inventory.New(r.opts.Owner)
	if r.opts.NoPrune {
		for ref, e := range r.inv.Entries {
			next.Entries[ref] = e
		}
	}
	next.Version = r.s.Identity.Version
	for _, res := range r.res.Applied {
		if res.Action == apply.ActionSkip || res.Shared {
			continue
		}
		e := r.inv.Entries[res.Ref]
		e.ObjectRef = res.Ref
		next.Entries[res.Ref] = e
	}
	// What prune could not delete, and the CRDs it kept, are still in
	// the inventory it left.
	target := r.s.Index()
	for ref, e := range r.inv.Entries {
		if _, ok := next.Entries[ref]; !ok && target[ref] == nil {
			next.Entries[ref] = e
		}
	}
	r.inv.Entries = next.Entries
	r.inv.Version = next.Version
	return r.invs.Write(ctx, r.inv)
}
