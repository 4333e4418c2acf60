package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/history"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

const uninstallLong = `Remove the objects the installation NAME (of apply --name, in namespace -n)
applied: exactly what its inventory lists that still carries its labels, in
the reconciler's delete order — webhooks and APIServices first, so nothing
calls a backend that is gone, then custom resources, workloads, services,
configuration, RBAC, and Namespaces and CRDs last. A Namespace is deleted only
when it holds nothing that is not the installation's; CRDs (and so every custom
resource of them) are deleted unless --keep-crds. An object annotated
helm.sh/resource-policy: keep (Helm's) or installstrategy.io/resource-policy:
keep is kept, as helm uninstall keeps it: it stays in the cluster, leaves the
inventory, and is listed as kept. A system object the installation took over
rather than created (one of the API server's own, labelled
kubernetes.io/bootstrapping; a system: name; kube-system, kube-public or
kube-node-lease themselves) is kept unless --allow-system-object names it. Objects of other
installations, and objects labelled by hand, are never touched. The CA Secret
and the inventory go last; the history and the revisions it kept go first.

An installation an Installation drives is removed by deleting the Installation.`

const uninstallExample = `  kubectl installstrategy uninstall sample -n sample --wait`

func newUninstallCommand(o *options) *cobra.Command {
	var keepCRDs, wait bool
	var systemObjects []string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:     "uninstall NAME",
		Short:   "Remove what a plugin installation applied",
		Long:    uninstallLong,
		Example: uninstallExample,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			c, err := o.cluster()
			if err != nil {
				return err
			}
			owner := inventory.Owner{Namespace: c.namespace, Name: args[0], Kind: inventory.KindPlugin}
			if err := owner.Validate(); err != nil {
				return &ExitError{Code: 2, Err: err}
			}
			inv, err := inventory.NewStore(c.kube).Get(ctx, owner)
			if err != nil {
				return err
			}
			if !inv.Exists() {
				return fmt.Errorf("installation %s: not found (no configmap/%s in namespace %s)", owner, inventory.ConfigMapName(owner), owner.Namespace)
			}
			consent, err := inventory.ParseSystemConsent(systemObjects)
			if err != nil {
				return usageError(fmt.Errorf("--allow-system-object: %w", err))
			}
			out := o.streams.Out
			kept := 0
			opts := engine.UninstallOptions{
				Owner: owner, KeepCRDs: keepCRDs, Wait: wait, SystemConsent: consent,
				OnEvent: uninstallEvents(out, &kept),
			}
			rc, err := c.reconciler()
			if err != nil {
				return err
			}
			// Helm hooks of the delete phases run around the uninstall
			// when the strategy it runs is verified (its current
			// revision, anchored in the namespace): hooks are code the
			// cluster runs, never taken from an unverified ConfigMap.
			installed, why := c.installedStrategy(ctx, o, owner)
			if installed != nil {
				opts.Strategy = installed
			} else {
				fmt.Fprintf(o.streams.ErrOut, "installation %s: no delete hooks run: %s\n", owner, why)
			}
			deleted, err := c.uninstallAll(ctx, rc, opts)
			fmt.Fprintf(out, "installation %s: %d objects deleted, %d kept\n", owner, len(deleted), kept)
			if errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("uninstall %s: not finished within --timeout %s: %w", owner, timeout, err)
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&keepCRDs, "keep-crds", false, "leave the installation's CustomResourceDefinitions (and so all their custom resources)")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until every deleted object is gone")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "give up after this long")
	cmd.Flags().StringArrayVar(&systemObjects, "allow-system-object", nil, "let uninstall delete this system object the installation took over (see apply --allow-system-object), named KIND[.GROUP]/NAME or KIND[.GROUP]/NAMESPACE/NAME (repeat the flag for more)")
	return cmd
}

// uninstallEvents prints what an uninstall deletes and keeps, counting
// the kept objects in kept.
func uninstallEvents(out io.Writer, kept *int) func(engine.Event) {
	return func(e engine.Event) {
		if strings.HasPrefix(e.Step, "hook ") {
			if e.Type == engine.EventKept {
				fmt.Fprintf(out, "  %s: left %s (%s)\n", e.Step, e.Ref, e.Reason)
			} else if e.Ref != (strategy.ObjectRef{}) {
				fmt.Fprintf(out, "  %s: %s %s\n", e.Step, e.Action, e.Ref)
			}
			return
		}
		if e.Action == apply.ActionDelete {
			fmt.Fprintf(out, "  delete %s\n", e.Ref)
		} else {
			*kept++
			fmt.Fprintf(out, "  kept   %s (%s)\n", e.Ref, e.Reason)
		}
	}
}

// uninstallAll deletes an installation's objects in order and returns
// those deleted.
func (c *cluster) uninstallAll(ctx context.Context, rc *engine.Reconciler, opts engine.UninstallOptions) ([]strategy.ObjectRef, error) {
	owner := opts.Owner
	// Webhooks and APIServices go first, so that one whose backend
	// is down cannot refuse the deletions that follow; then the
	// history (its ConfigMaps are not objects the installation
	// applied, and would keep its namespace); then the rest.
	admission := opts
	admission.AdmissionOnly = true
	deleted, err := rc.Uninstall(ctx, admission)
	if err == nil {
		err = c.deleteHistory(ctx, owner)
	}
	if err == nil {
		var rest []strategy.ObjectRef
		rest, err = rc.Uninstall(ctx, opts)
		deleted = append(deleted, rest...)
	}
	return deleted, err
}

// installedStrategy returns the strategy the plugin installation owner
// runs: its current revision, when the namespace's anchor records it and
// its ConfigMap holds exactly what the anchor says (see history); nil and
// the reason otherwise.
func (c *cluster) installedStrategy(ctx context.Context, o *options, owner inventory.Owner) (*strategy.Strategy, string) {
	dopts, err := o.decodeOptions()
	if err != nil {
		return nil, err.Error()
	}
	anchor, err := history.NewStore(c.kube).Anchor(ctx, owner)
	if err != nil {
		return nil, err.Error()
	}
	a := anchor.Current()
	if a == nil {
		return nil, "no anchored revision"
	}
	h, err := history.NewStore(c.kube).Get(ctx, owner)
	if err != nil {
		return nil, err.Error()
	}
	recorded, _ := h.Get(a.Revision)
	l, status, reason := c.checkAnchored(ctx, dopts, owner, recorded, a)
	if status != revisionVerified {
		return nil, fmt.Sprintf("revision %d is %s: %s", a.Revision, status, reason)
	}
	return l.Strategy, ""
}
