package plan

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"golang.org/x/sync/errgroup"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/installstrategy/installstrategy/pkg/apply"
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
	// EmptyKinds are kinds known to have no objects of ours (their CRDs
	// were created by this run); Prunable does not list them.
	EmptyKinds map[schema.GroupKind]bool
	// Desired, when set, returns the object that would really be applied
	// for a strategy object (pkg/reconcile fills certificates and CA
	// bundles in); nil compares the strategy objects as they are.
	Desired func(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error)
}

func (o ObserveOptions) parallelism() int {
	if o.Parallelism <= 0 {
		return 8
	}
	return o.Parallelism
}

var crdGroupKind = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}

// CRDKinds returns the kinds the CRDs of a strategy define.
func CRDKinds(s *strategy.Strategy) (map[schema.GroupKind]string, error) {
	out := map[schema.GroupKind]string{}
	for _, o := range s.Objects {
		if o.GroupVersionKind().GroupKind() != crdGroupKind {
			continue
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &crd); err != nil {
			return nil, fmt.Errorf("%s: %w", strategy.RefOf(o), err)
		}
		out[schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}] = crd.Name
	}
	return out, nil
}

// Observe compares every object of the plan with the cluster and fills in
// the actions, then lists what prune would delete. Strategies with empty
// TLS Secrets need opts.Desired to fill them (reconcile.Plan does). a must have the plan's
// target identity in its options; Observe never writes (its writes are
// server-side dry runs). Errors of single objects are joined; their items
// keep the reason.
func Observe(ctx context.Context, a *apply.Applier, p *Plan, s *strategy.Strategy, opts ObserveOptions) error {
	crdKinds, err := CRDKinds(s)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	aopts := a.Options()
	aopts.DryRun = true
	dry := a.WithOptions(aopts)

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
				if err := observeItem(gctx, a, dry, it, crdKinds, opts); err != nil {
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
	prune, err := Prunable(ctx, a, s, opts)
	if err != nil {
		errs = append(errs, err)
	}
	p.Prune = prune
	return errors.Join(errs...)
}

func observeItem(ctx context.Context, a, dry *apply.Applier, it *Item, crdKinds map[schema.GroupKind]string, opts ObserveOptions) error {
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
	prepared, err := apply.Prepare(apply.WithLive(obj, live), a.Options().Identity, a.Options().ManagedBy)
	if err != nil {
		return err
	}
	res := a.Decide(prepared, live)
	it.Action, it.Reason, it.Changes = res.Action, res.Reason, res.Changes
	if opts.NoDryRun || (res.Action != apply.ActionCreate && res.Action != apply.ActionUpdate) {
		return nil
	}
	if live == nil && obj.GetNamespace() != "" {
		// A dry-run create in a namespace that does not exist yet fails;
		// the reconciler creates the namespace first.
		if ns, err := a.Dynamic().Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Get(ctx, obj.GetNamespace(), metav1.GetOptions{}); err != nil || ns == nil {
			return nil
		}
	}
	dres, err := dry.Apply(ctx, obj)
	var conflict *apply.ConflictError
	if errors.As(err, &conflict) {
		it.Action, it.Reason = dres.Action, dres.Reason
		return nil
	}
	if err != nil {
		it.Reason = err.Error()
		return err
	}
	it.Action = dres.Action
	if dres.Reason != "" {
		it.Reason = dres.Reason
	}
	return nil
}

// Prunable lists the live objects that are ours (apply.IsOurs with the
// applier's managed-by value, and carrying identity annotations) but not in
// the strategy, in deletion order (kinds.Info.PruneOrder), in every
// namespace: the managed-by value is the scope of an installation, so every
// installation sharing a cluster needs its own. Kinds searched:
// every kind of the kind table the cluster serves, and the kinds of CRDs
// that are ours. CRDs are reported as skipped unless opts.PruneCRDs.
func Prunable(ctx context.Context, a *apply.Applier, s *strategy.Strategy, opts ObserveOptions) ([]Item, error) {
	managedBy := a.Options().ManagedBy
	target := s.Index()
	type kind struct {
		gk      schema.GroupKind
		version string
	}
	var search []kind
	for _, info := range kinds.All() {
		search = append(search, kind{info.GroupKind, info.Version})
	}
	crds, err := listOurs(ctx, a, crdGroupKind, "v1", managedBy)
	if err != nil {
		return nil, err
	}
	known := map[schema.GroupKind]bool{}
	for _, k := range search {
		known[k.gk] = true
	}
	for _, c := range crds {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(c.Object, &crd); err != nil {
			return nil, fmt.Errorf("prune: %s: %w", strategy.RefOf(c), err)
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
		out []Item
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.parallelism())
	for _, k := range search {
		if opts.EmptyKinds[k.gk] {
			continue
		}
		g.Go(func() error {
			objs, err := listOurs(gctx, a, k.gk, k.version, managedBy)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			for _, o := range objs {
				ref := strategy.RefOf(o)
				if _, ok := target[ref]; ok {
					continue
				}
				if _, ok := o.GetAnnotations()[apply.VersionAnnotation]; !ok {
					continue
				}
				it := Item{Ref: ref, Action: apply.ActionDelete, Reason: "not in the target strategy", Live: o}
				if k.gk == crdGroupKind && !opts.PruneCRDs {
					it.Action, it.Reason = apply.ActionSkip, "CRD not in the target strategy, kept: pruning CRDs needs the explicit flag"
				}
				out = append(out, it)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool {
		ii, _ := kinds.Lookup(out[i].Ref.GroupKind())
		ij, _ := kinds.Lookup(out[j].Ref.GroupKind())
		if ii.PruneOrder != ij.PruneOrder {
			return ii.PruneOrder < ij.PruneOrder
		}
		return out[i].Ref.Less(out[j].Ref)
	})
	return out, nil
}

// listOurs lists the objects of a kind that are ours, in every namespace.
// A kind the cluster does not serve has none.
func listOurs(ctx context.Context, a *apply.Applier, gk schema.GroupKind, version string, managedBy string) ([]*unstructured.Unstructured, error) {
	gvr, _, err := a.GroupVersionResource(gk, version)
	var notServed *apply.NotServedError
	if errors.As(err, &notServed) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	l, err := a.Dynamic().Resource(gvr).List(ctx, metav1.ListOptions{LabelSelector: apply.ManagedByLabel + "=" + managedBy})
	if err != nil {
		return nil, fmt.Errorf("prune: list %s: %w", gk, err)
	}
	var out []*unstructured.Unstructured
	for i := range l.Items {
		o := &l.Items[i]
		o.SetGroupVersionKind(gk.WithVersion(version))
		if apply.IsOurs(o, managedBy) {
			out = append(out, o)
		}
	}
	return out, nil
}
