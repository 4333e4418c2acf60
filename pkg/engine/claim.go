package engine

import (
	"context"
	"errors"
	"fmt"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"sort"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// ClaimedError reports that the strategy's cluster-scoped objects (CRDs,
// ClusterRoles, webhooks...) are held by another installation that still
// exists: one installation per cluster acts on them, so Run writes nothing
// (no namespaced object, no inventory) until that one is gone.
type ClaimedError struct {
	// Holder is the installation that holds them.
	Holder inventory.Owner
	// Refs are the strategy's objects it holds, sorted.
	Refs []strategy.ObjectRef
}

func (e *ClaimedError) Error() string {
	more := ""
	if n := len(e.Refs) - 1; n > 0 {
		more = fmt.Sprintf(" and %d more cluster-scoped objects", n)
	}
	return fmt.Sprintf("claimed by %s: %s%s of the strategy belong to it; nothing applied until it is uninstalled", e.Holder.Describe(), e.Refs[0], more)
}

// claimClients is what the claim check reads (checkClaims): served kinds,
// the metadata of live objects through a probe of the objects checked
// (apply.Applier.Probe: one list where that is cheaper than one read per
// object), and the inventories of the installations that labelled them.
type claimClients struct {
	Discovery plan.Discovery
	Probe     func(ctx context.Context, objs []*unstructured.Unstructured) metadataReader
	Holders   holders
}

// claimClients returns the run's clients of the claim check.
func (r *run) claimClients() claimClients {
	a := r.a
	return claimClients{
		Discovery: a,
		Probe: func(ctx context.Context, objs []*unstructured.Unstructured) metadataReader {
			return a.Probe(ctx, objs)
		},
		Holders: r.invs,
	}
}

// checkClaims reads the live copies of the cluster-scoped objects among
// objs (discovery says which kinds are; kinds not served yet have no live
// objects) before anything is written. Those labelled by another
// installation than owner whose inventory still exists make a
// *ClaimedError naming it; those labelled by one that no longer exists
// are released: the returned map (see apply.Options.Released) lets Run
// take them over. Objects an older installstrategy labelled (legacy
// managed-by values) cannot be traced to an inventory: they stay
// per-object conflicts. absent holds the cluster-scoped objects that do
// not exist (the CRD preflight of the run that takes this answer does not
// read them again).
func checkClaims(ctx context.Context, c claimClients, owner inventory.Owner, objs []*unstructured.Unstructured) (released map[strategy.ObjectRef]string, absent map[strategy.ObjectRef]bool, err error) {
	cluster, err := clusterScoped(c.Discovery, objs)
	if err != nil {
		return nil, nil, fmt.Errorf("claim check: %w", err)
	}
	if len(cluster) == 0 {
		return nil, nil, nil
	}
	a := c.Probe(ctx, cluster)
	type holder struct{ namespace, name string }
	type held struct {
		ref    strategy.ObjectRef
		labels map[string]string
	}
	byHolder := map[holder][]held{}
	var holders []holder
	for _, o := range cluster {
		// Labels and annotations are all the check reads: a probe's
		// metadata list answers for objects the cache does not hold.
		live, err := a.GetMetadata(ctx, o)
		if err != nil {
			return nil, nil, fmt.Errorf("claim check: %w", err)
		}
		if live == nil {
			if absent == nil {
				absent = map[strategy.ObjectRef]bool{}
			}
			absent[strategy.RefOf(o)] = true
		}
		if live == nil || apply.ClaimOf(live, owner) != inventory.ClaimOther {
			continue
		}
		l := live.GetLabels()
		h := holder{l[metakeys.InstallationNamespaceLabel], l[metakeys.InstallationLabel]}
		if h.name == "" {
			continue // legacy labels
		}
		if _, seen := byHolder[h]; !seen {
			holders = append(holders, h)
		}
		byHolder[h] = append(byHolder[h], held{strategy.RefOf(o), l})
	}
	sort.Slice(holders, func(i, j int) bool {
		return holders[i].namespace+"/"+holders[i].name < holders[j].namespace+"/"+holders[j].name
	})
	for _, h := range holders {
		objs := byHolder[h]
		holder, alive, err := c.Holders.Holder(ctx, objs[0].labels)
		if err != nil {
			return nil, nil, fmt.Errorf("claim check: %w", err)
		}
		refs := make([]strategy.ObjectRef, 0, len(objs))
		for _, o := range objs {
			refs = append(refs, o.ref)
		}
		sort.Slice(refs, func(i, j int) bool { return refs[i].Less(refs[j]) })
		if alive {
			return nil, nil, &ClaimedError{Holder: holder, Refs: refs}
		}
		if released == nil {
			released = map[strategy.ObjectRef]string{}
		}
		for _, ref := range refs {
			released[ref] = inventory.OtherOwner(objs[0].labels)
		}
	}
	return released, absent, nil
}

// claim runs checkClaims (or takes the answer of the check that ran just
// before, Options.Claims) and gives the run's applier the released objects.
func (r *run) claim(ctx context.Context) error {
	var released map[strategy.ObjectRef]string
	if c := r.opts.Claims; c.answers(r.original, r.opts.Owner) {
		released = c.released
		r.absent = c.absent
	} else {
		var err error
		if released, r.absent, err = checkClaims(ctx, r.claimClients(), r.opts.Owner, r.s.Objects); err != nil {
			return err
		}
	}
	if len(released) > 0 {
		opts := r.a.Options()
		opts.Released = released
		r.a = r.a.WithOptions(opts)
	}
	return nil
}

// Claims is the answer of a claim check that found no live installation
// holding the strategy's cluster-scoped objects (CheckClaims): which of
// them it may take over from installations that are gone. Run and Plan
// take it (Options.Claims) instead of reading those objects again, for the
// same strategy and owner only.
type Claims struct {
	s        *strategy.Strategy
	owner    inventory.Owner
	released map[strategy.ObjectRef]string
	// absent holds the cluster-scoped objects the check found absent.
	absent map[strategy.ObjectRef]bool
}

// answers reports whether c is the answer for strategy s and owner.
func (c *Claims) answers(s *strategy.Strategy, owner inventory.Owner) bool {
	return c != nil && c.s == s && c.owner == owner
}

// CheckClaims returns a *ClaimedError when the cluster-scoped objects of s
// belong to another installation that still exists (Run would write
// nothing); else the check's answer, which a Run of the same s and owner
// that follows at once takes as Options.Claims instead of checking again.
// Only opts.Owner is used. It writes nothing and reads only those objects
// (from the cache, when the Reconciler has one; the Namespaces Run would
// create included) and the inventory of an installation that labelled one
// of them.
func (rc *Reconciler) CheckClaims(ctx context.Context, s *strategy.Strategy, opts Options) (*Claims, error) {
	if err := opts.Owner.Validate(); err != nil {
		return nil, fmt.Errorf("claim check: %w", err)
	}
	// Discovery asked afresh, as by Run, which then does not ask again
	// when it takes this answer.
	a := rc.applier(apply.Options{Owner: opts.Owner})
	// The objects as Run has them: namespaces defaulted, implicit
	// Namespaces added.
	ts, err := a.DefaultNamespaces(s, opts.Owner.Namespace)
	if err != nil {
		return nil, fmt.Errorf("claim check: %w", err)
	}
	r := &run{opts: opts, s: withImplicitNamespaces(ts, opts.Owner.Namespace), a: a, invs: inventory.NewStore(rc.kube)}
	released, absent, err := checkClaims(ctx, r.claimClients(), opts.Owner, r.s.Objects)
	if err != nil {
		return nil, err
	}
	return &Claims{s: s, owner: opts.Owner, released: released, absent: absent}, nil
}

// clusterScoped returns the objects of kinds the cluster serves without a
// namespace; kinds it does not serve are left out.
func clusterScoped(d plan.Discovery, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		m, err := d.Mapping(strategy.RefOf(o), o.GroupVersionKind().Version)
		var notServed *apply.NotServedError
		if errors.As(err, &notServed) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m.Scope.Name() == meta.RESTScopeNameRoot {
			out = append(out, o)
		}
	}
	return out, nil
}
