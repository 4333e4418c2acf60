package engine

import (
	"context"
	"fmt"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/crdsafety"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/plan"
)

// crdsPruned judges the CRDs this run's prune would delete (rule
// crdPruned): those plan.Prunable lets go with PruneCRDs (in the
// inventory, lacking from the target strategy, still ours, not kept),
// none without PruneCRDs or with NoPrune. Each one's custom resources are
// read page by page at a version it serves, at most limit
// (observeStored), and those the prune does not delete itself (storedFate:
// the installation's own, dropped by the target) count: a CRD that stores
// none is safe. Its findings are the unsafe ones, not yet permitted. It
// writes nothing. An uninstall is not judged by it (KeepCRDs governs
// that).
func (r *run) crdsPruned(ctx context.Context, limit int) ([]crdsafety.Finding, error) {
	if !r.opts.PruneCRDs || r.opts.NoPrune {
		return nil, nil
	}
	// Only the inventory's CRDs are candidates: the prune's decision on
	// each, without reading every other object prune would delete.
	crds := inventory.New(r.inv.Owner)
	for ref, e := range r.inv.Entries {
		if info, _ := kinds.Lookup(ref.GroupKind()); info.DefinesKinds {
			crds.Entries[ref] = e
		}
	}
	if len(crds.Entries) == 0 {
		return nil, nil
	}
	items, err := plan.Prunable(ctx, r.a, r.s, plan.ObserveOptions{PruneCRDs: r.opts.PruneCRDs, Parallelism: r.opts.Parallelism, Inventory: crds})
	if err != nil {
		return nil, fmt.Errorf("crd preflight: pruned CRDs: %w", err)
	}
	var out []crdsafety.Finding
	for _, it := range items {
		if it.Action != apply.ActionDelete || it.Live == nil {
			continue
		}
		live := it.Live
		lc, err := crdsafety.FromUnstructured(live)
		if err != nil {
			return nil, fmt.Errorf("crd preflight: pruned %w", err)
		}
		found := []crdsafety.Finding{crdsafety.Pruned(lc)}
		complete := false
		if at := found[0].ReadAt; at != "" {
			// The live CRD stands for the target's (the target has none):
			// no object of it is the target's.
			if complete, err = r.observeStored(ctx, live, lc, at, limit, found); err != nil {
				return nil, fmt.Errorf("crd preflight %s: %w", live.GetName(), err)
			}
		}
		if !complete {
			// Fewer read than stored: the count is a lower bound.
			found[0].Truncated = true
		}
		out = append(out, crdsafety.Judge(found, nil, map[string]bool{found[0].ReadAt: !complete})...)
	}
	return out, nil
}

// notePruned adds to the reason of each CRD p's prune list deletes the
// objects its crdPruned finding counted, so the plan's prune line says
// what goes with the CRD.
func notePruned(p *plan.Plan) {
	counted := map[string]crdsafety.Finding{}
	for _, f := range p.CRDSafety {
		if f.Rule == crdsafety.RuleCRDPruned {
			counted[f.CRD] = f
		}
	}
	for i := range p.Prune {
		it := &p.Prune[i]
		f, ok := counted[it.Ref.Name]
		if info, _ := kinds.Lookup(it.Ref.GroupKind()); !ok || !info.DefinesKinds || it.Action != apply.ActionDelete {
			continue
		}
		verdict := "refused"
		if f.Allowed {
			verdict = "allowed by override"
		}
		n := fmt.Sprintf("%d", f.Objects)
		if f.Truncated {
			n = "at least " + n
		}
		it.Reason += fmt.Sprintf("; deletes %s stored objects with it (crdPruned, %s)", n, verdict)
	}
}
