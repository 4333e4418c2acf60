package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
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
	"github.com/installstrategy/installstrategy/pkg/history"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/placement"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/reconcile"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// reconcileFlags are the flags plan, apply and diff --live share.
type reconcileFlags struct {
	// name is the installation's name (--name); "" means defaultName.
	name string
	// rollback plans and runs the strategy's Helm hooks of the rollback
	// phases (reconcile.Options.Rollback); set by rollback, not a flag.
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
	// preflight is --server-preflight (reconcile.ParsePreflightMode).
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

const allowCRDHelp = "accept one unsafe CRD change, CRD=RULE (rules: scope, storedVersionRemoved, servedVersionRemoved, fieldRemoved, typeChanged, enumTightened, boundTightened, requiredAdded, defaultChanged); repeat the flag for more"

func (f *reconcileFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.name, "name", "", "the installation's name: its objects carry it in labels, its inventory (a ConfigMap in -n) lists them, and prune and uninstall touch nothing else (default: the strategy's one Namespace object, else the namespace)")
	cmd.Flags().BoolVar(&f.adopt, "adopt", false, "take over existing objects of the strategy that no installation owns (from kubectl apply, Helm, a person); another installation's objects are never taken")
	cmd.Flags().BoolVar(&f.replace, "replace", false, "apply even when the installation holds objects and this strategy has none of them (it looks like another product under the same --name)")
	cmd.Flags().StringVar(&f.observed, "observed-version", "auto", `the version the cluster runs now, which picks the create or update path; "auto" reads it from the live objects, "" means a fresh install`)
	cmd.Flags().BoolVar(&f.pruneCRDs, "prune-crds", false, "let prune delete CustomResourceDefinitions (and so all their custom resources)")
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
	cmd.Flags().BoolVar(&f.pruneCRDs, "prune-crds", false, "let prune delete CustomResourceDefinitions (and so all their custom resources)")
	cmd.Flags().StringArrayVar(&f.allowCRD, "allow-crd-change", nil, allowCRDHelp)
	cmd.Flags().StringVar(&f.preflight, "server-preflight", "changes", preflightHelp)
}

const preflightHelp = `when to dry-run every object the run would write on the server before its first write (a refusal then writes nothing): "changes" when the installed version changes (upgrade, downgrade, rollback), "always", or "never"`

// preflightMode parses --server-preflight.
func (f *reconcileFlags) preflightMode() (reconcile.PreflightMode, error) {
	m, err := reconcile.ParsePreflightMode(f.preflight)
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
	spec := placement.Spec{ImagePullSecrets: f.pullSecrets}
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
	// reconcile.Plan observes what Run would write: empty TLS Secrets
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
	p, err := rc.Plan(ctx, l.Strategy, reconcile.Options{Observed: observed, Owner: owner, Adopt: adoptPolicy(f.adopt), Adoptable: f.adoptable, SystemConsent: consent, PruneCRDs: f.pruneCRDs, LeavePodTemplates: f.leavePodTemplates, AllowCRDChanges: allow, Rollback: f.rollback})
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

func newPlanCommand(o *options) *cobra.Command {
	var f reconcileFlags
	var strategyArg string
	var out *output
	var file *fileFlag
	var filter objectFilter
	var helm helmAdoption
	var ct *clusterTrust
	cmd := &cobra.Command{
		Use:   "plan FILE|-|cm/NAME|NAME|oci://REF | -f FILE | --adopt-helm-release NAME",
		Short: "Show what a reconcile of a strategy would do now, writing nothing",
		Long: `Compare a strategy (a file, standard input, or a strategy ConfigMap NAME in the
namespace) with the cluster and print what a reconcile would do, step by step:
create, update (with the fields that change), recreate (immutable fields),
unchanged, skip (kind not served, with the reason), conflict (an object that is
not ours), and prune (objects we manage that the strategy no longer holds).
Nothing is written: updates are checked with server-side dry runs. The strategy
is the argument, or -f (--strategy is the older spelling).

The table is led by what matters, as in diff: workloads that will restart and
why, image changes, CRD schema changes and RBAC widening, then the updates
with identical changes grouped. --kind and --object narrow the plan to some
objects (it is still observed whole, so prune is right).

-o json, yaml, jsonpath= and go-template= print the plan as an object of the
print-only kind Plan (` + reportVersion + `); -o name prints the objects
the reconcile would write (create, update, recreate, prune), one
kind.group/name a line.

When another installation still holds the product's cluster-scoped objects
(see apply), the plan starts with a "blocked:" line naming it.

--adopt-helm-release NAME plans the takeover of a Helm release (see apply):
the release's deployed manifest is the strategy unless one is given, its
objects are adopted, and what retiring the release would do follows the plan.

Exit status: 0 when nothing would change, 1 when something would, 2 on error.`,
		Example: `  kubectl installstrategy plan sample-v1.1.0.yaml -n sample
  kubectl installstrategy plan cm/kubevirt-install-strategy-abcde -n kubevirt -o json
  kubectl installstrategy plan -f sample-v1.1.0.yaml -n sample -o name`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.clusterTrust = ct // cm/NAME and oci:// by tag: --key checks them
			fail := func(err error) error { return &ExitError{Code: 2, Err: err} }
			if strategyArg != "" {
				if len(args) == 1 || file.path != "" {
					return usageError(errors.New("give the strategy once: as the argument, with -f or with --strategy"))
				}
				args = []string{strategyArg}
			}
			var src string
			if helm.name == "" || len(args) > 0 || file.path != "" {
				var err error
				if src, err = file.source(cmd, args); err != nil {
					return err
				}
			}
			if err := out.validate(); err != nil {
				return err
			}
			pal, err := o.palette(o.streams.Out)
			if err != nil {
				return err
			}
			var p *plan.Plan
			var l *codec.Loaded
			if helm.name != "" {
				l, err = helm.load(cmd.Context(), o, src, &f)
				if err == nil {
					p, l, err = o.observeLoaded(cmd.Context(), l, &f)
				}
			} else {
				p, l, err = o.observePlan(cmd.Context(), src, &f)
			}
			if err != nil {
				return fail(err)
			}
			filter.plan(p)
			if err := printPlan(o.streams.Out, out, p, pal); err != nil {
				return fail(err)
			}
			if helm.name != "" {
				w := o.streams.Out
				if !out.Human() {
					w = o.streams.ErrOut
				}
				if err := helm.printPlan(cmd.Context(), w, o, l); err != nil {
					return fail(err)
				}
			}
			if p.Blocked != "" {
				// apply would refuse: it writes nothing while the claim holds.
				fmt.Fprintf(o.streams.ErrOut, "apply would write nothing: %s\n", p.Blocked)
				return &ExitError{Code: 1}
			}
			if refused := p.Refused(); len(refused) > 0 {
				fmt.Fprintf(o.streams.ErrOut, "apply would write nothing: %s\n", (&crdsafety.UnsafeError{Findings: refused}).Error())
				return &ExitError{Code: 1}
			}
			if len(p.Unmet) > 0 {
				fmt.Fprintf(o.streams.ErrOut, "apply would write nothing: %s\n", (&reconcile.RequirementsError{Unmet: p.Unmet}).Error())
				return &ExitError{Code: 1}
			}
			if n := planChanges(p); n > 0 {
				fmt.Fprintf(o.streams.ErrOut, "%d objects would change\n", n)
				return &ExitError{Code: 1}
			}
			return nil
		},
	}
	filter.add(cmd)
	cmd.Flags().StringVar(&strategyArg, "strategy", "", "the strategy: a file, - for standard input, or a strategy ConfigMap name (the older spelling of -f)")
	out = addOutput(cmd, "table")
	file = addFileFlag(cmd)
	o.addRegistryFlag(cmd)
	f.add(cmd)
	helm.add(cmd)
	ct = addOptionalClusterTrust(cmd)
	return cmd
}

func printPlan(w io.Writer, out *output, p *plan.Plan, pal palette) error {
	if out.Human() {
		return printPlanTable(w, p, pal)
	}
	if out.Name() {
		return out.print(w, refList(planWrites(p)))
	}
	obj, err := toObject(p, reportGVK("Plan"), "", "")
	if err != nil {
		return err
	}
	return out.print(w, obj)
}

// printPlanTable prints a plan for a person: what matters leads, the
// table of every object follows.
func printPlanTable(w io.Writer, p *plan.Plan, pal palette) error {
	if s := summarisePlan(p); !s.empty() {
		var b strings.Builder
		printSummary(&b, s, pal)
		fmt.Fprintf(w, "%s\n", strings.TrimLeft(b.String(), "\n"))
	}
	return p.Print(w)
}

// planWrites lists the objects a plan would write, in its order.
func planWrites(p *plan.Plan) []strategy.ObjectRef {
	var refs []strategy.ObjectRef
	for _, st := range p.Steps {
		for _, it := range st.Items {
			if writes(it.Action) {
				refs = append(refs, it.Ref)
			}
		}
	}
	for _, it := range p.Prune {
		if it.Action == apply.ActionDelete {
			refs = append(refs, it.Ref)
		}
	}
	return refs
}

// writes says whether an action writes to the cluster.
func writes(a apply.Action) bool {
	switch a {
	case apply.ActionCreate, apply.ActionUpdate, apply.ActionRecreate, apply.ActionDelete:
		return true
	}
	return false
}

func newApplyCommand(o *options) *cobra.Command {
	var f reconcileFlags
	var a applyFlags
	var dryRun string
	var out *output
	var file *fileFlag
	var helm helmAdoption
	var ct *clusterTrust
	cmd := &cobra.Command{
		Use:   "apply FILE|-|cm/NAME|NAME|oci://REF | -f FILE | --adopt-helm-release NAME",
		Short: "Reconcile a strategy into the cluster, without an operator",
		Long: `Make the cluster match a strategy through the same pipeline the operator uses:
CRDs first (waited until Established), RBAC, ConfigMaps and Secrets (empty TLS
Secrets get certificates, webhooks and APIServices their CA bundle), Services,
workloads in KubeVirt's order (create path: api, controllers, then DaemonSets;
update path: DaemonSets with a canary, controllers, api last), webhooks, custom
resources, then prune of what the previously applied strategy had and this one
lacks (CRDs only with --prune-crds). Kinds the cluster does not serve (OpenShift's
on a vanilla cluster) are skipped and reported.

Progress is printed as it happens, then a summary. While a step waits, each
object it waits for has a line (waiting, with what it waits for; ready; failed,
with why), redrawn in place on a terminal and printed when it changes
otherwise. Without --wait, rollouts are not waited for, as with kubectl apply:
CRDs are waited for only where a later step writes their kinds (custom resources
of the same strategy) and, at the end, when the apply updated them (their stored
versions may need migrating); a CRD the apply created is not, so one the API
server never establishes (its names taken by another CRD) fails apply --wait and
the next apply, not this one. Exit status 1 if anything failed or did not roll
over within --timeout.

--adopt takes over objects no installation owns (written by kubectl, Helm,
another operator such as KubeVirt's virt-operator): they get this
installation's labels and inventory entry, and their installer's fields
become ours. A takeover of the same strategy restarts nothing: a workload whose
live pod template already holds the strategy's (plus what its installer or the
server added: its identity annotations, node placement, appended arguments,
defaults) keeps that template until the strategy or the identity changes, and
a TLS Secret keeps the certificate its installer issued while that is good and
its CA is known (the CA joins the webhooks' bundle). A workload whose template
lacks a field of the strategy gets the strategy's template, and the apply says
which field.

A strategy read from the cluster (cm/NAME, or a bare NAME) may have been
written by anyone who may edit ConfigMaps of its namespace, digest included,
so it is read through the trust gate: it must be signed (see sign, publish
--key) by a key given with --key, judged from its metadata before any chunk
is fetched or anything decoded, and its decoded text must hash to the
signed digest before it is parsed. An artifact pulled by tag (oci://REF:TAG)
is whatever anyone who may push to the repository or move the tag made it: it
must carry a cosign signature by a key of --key whose statement names the
product its repository names (its last path element) and the identity it
claims. --allow-unsigned takes either as it is. A file, standard input and an
artifact pulled by digest (oci://REF@sha256:...) are the user's own choice and
are not gated (check them with verify --key first). plan and diff take --key
too; without it they read the strategy unverified and say so.

One installation at a time acts on a product's cluster-scoped objects (CRDs,
ClusterRoles, webhooks): while another installation (an Installation or a
plugin installation) that still exists holds them, apply writes nothing and
fails naming it; once it is gone (uninstalled, or --keep-crds), what it left
is taken over.

--dry-run=server sends every object the reconcile would create or update as a
server-side dry run (admission and validation run, nothing is stored) and
prints what each would do, prune included; --dry-run=client sends nothing and
prints the objects as apply would send them (placed, namespaced). Neither
writes anything, the inventory included. With a dry run, -o json, yaml, name,
jsonpath= or go-template= prints the objects instead.

--adopt-helm-release NAME moves a product that helm install put in the
cluster to this installation without downtime: the release's deployed
manifest (from its Secret sh.helm.release.v1.NAME.vN in -n) is the strategy,
unless one is given; every object of the release is adopted (field ownership
moves from Helm to us, the installation's labels are added) with pod templates
left as they are, so no pod restarts and nothing is recreated; rollouts are not
waited for. Then the release is retired: its Secrets are copied into
secret/installstrategy-helm-release-NAME and deleted, and Helm's
meta.helm.sh annotations are removed, so Helm no longer lists, upgrades or
uninstalls those objects. The release Secret is anyone's who may write
Secrets in -n, so, as Helm itself requires before it touches an existing
object, every object its manifest names must exist and carry the label
app.kubernetes.io/managed-by=Helm and the annotations meta.helm.sh/release-name
and meta.helm.sh/release-namespace naming this release; a system object (the
API server's own, labelled kubernetes.io/bootstrapping; a system: name; any
object in kube-system, kube-public or kube-node-lease) must also be named by
--allow-system-object. Otherwise nothing is taken over, and the error lists
every object that failed and why. With a strategy given, only the release's
objects are adopted (add --adopt for the strategy's other objects that no
installation owns). The history records the release as the
revision's source. If the apply fails, the release is left as it was. The
first apply of a strategy afterwards puts the identity annotations on the
pod templates and so rolls the pods once: make it the next upgrade.
For example (plan --adopt-helm-release shows the takeover first):

    kubectl installstrategy apply --adopt-helm-release metallb -n metallb-system
    kubectl installstrategy encode --from-helm ./metallb-0.15.3 --release-name metallb \
        -n metallb-system > next.yaml
    kubectl installstrategy apply next.yaml -n metallb-system --wait`,
		Example: `  kubectl installstrategy apply sample-v1.0.0.yaml -n sample --wait
  kubectl installstrategy get -n kubevirt --version v1.9.0 > kv.yaml && kubectl installstrategy apply kv.yaml --timeout 10m
  kubectl installstrategy apply -f sample-v1.1.0.yaml -n sample --dry-run=server`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.clusterTrust = ct // cm/NAME is read through the trust gate
			if helm.name != "" {
				return helm.apply(cmd, o, args, file, &f, a, dryRun)
			}
			src, err := file.source(cmd, args)
			if err != nil {
				return err
			}
			switch dryRun {
			case "none", "server", "client":
			default:
				return usageError(fmt.Errorf("--dry-run %q: want none, server or client", dryRun))
			}
			if err := out.validate(); err != nil {
				return err
			}
			if dryRun == "none" && cmd.Flags().Changed("output") {
				return usageError(errors.New("-o prints the objects of a dry run: give --dry-run=server or client"))
			}
			// The steps' own deadline ends a stuck wait with the reason
			// (a Degraded condition, an event); the command's context gets
			// a margin past it so that reason is what is reported.
			ctx, cancel := context.WithTimeout(cmd.Context(), a.timeout+30*time.Second)
			defer cancel()
			if dryRun == "server" {
				p, l, err := o.observePlan(ctx, src, &f)
				if err != nil {
					return err
				}
				printWarnings(o.streams.ErrOut, l.Warnings)
				return printDryRun(o.streams.Out, out, p, l.Strategy, "server dry run")
			}
			l, err := o.strategyArg(ctx, src)
			if err != nil {
				return err
			}
			c, err := o.prepared(l, &f)
			if err != nil {
				return err
			}
			if dryRun == "client" {
				if _, err := c.prepareCluster(ctx, l, &f); err != nil {
					return err
				}
				return printDryRun(o.streams.Out, out, nil, l.Strategy, "client dry run")
			}
			return o.runApply(ctx, c, l, &f, a, sourceName(src))
		},
	}
	a.add(cmd)
	ct = addClusterTrust(cmd)
	cmd.Flags().StringVar(&dryRun, "dry-run", "none", `"server": send every write as a server-side dry run and print what each object would do; "client": print the objects apply would send; nothing is written either way`)
	cmd.Flags().Lookup("dry-run").NoOptDefVal = "server"
	out = addOutput(cmd, "text")
	file = addFileFlag(cmd)
	o.addRegistryFlag(cmd)
	f.add(cmd)
	helm.add(cmd)
	return cmd
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

// runApply reconciles a loaded (and prepared) strategy into the cluster as
// the installation of f, prints progress and a summary, and records the
// revision in the installation's history (source says where the strategy
// came from).
func (o *options) runApply(ctx context.Context, c *cluster, l *codec.Loaded, f *reconcileFlags, a applyFlags, source string) error {
	owner, err := c.prepareCluster(ctx, l, f)
	if err != nil {
		return err
	}
	observed, err := c.observedIdentity(ctx, l.Strategy, owner, f)
	if err != nil {
		return err
	}
	// The text the strategy was parsed from is not read again (the history
	// revision is the strategy serialised as rolled out): let the
	// collector have it before the run, the plugin's largest buffer.
	l.Text = nil
	out := o.streams.Out
	pal, err := o.palette(out)
	if err != nil {
		return err
	}
	view := newRolloutView(out, isTerminal(out), pal)
	fmt.Fprintf(out, "installation %s (inventory configmap/%s)\n", owner, inventory.ConfigMapName(owner))
	rc, err := c.reconciler()
	if err != nil {
		return err
	}
	allow, err := f.crdAllow()
	if err != nil {
		return err
	}
	consent, err := f.consent()
	if err != nil {
		return err
	}
	preflight, err := f.preflightMode()
	if err != nil {
		return err
	}
	res, runErr := rc.Run(ctx, l.Strategy, reconcile.Options{
		AllowCRDChanges: allow, ServerPreflight: preflight,
		Observed: observed, Owner: owner, Adopt: adoptPolicy(f.adopt), Adoptable: f.adoptable, SystemConsent: consent, PruneCRDs: f.pruneCRDs, NoPrune: a.noPrune, NoWait: !a.wait,
		LeavePodTemplates: f.leavePodTemplates,
		StageDeadline:     a.timeout,
		Rollback:          f.rollback,
		OnEvent: func(e reconcile.Event) {
			if e.Type == reconcile.EventProgress {
				view.progress(e.Progress)
				return
			}
			defer view.printed()
			switch {
			case e.Ref != (strategy.ObjectRef{}):
				reason := ""
				if e.Reason != "" {
					reason = " (" + e.Reason + ")"
				}
				if strings.HasPrefix(e.Step, "hook ") {
					// A Helm hook: its phase leads (see docs/PRODUCTS.md).
					reason = " (" + e.Step + ")" + reason
				}
				fmt.Fprintf(out, "  %-9s %s%s\n", e.Action, e.Ref, reason)
			default:
				line := fmt.Sprintf("%s %s %s", time.Now().Format("15:04:05"), e.Type, e.Step)
				if e.Reason != "" {
					line += ": " + e.Reason
				}
				fmt.Fprintln(out, line)
			}
		},
	})
	if res != nil {
		printApplySummary(out, res)
	}
	if runErr != nil {
		return runErr
	}
	rev, err := c.recordRevision(ctx, o.streams.ErrOut, owner, l.Strategy, source, a.historyLimit)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "revision %d of installation %s (kubectl installstrategy history %s -n %s)\n", rev.Revision, owner, owner.Name, owner.Namespace)
	if a.wait && !res.RolledOver {
		return &ExitError{Code: 1, Err: errors.New("applied, but not rolled over")}
	}
	if notes := strings.TrimSpace(l.Strategy.Notes()); notes != "" && !f.rollback {
		// A chart's NOTES.txt, from the strategy's own text, as helm
		// install prints it.
		fmt.Fprintf(out, "NOTES:\n%s\n", notes)
	}
	return nil
}

// printDryRun prints a dry run of apply: with a plan (server), one line
// per object with what it would do, as kubectl apply --dry-run prints;
// without (client), the objects it would send. -o prints the objects.
func printDryRun(w io.Writer, out *output, p *plan.Plan, s *strategy.Strategy, mode string) error {
	if !out.Human() {
		return out.print(w, toList(s.Objects))
	}
	if p == nil {
		for _, obj := range s.Objects {
			fmt.Fprintf(w, "%s (%s)\n", refName(strategy.RefOf(obj)), mode)
		}
		return nil
	}
	for _, st := range p.Steps {
		for _, it := range st.Items {
			line := fmt.Sprintf("%s %s (%s)", refName(it.Ref), pastTense(it.Action), mode)
			if it.Reason != "" && (it.Action == apply.ActionSkip || it.Action == apply.ActionConflict || it.Action == apply.ActionRecreate) {
				line += ": " + it.Reason
			}
			fmt.Fprintln(w, line)
		}
	}
	for _, it := range p.Prune {
		line := fmt.Sprintf("%s %s (%s)", refName(it.Ref), "pruned", mode)
		if it.Action != apply.ActionDelete {
			line = fmt.Sprintf("%s kept (%s): %s", refName(it.Ref), mode, it.Reason)
		}
		fmt.Fprintln(w, line)
	}
	return nil
}

// refName is an object as kubectl names it: kind.group/name, and the
// namespace after it, since a strategy spans namespaces.
func refName(r strategy.ObjectRef) string {
	kind := strings.ToLower(r.Kind)
	if r.Group != "" {
		kind += "." + r.Group
	}
	s := kind + "/" + r.Name
	if r.Namespace != "" {
		s += " -n " + r.Namespace
	}
	return s
}

// pastTense is what kubectl apply prints of an action.
func pastTense(a apply.Action) string {
	switch a {
	case apply.ActionCreate:
		return "created"
	case apply.ActionUpdate:
		return "configured"
	case apply.ActionRecreate:
		return "recreated"
	case apply.ActionUnchanged:
		return "unchanged"
	case apply.ActionSkip:
		return "skipped"
	case apply.ActionConflict:
		return "conflict"
	}
	return string(a)
}

func adoptPolicy(adopt bool) apply.AdoptPolicy {
	if adopt {
		return apply.AdoptAll
	}
	return apply.AdoptNever
}

func printApplySummary(w io.Writer, res *reconcile.Result) {
	fmt.Fprintf(w, "\nsummary: %d created, %d updated, %d recreated, %d unchanged, %d skipped, %d conflicts, %d pruned",
		res.Count(apply.ActionCreate), res.Count(apply.ActionUpdate), res.Count(apply.ActionRecreate), res.Count(apply.ActionUnchanged),
		res.Count(apply.ActionSkip), res.Count(apply.ActionConflict), len(res.Pruned))
	if len(res.Kept) > 0 {
		fmt.Fprintf(w, ", %d kept", len(res.Kept))
	}
	if len(res.Adopted) > 0 {
		fmt.Fprintf(w, ", %d adopted", len(res.Adopted))
	}
	fmt.Fprintf(w, "; rolled over: %v\n", res.RolledOver)
	for _, ref := range res.Adopted {
		fmt.Fprintf(w, "  adopted %s\n", ref)
	}
	for _, r := range res.Applied {
		if r.Action == apply.ActionSkip || r.Action == apply.ActionConflict {
			fmt.Fprintf(w, "  %s %s: %s\n", r.Action, r.Ref, r.Reason)
		}
	}
	for _, ref := range res.Pruned {
		fmt.Fprintf(w, "  pruned %s\n", ref)
	}
	for _, it := range keptItems(res) {
		fmt.Fprintf(w, "  kept %s: %s\n", it.Ref, it.Reason)
	}
}

// keptItems returns the prune items res kept, with their reasons.
func keptItems(res *reconcile.Result) []plan.Item {
	if res.Plan == nil {
		return nil
	}
	var out []plan.Item
	for _, it := range res.Plan.Prune {
		if it.Action != apply.ActionDelete && slices.Contains(res.Kept, it.Ref) {
			out = append(out, it)
		}
	}
	return out
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
