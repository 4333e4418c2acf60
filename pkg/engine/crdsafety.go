package engine

import (
	"context"
	"fmt"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/crdsafety"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// defaultMaxStoredObjects is how many custom resources per CRD version the
// CRD preflight reads when Options.MaxStoredObjects is 0.
const defaultMaxStoredObjects = 10000

// storedPageSize is the page size of the preflight's lists.
const storedPageSize = 500

// crdChanges compares every CRD of the strategy with its live definition
// (pkg/crdsafety) and judges the findings stored objects decide against
// the custom resources in the cluster, read page by page at the version a
// finding is about, at most Options.MaxStoredObjects per CRD version: a
// finding that none of those read affects is still unsafe when more were
// stored (Finding.Truncated). The CRDs this run's prune deletes are judged
// too (crdsPruned). It returns the unsafe findings, those an override
// accepts marked Allowed. It writes nothing.
func (r *run) crdChanges(ctx context.Context) ([]crdsafety.Finding, error) {
	limit := r.opts.MaxStoredObjects
	if limit <= 0 {
		limit = defaultMaxStoredObjects
	}
	var out []crdsafety.Finding
	for _, obj := range r.s.Objects {
		if info, _ := kinds.Lookup(obj.GroupVersionKind().GroupKind()); !info.UpgradeSafety {
			continue
		}
		if r.absent[strategy.RefOf(obj)] {
			continue
		}
		live, err := r.a.Get(ctx, obj)
		if err != nil {
			return nil, fmt.Errorf("crd preflight %s: %w", obj.GetName(), err)
		}
		if live == nil {
			continue
		}
		lc, err := crdsafety.FromUnstructured(live)
		if err != nil {
			return nil, fmt.Errorf("crd preflight: live %w", err)
		}
		dc, err := crdsafety.FromUnstructured(obj)
		if err != nil {
			return nil, fmt.Errorf("crd preflight: %w", err)
		}
		found := crdsafety.Compare(lc, dc)
		truncated := map[string]bool{}
		read := map[string]bool{}
		for _, f := range found {
			if f.Judge == crdsafety.Always || read[f.ReadAt] {
				continue
			}
			read[f.ReadAt] = true
			complete, err := r.observeStored(ctx, live, dc, f.ReadAt, limit, found)
			if err != nil {
				return nil, fmt.Errorf("crd preflight %s: %w", obj.GetName(), err)
			}
			truncated[f.ReadAt] = !complete
		}
		out = append(out, crdsafety.Judge(found, nil, truncated)...)
	}
	pruned, err := r.crdsPruned(ctx, limit)
	if err != nil {
		return nil, err
	}
	out = append(out, pruned...)
	crdsafety.Permit(out, r.opts.AllowCRDChanges)
	return out, nil
}

// observeStored lists the custom resources of live (a CRD; desired is the
// strategy's) at version, in pages, and counts each against the findings
// read at that version, as what the upgrade does to it decides
// (storedFate). It reports whether every object was read: false past
// limit, or when the version is not served (it cannot be read).
func (r *run) observeStored(ctx context.Context, live *unstructured.Unstructured, desired *apiextv1.CustomResourceDefinition, version string, limit int, found []crdsafety.Finding) (bool, error) {
	res := r.a.Dynamic().Resource(crdResourceAt(live, version))
	target := r.s.Index()
	opts := metav1.ListOptions{Limit: storedPageSize}
	n := 0
	for {
		var list *unstructured.UnstructuredList
		err := r.a.Retry(ctx, func() error {
			var err error
			list, err = res.List(ctx, opts)
			return err
		})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("list %s at %s: %w", live.GetName(), version, err)
		}
		for i := range list.Items {
			st := r.storedFate(&list.Items[i], target, desired, version)
			for j := range found {
				if found[j].ReadAt == version && found[j].Judge != crdsafety.Always {
					found[j].ObserveStored(st)
				}
			}
		}
		n += len(list.Items)
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			return true, nil
		}
		if n >= limit {
			return false, nil
		}
	}
}

// crdPreflight runs the CRD preflight of Run: the findings go into the
// plan; the refused ones make a *crdsafety.UnsafeError; a CRD whose scope
// change an override accepts may be recreated by the applier.
func (r *run) crdPreflight(ctx context.Context) error {
	found, err := r.crdChanges(ctx)
	if err != nil {
		return err
	}
	r.res.Plan.CRDSafety = found
	if refused := crdsafety.Refused(found); len(refused) > 0 {
		return &crdsafety.UnsafeError{Findings: refused}
	}
	var recreate map[strategy.ObjectRef]bool
	for _, f := range found {
		if f.Rule != crdsafety.RuleScope {
			continue
		}
		for _, o := range r.s.Objects {
			if info, _ := kinds.Lookup(o.GroupVersionKind().GroupKind()); info.UpgradeSafety && o.GetName() == f.CRD {
				if recreate == nil {
					recreate = map[strategy.ObjectRef]bool{}
				}
				recreate[strategy.RefOf(o)] = true
			}
		}
	}
	if recreate != nil {
		opts := r.a.Options()
		opts.Recreate = recreate
		r.a = r.a.WithOptions(opts)
	}
	return nil
}

// storedFate says what the run does to a stored custom resource o (read at
// version): the target strategy holds it (it is judged by the strategy's
// version plus the fields other field managers own), or the current
// installation holds it, the target does not, and this run's prune deletes
// it (not counted: exactly the objects plan.Prunable deletes, so never with
// NoPrune, nor one that lost our labels or that a resource policy keeps);
// any other object is users' data, judged as stored. An object the target
// holds but the run does not write (another installation's, or one not
// adopted) is users' data too, as is one whose fields Desired cannot
// stand for (written at another version through a conversion webhook).
func (r *run) storedFate(o *unstructured.Unstructured, target map[strategy.ObjectRef]*unstructured.Unstructured, desired *apiextv1.CustomResourceDefinition, version string) crdsafety.Stored {
	st := crdsafety.Stored{Object: o}
	ref := strategy.RefOf(o)
	if d := target[ref]; d != nil {
		claim := apply.ClaimOf(o, r.opts.Owner)
		adopted := claim == inventory.ClaimNone && r.opts.Adopt == apply.AdoptAll
		written := claim == inventory.ClaimOurs || claim == inventory.ClaimLegacy || claim == inventory.ClaimLegacyShared || adopted
		// Another installation's object, or one not adopted, is not
		// written: its values stay users' data.
		if written && crdsafety.SameFields(desired, d.GetAPIVersion(), version) {
			st.Desired = d
			st.Ours = func(e metav1.ManagedFieldsEntry) bool {
				return e.Manager == r.opts.FieldManager || adopted && apply.InheritsFields(e, o)
			}
		}
		return st
	}
	_, held := r.inv.Entries[ref]
	st.Pruned = held && !r.opts.NoPrune && apply.IsOurs(o, r.opts.Owner) && inventory.KeptBy(o.GetAnnotations()) == ""
	return st
}
