package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// applyLong is the help text of apply.
const applyLong = `Make the cluster match a strategy through the same pipeline the operator uses:
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

A strategy may declare the versions it upgrades from (upgradeFrom in a
Requirements document, docs/UPGRADES.md); an upgrade from another version is
refused before any write. --walk-upgrade-path walks there instead, as the
operator's spec.upgradePath Walk does: the versions between the installed one
and the target are listed by the strategy's source (oci://REF:TAG: the tags of
the repository; cm/NAME: the strategies stored in the namespace), each is loaded
through --key (a listed version whose signature fails is skipped and named,
never walked through; --allow-unsigned does not extend to them), and the
shortest chain in which each version admits the one before is applied hop by
hop, each rolled over (as with --wait) before the next and recorded in the
history. No chain: nothing is written, exit status 1, with what was looked at.

revision/N (with --name) is revision N of the installation, as history lists
it: its kept strategy, loaded as rollback loads it, verified against the
namespace's anchor (a revision the anchor does not record, or whose ConfigMap
says otherwise, is refused; --key and --allow-unsigned do not apply). With
--walk-upgrade-path the versions between are the installation's other anchored
revisions, each verified the same way (a tampered one is skipped and named):
after a rollback, the way forward again through the versions it ran.

--from-helm CHART takes the place of the strategy argument: the chart is
rendered as encode --from-helm renders it (--values, --set and the other chart
flags; --version is the chart's version, the strategy's version the chart's).
With --from-helm NAME --repo URL, --walk-upgrade-path lists the chart's versions
in the repository's index.yaml and renders each hop with the same values and
flags. A Helm repository over HTTP carries no signature installstrategy
verifies: the chart and version you name are yours, as a file is, but the
versions of a walk are the repository's, so the walk needs --allow-unsigned
(--key, which nothing there can meet, is refused).

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
    kubectl installstrategy apply next.yaml -n metallb-system --wait`

const applyExample = `  kubectl installstrategy apply sample-v1.0.0.yaml -n sample --wait
  kubectl installstrategy apply oci://ghcr.io/acme/sample:v3.0.0 -n sample --walk-upgrade-path --key cosign.pub --wait
  kubectl installstrategy apply --from-helm sample --repo https://charts.acme.example --version 3.0.0 --values prod.yaml \
      -n sample --walk-upgrade-path --allow-unsigned --wait
  kubectl installstrategy apply revision/3 --name sample -n sample --walk-upgrade-path --wait
  kubectl installstrategy get -n kubevirt --version v1.9.0 > kv.yaml && kubectl installstrategy apply kv.yaml --timeout 10m
  kubectl installstrategy apply -f sample-v1.1.0.yaml -n sample --dry-run=server`

const dryRunHelp = `"server": send every write as a server-side dry run and print what each object would do; "client": print the objects apply would send; nothing is written either way`

// applyCmd holds the flags of apply.
type applyCmd struct {
	o      *options
	f      reconcileFlags
	a      applyFlags
	dryRun string
	out    *output
	file   *fileFlag
	helm   helmAdoption
	ct     *clusterTrust
	walk   walkFlag
	chart  chartFlags
}

func newApplyCommand(o *options) *cobra.Command {
	c := &applyCmd{o: o}
	cmd := &cobra.Command{
		Use:     "apply FILE|-|cm/NAME|NAME|oci://REF|revision/N | -f FILE | --from-helm CHART | --adopt-helm-release NAME",
		Short:   "Reconcile a strategy into the cluster, without an operator",
		Long:    applyLong,
		Example: applyExample,
		Args:    cobra.MaximumNArgs(1),
		RunE:    c.run,
	}
	c.add(cmd)
	return cmd
}

// add registers apply's flags on cmd.
func (c *applyCmd) add(cmd *cobra.Command) {
	c.a.add(cmd)
	c.ct = addClusterTrust(cmd)
	cmd.Flags().StringVar(&c.dryRun, "dry-run", "none", dryRunHelp)
	cmd.Flags().Lookup("dry-run").NoOptDefVal = "server"
	c.out = addOutput(cmd, "text")
	c.file = addFileFlag(cmd)
	c.o.addRegistryFlag(cmd)
	c.f.add(cmd)
	c.helm.add(cmd)
	c.walk.add(cmd)
	c.chart.add(cmd)
}

// validate checks --dry-run and -o.
func (c *applyCmd) validate(cmd *cobra.Command) error {
	switch c.dryRun {
	case "none", "server", "client":
	default:
		return usageError(fmt.Errorf("--dry-run %q: want none, server or client", c.dryRun))
	}
	if err := c.out.validate(); err != nil {
		return err
	}
	if c.dryRun == "none" && cmd.Flags().Changed("output") {
		return usageError(errors.New("-o prints the objects of a dry run: give --dry-run=server or client"))
	}
	if c.dryRun != "none" && c.walk.walk {
		return usageError(errors.New("--walk-upgrade-path applies each version of the walk in turn; plan --walk-upgrade-path shows the walk without writing"))
	}
	return nil
}

func (c *applyCmd) run(cmd *cobra.Command, args []string) error {
	o, f := c.o, &c.f
	o.clusterTrust = c.ct // cm/NAME is read through the trust gate
	if err := c.chart.check(cmd, args, c.file.path, c.helm.name != ""); err != nil {
		return err
	}
	if c.helm.name != "" {
		return c.helm.apply(cmd, o, args, c.file, f, c.a, c.dryRun)
	}
	var src string
	if !c.chart.given() {
		var err error
		if src, err = c.file.source(cmd, args); err != nil {
			return err
		}
	}
	if err := c.validate(cmd); err != nil {
		return err
	}
	// The steps' own deadline ends a stuck wait with the reason
	// (a Degraded condition, an event); the command's context gets
	// a margin past it so that reason is what is reported.
	ctx, cancel := context.WithTimeout(cmd.Context(), c.a.timeout+30*time.Second)
	defer cancel()
	l, err := o.applyTarget(ctx, src, &c.chart, f)
	if err != nil {
		return err
	}
	if c.dryRun == "server" {
		p, l, err := o.observeLoaded(ctx, l, f)
		if err != nil {
			return err
		}
		printWarnings(o.streams.ErrOut, l.Warnings)
		return printDryRun(o.streams.Out, c.out, p, l.Strategy, "server dry run")
	}
	if c.walk.walk && c.dryRun == "none" {
		p, err := o.walkFor(ctx, c.ct, src, l, f)
		if err != nil {
			return err
		}
		if p != nil {
			cl, err := o.prepared(l, f)
			if err != nil {
				return err
			}
			return o.walkApply(cmd.Context(), cl, p, f, c.a)
		}
	}
	cl, err := o.prepared(l, f)
	if err != nil {
		return err
	}
	if c.dryRun == "client" {
		if _, err := cl.prepareCluster(ctx, l, f); err != nil {
			return err
		}
		return printDryRun(o.streams.Out, c.out, nil, l.Strategy, "client dry run")
	}
	return withWalkHint(o.runApply(ctx, cl, l, f, c.a, o.targetSource(src, l.Strategy.Identity.Version)))
}

// applyTarget loads the strategy of apply and plan: the chart of
// --from-helm rendered (its repository then lists a walk's versions), a
// revision of the installation (revision/N: its anchored revisions list
// them), or the argument.
func (o *options) applyTarget(ctx context.Context, src string, chart *chartFlags, f *reconcileFlags) (*codec.Loaded, error) {
	if !chart.given() {
		if n, ok, err := revisionRef(src); ok || err != nil {
			if err != nil {
				return nil, err
			}
			return o.revisionTarget(ctx, n, f)
		}
		return o.strategyArg(ctx, src)
	}
	l, err := chart.load(ctx, o, f.identity.Version, f)
	if err != nil {
		return nil, err
	}
	o.chart = &chartWalk{c: chart, f: f}
	return l, nil
}

// runApply reconciles a loaded (and prepared) strategy into the cluster as
// the installation of f, prints progress and a summary, and records the
// revision in the installation's history (source says where the strategy
// came from). A strategy nobody verified is applied only at the user's
// word (--allow-unsigned).
func (o *options) runApply(ctx context.Context, c *cluster, l *codec.Loaded, f *reconcileFlags, a applyFlags, source string) error {
	if err := o.mayAct(l); err != nil {
		return err
	}
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
	res, runErr := rc.Run(ctx, l.Strategy, engine.Options{
		AllowCRDChanges: allow, ServerPreflight: preflight,
		Observed: observed, Owner: owner, Roles: kinds.KubeVirtRoles(), Adopt: adoptPolicy(f.adopt), Adoptable: f.adoptable, SystemConsent: consent, PruneCRDs: f.pruneCRDs, NoPrune: a.noPrune, NoWait: !a.wait,
		LeavePodTemplates: f.leavePodTemplates,
		StageDeadline:     a.timeout,
		Rollback:          f.rollback,
		OnEvent:           applyEvents(out, view),
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

// applyEvents prints the events of an apply's run: progress through view,
// each object's action, and each step's start and end.
func applyEvents(out io.Writer, view *rolloutView) func(engine.Event) {
	return func(e engine.Event) {
		if e.Type == engine.EventProgress {
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
	}
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

func printApplySummary(w io.Writer, res *engine.Result) {
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
func keptItems(res *engine.Result) []plan.Item {
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
