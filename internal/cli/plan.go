package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/crdsafety"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
	"github.com/installstrategy/installstrategy/pkg/upgradepath"
)

// planLong is the help text of plan.
const planLong = `Compare a strategy (a file, standard input, or a strategy ConfigMap NAME in the
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

--walk-upgrade-path (with --key) shows the walk apply --walk-upgrade-path would
take to a strategy whose upgradeFrom does not admit the installed version (each
hop, and each listed version skipped with why), then the plan of its first hop;
no chain is exit status 1 with what was looked at. --from-helm CHART (with the
chart flags, as apply) plans a rendered chart; with --repo URL the walk lists
the chart's versions in the repository's index.yaml (unsigned: plan shows it
with a note, apply needs --allow-unsigned).

--adopt-helm-release NAME plans the takeover of a Helm release (see apply):
the release's deployed manifest is the strategy unless one is given, its
objects are adopted, and what retiring the release would do follows the plan.

Exit status: 0 when nothing would change, 1 when something would, 2 on error.`

const planExample = `  kubectl installstrategy plan sample-v1.1.0.yaml -n sample
  kubectl installstrategy plan cm/kubevirt-install-strategy-abcde -n kubevirt -o json
  kubectl installstrategy plan -f sample-v1.1.0.yaml -n sample -o name`

// planCmd holds the flags of plan.
type planCmd struct {
	o           *options
	f           reconcileFlags
	strategyArg string
	out         *output
	file        *fileFlag
	filter      objectFilter
	helm        helmAdoption
	ct          *clusterTrust
	walk        walkFlag
	chart       chartFlags
}

func newPlanCommand(o *options) *cobra.Command {
	c := &planCmd{o: o}
	cmd := &cobra.Command{
		Use:     "plan FILE|-|cm/NAME|NAME|oci://REF|revision/N | -f FILE | --from-helm CHART | --adopt-helm-release NAME",
		Short:   "Show what a reconcile of a strategy would do now, writing nothing",
		Long:    planLong,
		Example: planExample,
		Args:    cobra.MaximumNArgs(1),
		RunE:    c.run,
	}
	c.add(cmd)
	return cmd
}

// add registers plan's flags on cmd.
func (c *planCmd) add(cmd *cobra.Command) {
	c.filter.add(cmd)
	cmd.Flags().StringVar(&c.strategyArg, "strategy", "", "the strategy: a file, - for standard input, or a strategy ConfigMap name (the older spelling of -f)")
	c.out = addOutput(cmd, "table")
	c.file = addFileFlag(cmd)
	c.o.addRegistryFlag(cmd)
	c.f.add(cmd)
	c.helm.add(cmd)
	c.ct = addOptionalClusterTrust(cmd)
	c.walk.add(cmd)
	c.chart.add(cmd)
}

// source returns the strategy argument: the argument, -f or --strategy
// ("" when only --adopt-helm-release names it).
func (c *planCmd) source(cmd *cobra.Command, args []string) (string, error) {
	if c.strategyArg != "" {
		if len(args) == 1 || c.file.path != "" {
			return "", usageError(errors.New("give the strategy once: as the argument, with -f or with --strategy"))
		}
		args = []string{c.strategyArg}
	}
	if c.helm.name == "" || len(args) > 0 || c.file.path != "" {
		return c.file.source(cmd, args)
	}
	return "", nil
}

func (c *planCmd) run(cmd *cobra.Command, args []string) error {
	o := c.o
	o.clusterTrust = c.ct // cm/NAME and oci:// by tag: --key checks them
	fail := func(err error) error { return &ExitError{Code: 2, Err: err} }
	if err := c.chart.check(cmd, args, c.file.path+c.strategyArg, c.helm.name != ""); err != nil {
		return err
	}
	var src string
	if !c.chart.given() {
		var err error
		if src, err = c.source(cmd, args); err != nil {
			return err
		}
	}
	if err := c.out.validate(); err != nil {
		return err
	}
	pal, err := o.palette(o.streams.Out)
	if err != nil {
		return err
	}
	var p *plan.Plan
	var l *codec.Loaded
	if c.helm.name != "" {
		l, err = c.helm.load(cmd.Context(), o, src, &c.f)
		if err == nil {
			p, l, err = o.observeLoaded(cmd.Context(), l, &c.f)
		}
	} else if c.walk.walk {
		p, l, err = c.observeWalk(cmd.Context(), src)
	} else {
		l, err = o.applyTarget(cmd.Context(), src, &c.chart, &c.f)
		if err == nil {
			p, l, err = o.observeLoaded(cmd.Context(), l, &c.f)
		}
	}
	if noPath := (*upgradepath.NoPathError)(nil); errors.As(err, &noPath) {
		fmt.Fprintf(o.streams.ErrOut, "apply --walk-upgrade-path would write nothing: %s\n", noPath)
		return &ExitError{Code: 1}
	}
	if err != nil {
		return fail(err)
	}
	c.filter.plan(p)
	if err := printPlan(o.streams.Out, c.out, p, pal); err != nil {
		return fail(err)
	}
	if c.helm.name != "" {
		w := o.streams.Out
		if !c.out.Human() {
			w = o.streams.ErrOut
		}
		if err := c.helm.printPlan(cmd.Context(), w, o, l); err != nil {
			return fail(err)
		}
	}
	return planExit(o.streams.ErrOut, p)
}

// observeWalk plans the walk to the strategy src names, prints it (on
// standard output for people, else on standard error) and observes the
// plan of its first hop, which is what apply --walk-upgrade-path would
// write first.
func (c *planCmd) observeWalk(ctx context.Context, src string) (*plan.Plan, *codec.Loaded, error) {
	o := c.o
	l, err := o.applyTarget(ctx, src, &c.chart, &c.f)
	if err != nil {
		return nil, nil, err
	}
	wp, err := o.walkFor(ctx, c.ct, src, l, &c.f)
	if err != nil || wp == nil {
		if err == nil {
			return o.observeLoaded(ctx, l, &c.f)
		}
		return nil, nil, err
	}
	w := o.streams.Out
	if !c.out.Human() {
		w = o.streams.ErrOut
	}
	printWalk(w, wp)
	first := wp.steps[0]
	fmt.Fprintf(w, "plan of hop 1/%d, %s -> %s (%s):\n", len(wp.steps), wp.path.From, first.version, first.source)
	return o.observeLoaded(ctx, first.l, &c.f)
}

// planExit is plan's exit status: 1, with the reason on w, when apply
// would write nothing (blocked, refused, unmet) or would change something.
func planExit(w io.Writer, p *plan.Plan) error {
	if p.Blocked != "" {
		// apply would refuse: it writes nothing while the claim holds.
		fmt.Fprintf(w, "apply would write nothing: %s\n", p.Blocked)
		return &ExitError{Code: 1}
	}
	if refused := p.Refused(); len(refused) > 0 {
		fmt.Fprintf(w, "apply would write nothing: %s\n", (&crdsafety.UnsafeError{Findings: refused}).Error())
		return &ExitError{Code: 1}
	}
	if len(p.Unmet) > 0 {
		fmt.Fprintf(w, "apply would write nothing: %s\n", (&engine.RequirementsError{Unmet: p.Unmet}).Error())
		if hint := walkHint(p.Unmet); hint != "" {
			fmt.Fprintln(w, hint)
		}
		return &ExitError{Code: 1}
	}
	if n := planChanges(p); n > 0 {
		fmt.Fprintf(w, "%d objects would change\n", n)
		return &ExitError{Code: 1}
	}
	return nil
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
