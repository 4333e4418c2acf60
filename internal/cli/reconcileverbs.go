package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/crdsafety"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/history"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/placement"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// reconcileFlags are the flags plan, apply and diff --live share.
type reconcileFlags struct {
	// name is the installation's name (--name); "" means defaultName.
	name string
	// rollback plans and runs the strategy's Helm hooks of the rollback
	// phases (engine.Options.Rollback); set by rollback, not a flag.
	rollback  bool
	adopt     bool
	replace   bool
	observed  string
	pruneCRDs bool
	// identity is given to a strategy that has none (a plain text).
	identity strategy.Identity
	// placementFile and pullSecrets are put on the strategy's pod
	// templates (pkg/placement), as the operator does with an
	// Installation's infra, workloads and imagePullSecrets.
	placementFile string
	pullSecrets   []string
	// leavePodTemplates puts no identity on pod templates (adopting a
	// Helm release restarts no pod).
	leavePodTemplates bool
	// allowCRD accepts unsafe CRD changes, CRD=RULE each (pkg/crdsafety).
	allowCRD []string
	// preflight is --server-preflight (engine.ParsePreflightMode).
	preflight string
	// adoptable, when not nil, is all that adopt takes: a Helm release's
	// proven objects (--adopt-helm-release without --adopt).
	adoptable map[strategy.ObjectRef]bool
	// systemObjects are --allow-system-object: the system objects
	// (inventory.SystemObject) that may be adopted, and once adopted
	// pruned.
	systemObjects []string
}

// consent reads --allow-system-object.
func (f *reconcileFlags) consent() (inventory.SystemConsent, error) {
	c, err := inventory.ParseSystemConsent(f.systemObjects)
	if err != nil {
		return nil, usageError(fmt.Errorf("--allow-system-object: %w", err))
	}
	return c, nil
}

// crdAllow parses --allow-crd-change.
func (f *reconcileFlags) crdAllow() ([]crdsafety.Allow, error) {
	var out []crdsafety.Allow
	for _, s := range f.allowCRD {
		a, err := crdsafety.ParseAllow(s)
		if err != nil {
			return nil, usageError(fmt.Errorf("--allow-crd-change: %w", err))
		}
		out = append(out, a)
	}
	return out, nil
}

const allowCRDHelp = "accept one unsafe CRD change, CRD=RULE (rules: scope, storedVersionRemoved, servedVersionRemoved, fieldRemoved, typeChanged, enumTightened, boundTightened, requiredAdded, defaultChanged, crdPruned); repeat the flag for more"

const pruneCRDsHelp = "let prune delete CustomResourceDefinitions (and so all their custom resources); one that still stores objects other than the installation's own is refused before any write unless --allow-crd-change CRD=crdPruned names it"

func (f *reconcileFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.name, "name", "", "the installation's name: its objects carry it in labels, its inventory (a ConfigMap in -n) lists them, and prune and uninstall touch nothing else (default: the strategy's one Namespace object, else the namespace)")
	cmd.Flags().BoolVar(&f.adopt, "adopt", false, "take over existing objects of the strategy that no installation owns (from kubectl apply, Helm, a person); another installation's objects are never taken")
	cmd.Flags().BoolVar(&f.replace, "replace", false, "apply even when the installation holds objects and this strategy has none of them (it looks like another product under the same --name)")
	cmd.Flags().StringVar(&f.observed, "observed-version", "auto", `the version the cluster runs now, which picks the create or update path; "auto" reads it from the live objects, "" means a fresh install`)
	cmd.Flags().BoolVar(&f.pruneCRDs, "prune-crds", false, pruneCRDsHelp)
	cmd.Flags().StringArrayVar(&f.allowCRD, "allow-crd-change", nil, allowCRDHelp)
	cmd.Flags().StringVar(&f.preflight, "server-preflight", "changes", preflightHelp)
	cmd.Flags().StringVar(&f.identity.Version, "version", "", "the version of a strategy that records none (a plain manifests text)")
	cmd.Flags().StringVar(&f.identity.Registry, "registry", "", "the registry of a strategy that records none")
	cmd.Flags().StringVar(&f.identity.Identifier, "identifier", "", "the identifier of a strategy that records none")
	cmd.Flags().StringVar(&f.placementFile, "placement", "", "a YAML or JSON file placing the strategy's pods, as an Installation's spec does: infra and workloads, each with nodeSelector, tolerations and affinity (per-node agents get workloads, the others infra)")
	cmd.Flags().StringArrayVar(&f.pullSecrets, "pull-secret", nil, "an image pull Secret added to every pod template (repeat the flag for more)")
	cmd.Flags().StringArrayVar(&f.systemObjects, "allow-system-object", nil, "let adoption (--adopt, --adopt-helm-release) take, and prune later delete, this system object: one of the API server's own (label kubernetes.io/bootstrapping), a system: name, a system namespace, or (with --adopt-helm-release) any object in kube-system, kube-public or kube-node-lease; named KIND[.GROUP]/NAME or KIND[.GROUP]/NAMESPACE/NAME (repeat the flag for more). Without it such objects are conflicts")
}

// addAdoption adds the flags rollback shares with apply (the strategy of a
// revision has its identity and placement already).
func (f *reconcileFlags) addAdoption(cmd *cobra.Command) {
	f.observed = "auto"
	cmd.Flags().BoolVar(&f.adopt, "adopt", false, "take over existing objects of the strategy that no installation owns (from kubectl apply, Helm, a person); another installation's objects are never taken")
	cmd.Flags().BoolVar(&f.pruneCRDs, "prune-crds", false, pruneCRDsHelp)
	cmd.Flags().StringArrayVar(&f.allowCRD, "allow-crd-change", nil, allowCRDHelp)
	cmd.Flags().StringVar(&f.preflight, "server-preflight", "changes", preflightHelp)
}

const preflightHelp = `when to dry-run every object the run would write on the server before its first write (a refusal then writes nothing): "changes" when the installed version changes (upgrade, downgrade, rollback), "always", or "never"`

// preflightMode parses --server-preflight.
func (f *reconcileFlags) preflightMode() (engine.PreflightMode, error) {
	m, err := engine.ParsePreflightMode(f.preflight)
	if err != nil {
		return "", usageError(fmt.Errorf("--server-preflight: %w", err))
	}
	return m, nil
}

// prepare gives the flags' identity to a strategy that has none, and puts
// the flags' placement and pull secrets on its pod templates.
func (f *reconcileFlags) prepare(l *codec.Loaded) error {
	if l.Strategy.Identity == (strategy.Identity{}) {
		l.Strategy.Identity = f.identity
	}
	spec := placement.Spec{ImagePullSecrets: f.pullSecrets, Roles: kinds.KubeVirtRoles()}
	if f.placementFile != "" {
		data, err := os.ReadFile(f.placementFile)
		if err != nil {
			return fmt.Errorf("--placement: %w", err)
		}
		var p identity.Placement
		if err := yaml.UnmarshalStrict(data, &p); err != nil {
			return fmt.Errorf("--placement %s: %w", f.placementFile, err)
		}
		spec.Placement = &p
	}
	if err := placement.Apply(l.Strategy, spec); err != nil {
		return fmt.Errorf("placing the strategy's pods: %w", err)
	}
	return nil
}

// strategyArg loads the strategy of a FILE, "-", cm/NAME, or a bare NAME
// of a strategy ConfigMap in the namespace when no such file exists.
func (o *options) strategyArg(ctx context.Context, arg string) (*codec.Loaded, error) {
	if _, isRef := clusterRef(arg); !isRef && arg != "-" {
		if _, err := os.Stat(arg); errors.Is(err, os.ErrNotExist) && !strings.ContainsAny(arg, "/.") {
			arg = "cm/" + arg
		}
	}
	return o.loadStrategy(ctx, arg, pick{})
}

// owner returns the plugin installation of the flags: --name (else
// defaultName) in the namespace.
func (c *cluster) owner(s *strategy.Strategy, f *reconcileFlags) (inventory.Owner, error) {
	o := inventory.Owner{Namespace: c.namespace, Name: f.name, Kind: inventory.KindPlugin}
	if o.Name == "" {
		o.Name = defaultName(s, c.namespace)
	}
	if err := o.Validate(); err != nil {
		return o, fmt.Errorf("--name: %w", err)
	}
	return o, nil
}

// defaultName is the installation name when --name is not given: the name
// of the strategy's Namespace object when it has exactly one (products
// that bring their namespace, like metallb-system), else the namespace.
func defaultName(s *strategy.Strategy, ns string) string {
	var names []string
	for _, o := range s.Objects {
		if o.GroupVersionKind().GroupKind() == (schema.GroupKind{Kind: "Namespace"}) {
			names = append(names, o.GetName())
		}
	}
	if len(names) == 1 {
		return names[0]
	}
	return ns
}

// checkInventory refuses a strategy that shares no object with what the
// installation holds (a second product under the same name would prune
// the first), unless --replace; and an installation an Installation drives.
func (c *cluster) checkInventory(ctx context.Context, owner inventory.Owner, s *strategy.Strategy, f *reconcileFlags) error {
	inv, err := inventory.NewStore(c.kube).Get(ctx, owner)
	if err != nil {
		return err
	}
	if len(inv.Entries) == 0 || f.replace {
		return nil
	}
	for _, o := range s.Objects {
		if inv.Has(strategy.RefOf(o)) {
			return nil
		}
	}
	return fmt.Errorf("installation %s holds %d objects and this strategy has none of them: it looks like another product; give it its own --name (or --replace to replace it)", owner, len(inv.Entries))
}

// prepareCluster fills the namespace of namespaced objects that name none
// (discovery says which kinds are namespaced) and returns the installation.
func (c *cluster) prepareCluster(ctx context.Context, l *codec.Loaded, f *reconcileFlags) (inventory.Owner, error) {
	a, err := c.applier()
	if err != nil {
		return inventory.Owner{}, err
	}
	s, err := a.DefaultNamespaces(l.Strategy, c.namespace)
	if err != nil {
		return inventory.Owner{}, err
	}
	l.Strategy = s
	owner, err := c.owner(s, f)
	if err != nil {
		return owner, err
	}
	return owner, c.checkInventory(ctx, owner, s, f)
}

// observedIdentity reads the identity the cluster runs from the identity
// annotations of the strategy's live workloads (then of any live object)
// that are the installation's. It lists the metadata of each resource and
// namespace the strategy has objects in, instead of reading each object:
// a fresh install of thousands of objects costs a few lists, not a read
// each. The workloads' lists come first, side by side, and the rest only
// when no workload answered (an upgrade asks one or two lists, a fresh
// install all of them, in two rounds instead of one after the other).
func (c *cluster) observedIdentity(ctx context.Context, s *strategy.Strategy, owner inventory.Owner, f *reconcileFlags) (strategy.Identity, error) {
	if f.observed != "auto" {
		return strategy.Identity{Version: f.observed}, nil
	}
	a, err := c.applier()
	if err != nil {
		return strategy.Identity{}, err
	}
	var workloads, rest []*unstructured.Unstructured
	for _, o := range s.Objects {
		if info, _ := kinds.Lookup(o.GroupVersionKind().GroupKind()); info.PodTemplate != nil {
			workloads = append(workloads, o)
		} else {
			rest = append(rest, o)
		}
	}
	for _, objs := range [][]*unstructured.Unstructured{workloads, rest} {
		id, found, err := observedAmong(ctx, a, objs, owner)
		if err != nil || found {
			return id, err
		}
	}
	return strategy.Identity{}, nil
}

// observedAmong is observedIdentity over objs: their resources' metadata
// listed side by side, then the first of objs that is the installation's
// and carries a version.
func observedAmong(ctx context.Context, a *apply.Applier, objs []*unstructured.Unstructured, owner inventory.Owner) (strategy.Identity, bool, error) {
	type group struct {
		gvr       schema.GroupVersionResource
		namespace string
	}
	groupOf := make([]*group, len(objs))
	var groups []group
	listed := map[group]map[string]*unstructured.Unstructured{}
	for i, o := range objs {
		gvr, namespaced, err := a.GroupVersionResource(o.GroupVersionKind().GroupKind(), o.GroupVersionKind().Version)
		if err != nil {
			continue // not served
		}
		g := group{gvr: gvr}
		if namespaced {
			g.namespace = o.GetNamespace()
		}
		groupOf[i] = &g
		if _, ok := listed[g]; !ok {
			listed[g] = nil
			groups = append(groups, g)
		}
	}
	var mu sync.Mutex
	eg, egctx := errgroup.WithContext(ctx)
	eg.SetLimit(8)
	for _, g := range groups {
		eg.Go(func() error {
			names, err := a.ListMetadata(egctx, g.gvr, g.namespace)
			if err != nil {
				return fmt.Errorf("observed version: list %s: %w", g.gvr.Resource, err)
			}
			mu.Lock()
			listed[g] = names
			mu.Unlock()
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return strategy.Identity{}, false, err
	}
	for i, o := range objs {
		if groupOf[i] == nil {
			continue
		}
		live := listed[*groupOf[i]][o.GetName()]
		if live == nil {
			continue
		}
		an := live.GetAnnotations()
		if claim := apply.ClaimOf(live, owner); (claim == inventory.ClaimOurs || claim == inventory.ClaimLegacyShared) && an[metakeys.InstallStrategyVersionAnnotation] != "" {
			return strategy.Identity{Version: an[metakeys.InstallStrategyVersionAnnotation], Registry: an[metakeys.InstallStrategyRegistryAnnotation], Identifier: an[metakeys.InstallStrategyIdentifierAnnotation]}, true, nil
		}
	}
	return strategy.Identity{}, false, nil
}

// observePlan builds and observes the plan of a strategy; nothing is written.
func (o *options) observePlan(ctx context.Context, arg string, f *reconcileFlags) (*plan.Plan, *codec.Loaded, error) {
	l, err := o.strategyArg(ctx, arg)
	if err != nil {
		return nil, nil, err
	}
	return o.observeLoaded(ctx, l, f)
}

// observeLoaded is observePlan of a loaded strategy.
func (o *options) observeLoaded(ctx context.Context, l *codec.Loaded, f *reconcileFlags) (*plan.Plan, *codec.Loaded, error) {
	if err := f.prepare(l); err != nil {
		return nil, nil, err
	}
	c, err := o.cluster()
	if err != nil {
		return nil, nil, err
	}
	owner, err := c.prepareCluster(ctx, l, f)
	if err != nil {
		return nil, nil, err
	}
	observed, err := c.observedIdentity(ctx, l.Strategy, owner, f)
	if err != nil {
		return nil, nil, err
	}
	// engine.Plan observes what Run would write: empty TLS Secrets
	// filled and CA bundles injected.
	rc, err := c.reconciler()
	if err != nil {
		return nil, nil, err
	}
	allow, err := f.crdAllow()
	if err != nil {
		return nil, l, err
	}
	consent, err := f.consent()
	if err != nil {
		return nil, l, err
	}
	p, err := rc.Plan(ctx, l.Strategy, engine.Options{Observed: observed, Owner: owner, Roles: kinds.KubeVirtRoles(), Adopt: adoptPolicy(f.adopt), Adoptable: f.adoptable, SystemConsent: consent, PruneCRDs: f.pruneCRDs, LeavePodTemplates: f.leavePodTemplates, AllowCRDChanges: allow, Rollback: f.rollback})
	plan.MaskSecrets(p) // no printer shows a Secret value
	if err != nil {
		return p, l, err
	}
	return p, l, nil
}

// planChanges counts the items of a plan that would write something.
func planChanges(p *plan.Plan) int {
	n := 0
	for action, count := range p.Counts() {
		switch apply.Action(action) {
		case apply.ActionUnchanged, apply.ActionSkip:
		default:
			n += count
		}
	}
	return n
}

// prepared reports a loaded strategy's warnings, prepares it (see
// reconcileFlags.prepare) and connects to the cluster.
func (o *options) prepared(l *codec.Loaded, f *reconcileFlags) (*cluster, error) {
	printWarnings(o.streams.ErrOut, l.Warnings)
	if err := f.prepare(l); err != nil {
		return nil, err
	}
	return o.cluster()
}

// applyFlags are the flags of apply that rollback shares.
type applyFlags struct {
	wait, noPrune bool
	timeout       time.Duration
	historyLimit  int
}

func (a *applyFlags) add(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&a.wait, "wait", false, "wait until every step has rolled over before the next, and prune only then")
	cmd.Flags().BoolVar(&a.noPrune, "no-prune", false, "leave objects the strategy no longer holds")
	cmd.Flags().DurationVar(&a.timeout, "timeout", 10*time.Minute, "give up after this long (also the deadline of each step's wait)")
	cmd.Flags().IntVar(&a.historyLimit, "history-limit", history.DefaultLimit, "how many revisions of the installation to keep for history and rollback")
}

func adoptPolicy(adopt bool) apply.AdoptPolicy {
	if adopt {
		return apply.AdoptAll
	}
	return apply.AdoptNever
}

// printLiveDiff reports a strategy against the cluster: missing objects,
// drifted fields, and extra objects we manage that the strategy lacks.
func printLiveDiff(w io.Writer, p *plan.Plan) (int, error) {
	differences := 0
	for _, st := range p.Steps {
		for _, it := range st.Items {
			switch it.Action {
			case apply.ActionCreate:
				differences++
				fmt.Fprintf(w, "missing  %s\n", it.Ref)
			case apply.ActionUpdate, apply.ActionRecreate:
				differences++
				fmt.Fprintf(w, "drifted  %s\n", it.Ref)
				for _, c := range it.Changes {
					fmt.Fprintf(w, "           %s: live %s, strategy %s\n", c.Path, jsonValue(c.Live), jsonValue(c.Desired))
				}
			case apply.ActionConflict:
				differences++
				fmt.Fprintf(w, "conflict %s: %s\n", it.Ref, it.Reason)
			}
		}
	}
	for _, it := range p.Prune {
		if it.Action != apply.ActionDelete {
			// What apply would leave too (CRDs without --prune-crds,
			// objects no longer labelled ours): shown, not a difference.
			fmt.Fprintf(w, "kept     %s: %s\n", it.Ref, it.Reason)
			continue
		}
		differences++
		fmt.Fprintf(w, "extra    %s\n", it.Ref)
	}
	if differences == 0 {
		_, err := fmt.Fprintln(w, "the cluster matches the strategy")
		return 0, err
	}
	return differences, nil
}

func jsonValue(v any) string {
	if v == nil {
		return "<absent>"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// sourceName is how a history names where a strategy came from: a file by
// its absolute path, else the argument as given (-, cm/NAME, NAME).
func sourceName(src string) string {
	if _, isRef := clusterRef(src); isRef || src == "-" {
		return src
	}
	if abs, err := filepath.Abs(src); err == nil {
		if _, err := os.Stat(abs); err == nil {
			return abs
		}
	}
	return src
}
