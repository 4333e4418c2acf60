package plan

import (
	"context"
	"errors"
	"fmt"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"sort"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// ObserveOptions tunes Observe. The zero value reads 8 objects at a time,
// asks the server with dry runs, and keeps CRDs out of the prune list.
type ObserveOptions struct {
	// Parallelism bounds concurrent reads and dry runs; 0 means 8.
	Parallelism int
	// NoDryRun decides create/update from the live objects alone, without
	// server-side dry runs (fewer requests; recreates and rejected writes
	// are not foreseen).
	NoDryRun bool
	// PruneCRDs lets prune delete CustomResourceDefinitions (and so every
	// custom resource of them). Without it they are reported as kept.
	PruneCRDs bool
	// Inventory is what the installation applied before; prune candidates
	// come from it alone. nil means nothing was applied before.
	Inventory *inventory.Inventory
	// Desired, when set, returns the object that would really be applied
	// for a strategy object (pkg/engine fills certificates and CA
	// bundles in); nil compares the strategy objects as they are.
	Desired func(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error)
}

func (o ObserveOptions) parallelism() int {
	if o.Parallelism <= 0 {
		return 8
	}
	return o.Parallelism
}

// CRDKinds returns the kinds the CRDs of a strategy define, each with its
// CRD's name. It reads spec.group and spec.names.kind only
// (strategy.DefinedKind): converting each CRD to its Go type cost 50 ms of a
// KubeVirt install's start for two fields, and a CRD malformed elsewhere is
// refused by the API server at its write, named.
func CRDKinds(s *strategy.Strategy) map[schema.GroupKind]string {
	out := map[schema.GroupKind]string{}
	for _, o := range s.Objects {
		if gk, ok := strategy.DefinedKind(o); ok {
			out[gk] = o.GetName()
		}
	}
	return out
}

// Observe compares every object of the plan with the cluster and fills in
// the actions, then lists what prune would delete. Strategies with empty
// TLS Secrets need opts.Desired to fill them (engine.Plan does). a must have the plan's
// target identity in its options; Observe never writes (dry is a writer
// whose writes are server-side dry runs). Errors of single objects are joined; their items
// keep the reason.
func Observe(ctx context.Context, a Cluster, dry Writer, p *Plan, s *strategy.Strategy, opts ObserveOptions) error {
	err := ObserveItems(ctx, a, dry, p, s, opts)
	if ctx.Err() != nil {
		return err
	}
	prune, perr := Prunable(ctx, a, s, opts)
	p.Prune = prune
	return errors.Join(err, perr)
}

// ObserveItems is Observe without the prune list: it compares every item of
// the plan's steps with the cluster and, for those that would be created or
// updated, asks the API server with a server-side dry run (unless
// opts.NoDryRun). Every item the API server refuses is returned as a
// *DryRunError, joined with any other error. Admission webhooks take part:
// since admissionregistration.k8s.io/v1 every webhook declares sideEffects
// None or NoneOnDryRun, so none refuses a dry run for its side effects.
func ObserveItems(ctx context.Context, a Cluster, dry Writer, p *Plan, s *strategy.Strategy, opts ObserveOptions) error {
	crdKinds := CRDKinds(s)
	o := &observer{a: a, dry: dry, crdKinds: crdKinds, opts: opts, namespaces: map[string]bool{}}

	var (
		mu   sync.Mutex
		errs []error
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.parallelism())
	for si := range p.Steps {
		for ii := range p.Steps[si].Items {
			it := &p.Steps[si].Items[ii]
			g.Go(func() error {
				if err := o.item(gctx, it); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
				return gctx.Err()
			})
		}
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// DryRunError is an object of the strategy the API server refuses in a
// server-side dry run: its write would fail the same way.
type DryRunError struct {
	Ref strategy.ObjectRef
	Err error
}

func (e *DryRunError) Error() string {
	msg := e.Err.Error()
	if strings.Contains(msg, e.Ref.String()) {
		return msg
	}
	return e.Ref.String() + ": " + msg
}

// Unwrap returns the API server's answer.
func (e *DryRunError) Unwrap() error { return e.Err }

// observer holds what ObserveItems shares between its items.
type observer struct {
	a        Cluster
	dry      Writer
	crdKinds map[schema.GroupKind]string
	opts     ObserveOptions

	mu sync.Mutex
	// namespaces memoises whether a namespace exists (one read each).
	namespaces map[string]bool
}

// namespaceExists reads a namespace once per observation.
func (o *observer) namespaceExists(ctx context.Context, name string) bool {
	o.mu.Lock()
	exists, ok := o.namespaces[name]
	o.mu.Unlock()
	if ok {
		return exists
	}
	ns, err := o.a.GetRef(ctx, strategy.ObjectRef{Group: kinds.Namespace.Group, Kind: kinds.Namespace.Kind, Name: name})
	exists = err == nil && ns != nil
	if err == nil {
		o.mu.Lock()
		o.namespaces[name] = exists
		o.mu.Unlock()
	}
	return exists
}

func (o *observer) item(ctx context.Context, it *Item) error {
	a, dry, crdKinds, opts := o.a, o.dry, o.crdKinds, o.opts
	obj := it.Object
	if opts.Desired != nil {
		d, err := opts.Desired(ctx, obj)
		if err != nil {
			it.Reason = err.Error()
			return err
		}
		obj = d
	}
	_, err := a.Mapping(it.Ref, obj.GroupVersionKind().Version)
	var notServed *apply.NotServedError
	if errors.As(err, &notServed) {
		if crd, ok := crdKinds[it.Ref.GroupKind()]; ok {
			it.Action, it.Reason = apply.ActionCreate, "kind served once CRD "+crd+" of this strategy is established"
			return nil
		}
		it.Action, it.Reason = apply.ActionSkip, notServed.Error()
		return nil
	}
	if err != nil {
		it.Reason = err.Error()
		return err
	}
	live, err := a.Get(ctx, obj)
	if err != nil {
		it.Reason = err.Error()
		return err
	}
	it.Live = live
	prepared, err := a.Prepare(obj, live)
	if err != nil {
		return err
	}
	if live == nil && CompletedJob(opts.Inventory, prepared) {
		it.Action, it.Reason = apply.ActionUnchanged, CompletedJobReason
		return nil
	}
	res := a.Decide(prepared, live)
	it.Action, it.Reason, it.Changes = res.Action, res.Reason, res.Changes
	if opts.NoDryRun || (res.Action != apply.ActionCreate && res.Action != apply.ActionUpdate) {
		return nil
	}
	if live == nil && obj.GetNamespace() != "" && !o.namespaceExists(ctx, obj.GetNamespace()) {
		// A dry-run create in a namespace that does not exist yet fails;
		// the reconciler creates the namespace first.
		return nil
	}
	dres, err := dry.Apply(ctx, obj)
	var conflict *apply.ConflictError
	if errors.As(err, &conflict) {
		it.Action, it.Reason = dres.Action, dres.Reason
		return nil
	}
	if err != nil {
		it.Reason = err.Error()
		if ctx.Err() != nil {
			return err
		}
		return &DryRunError{Ref: it.Ref, Err: err}
	}
	it.Action = dres.Action
	if dres.Reason != "" {
		it.Reason = dres.Reason
	}
	return nil
}

// CompletedJobReason says why a Job that is gone is not run again.
const CompletedJobReason = "completed before, removed since (ttlSecondsAfterFinished): not run again"

// CompletedJob reports whether prepared (as the applier writes it) is a Job
// the inventory records as completed with the same applied hash: once its
// ttlSecondsAfterFinished removed it, it is done, not missing.
func CompletedJob(inv *inventory.Inventory, prepared *unstructured.Unstructured) bool {
	if inv == nil {
		return false
	}
	info, _ := kinds.Lookup(prepared.GroupVersionKind().GroupKind())
	e := inv.Entries[strategy.RefOf(prepared)]
	return info.Health == kinds.HealthJob && e.Hash != "" && e.Hash == prepared.GetAnnotations()[metakeys.AppliedHashAnnotation]
}

// Prunable lists what prune would delete: the objects of the inventory
// (opts.Inventory) that the strategy no longer holds, in deletion order
// (kinds.Info.PruneOrder). An entry is deleted only while its live object
// still carries the installation's labels and applied hash
// (apply.IsOurs); one that does not is listed as skipped, and one that is
// gone is not listed. CRDs are skipped unless opts.PruneCRDs; a Namespace
// is skipped while it holds objects that are not the installation's
// (ForeignObjects). An object whose annotations keep it (inventory.KeptBy:
// helm.sh/resource-policy or installstrategy.io/resource-policy "keep") is
// listed as skipped (KeptReasonPrefix), and so is a system object the
// installation adopted or the API server made (inventory.DeletionNeedsConsent)
// unless the applier's SystemConsent names it.
func Prunable(ctx context.Context, a Cluster, s *strategy.Strategy, opts ObserveOptions) ([]Item, error) {
	return deletable(ctx, a, s.Index(), opts, "not in the target strategy")
}

// KeptReasonPrefix starts the reason of an object prune and uninstall keep
// for its resource policy (inventory.KeptBy): like Helm, they leave it in
// the cluster, orphaned: it leaves the inventory, and keeps its labels, so
// the installation takes it back if a later strategy holds it again.
const KeptReasonPrefix = "kept by its resource policy "

// Removable lists what an uninstall deletes: every object of the
// inventory, with the rules of Prunable.
func Removable(ctx context.Context, a Cluster, opts ObserveOptions) ([]Item, error) {
	return deletable(ctx, a, nil, opts, "uninstall")
}

func deletable(ctx context.Context, a Cluster, target map[strategy.ObjectRef]*unstructured.Unstructured, opts ObserveOptions, why string) ([]Item, error) {
	if opts.Inventory == nil {
		return nil, nil
	}
	owner, consent := a.Options().Owner, a.Options().SystemConsent
	var refs []strategy.ObjectRef
	for _, ref := range opts.Inventory.Refs() {
		if _, ok := target[ref]; !ok {
			refs = append(refs, ref)
		}
	}
	items := make([]*Item, len(refs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.parallelism())
	for i, ref := range refs {
		g.Go(func() error {
			live, err := a.GetRef(gctx, ref)
			if err != nil || live == nil {
				return err
			}
			items[i] = ptr(decideDelete(ref, opts.Inventory.Entries[ref], live, deleteRules{Owner: owner, Consent: consent, PruneCRDs: opts.PruneCRDs, Why: why}))
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var out []Item
	for _, it := range items {
		if it != nil {
			out = append(out, *it)
		}
	}
	sortForDeletion(out)
	return out, nil
}

func ptr[T any](v T) *T { return &v }

// deleteRules are what decideDelete judges a live object by.
type deleteRules struct {
	Owner     inventory.Owner
	Consent   inventory.SystemConsent
	PruneCRDs bool
	// Why is the reason of a deletion ("uninstall", "not in the target
	// strategy").
	Why string
}

// decideDelete says whether prune or uninstall deletes the live object of
// an inventory entry, and why (see Prunable): the decision alone, over
// values.
func decideDelete(ref strategy.ObjectRef, e inventory.Entry, live *unstructured.Unstructured, r deleteRules) Item {
	it := Item{Ref: ref, Action: apply.ActionDelete, Reason: r.Why, Live: live}
	e.ObjectRef = ref
	system := inventory.DeletionNeedsConsent(e, live, r.Consent)
	switch {
	case !apply.IsOurs(live, r.Owner):
		it.Action, it.Reason = apply.ActionSkip, "no longer carries the labels of installation "+r.Owner.String()+": left alone"
	case inventory.KeptBy(live.GetAnnotations()) != "":
		it.Action, it.Reason = apply.ActionSkip, KeptReasonPrefix+inventory.KeptBy(live.GetAnnotations())+": left in the cluster, and out of the inventory"
	case system != "":
		it.Action, it.Reason = apply.ActionSkip, system+": left alone"
	case definesKinds(ref) && !r.PruneCRDs:
		it.Action, it.Reason = apply.ActionSkip, "CRD kept: pruning CRDs needs the explicit flag"
	}
	return it
}

// definesKinds reports whether ref is of a kind whose objects define other
// kinds (kinds.Info.DefinesKinds: CRDs), which prune deletes only when
// asked.
func definesKinds(ref strategy.ObjectRef) bool {
	info, _ := kinds.Lookup(ref.GroupKind())
	return info.DefinesKinds
}

// sortForDeletion orders items as prune and uninstall delete them
// (kinds.Info.PruneOrder, then by reference).
func sortForDeletion(items []Item) {
	sort.SliceStable(items, func(i, j int) bool {
		ii, _ := kinds.Lookup(items[i].Ref.GroupKind())
		ij, _ := kinds.Lookup(items[j].Ref.GroupKind())
		if ii.PruneOrder != ij.PruneOrder {
			return ii.PruneOrder < ij.PruneOrder
		}
		return items[i].Ref.Less(items[j].Ref)
	})
}

// LegacyObjects lists the objects an older installstrategy applied for an
// Installation, marked only by its managed-by value
// (inventory.LegacyManagedBy) and the applied hash: the first inventory of
// such an installation starts from them. Kinds searched: every kind of the
// kind table the cluster serves, and the kinds of the legacy CRDs found.
func LegacyObjects(ctx context.Context, a Cluster) ([]strategy.ObjectRef, error) {
	owner := a.Options().Owner
	if owner.Kind != inventory.KindInstallation {
		return nil, nil
	}
	managedBy := inventory.LegacyManagedBy(owner.Namespace, owner.Name)
	type kind struct {
		gk      schema.GroupKind
		version string
	}
	var search []kind
	known := map[schema.GroupKind]bool{}
	for _, info := range kinds.All() {
		search = append(search, kind{info.GroupKind, info.Version})
		known[info.GroupKind] = true
	}
	crds, err := a.List(ctx, kinds.CustomResourceDefinition, "v1", metakeys.ManagedByLabel+"="+managedBy)
	if err != nil {
		return nil, err
	}
	for _, c := range crds {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(c.Object, &crd); err != nil {
			return nil, fmt.Errorf("legacy objects: %s: %w", strategy.RefOf(c), err)
		}
		gk := schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}
		if known[gk] {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if v.Storage {
				search = append(search, kind{gk, v.Name})
			}
		}
	}
	var (
		mu  sync.Mutex
		out []strategy.ObjectRef
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, k := range search {
		g.Go(func() error {
			objs, err := a.List(gctx, k.gk, k.version, metakeys.ManagedByLabel+"="+managedBy)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			for _, o := range objs {
				if apply.IsOurs(o, owner) {
					out = append(out, strategy.RefOf(o))
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}
