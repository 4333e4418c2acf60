package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/installstrategy/installstrategy/pkg/history"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/render"
	"github.com/installstrategy/installstrategy/pkg/render/helmchart"
	"github.com/installstrategy/installstrategy/pkg/render/kustomize"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// renderFlags are encode's --from-helm and --from-kustomize and the
// chart's inputs.
type renderFlags struct {
	helm, kustomize string
	// installation is --installation: render as an install or upgrade of
	// this plugin installation of -n, with lookup seeing its objects.
	installation string
	opts         render.HelmOptions
}

// helmOnly are the flags that apply to --from-helm only.
var helmOnly = []string{"values", "set", "release-name", "kube-version", "api-versions", "plain-http", "installation"}

func (r *renderFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&r.helm, "from-helm", "", "render this Helm chart (a folder, a .tgz or an oci:// reference) as helm template does, and encode its objects")
	f.StringVar(&r.kustomize, "from-kustomize", "", "build this kustomization folder as kubectl kustomize does, and encode its objects")
	f.StringArrayVar(&r.opts.ValuesFiles, "values", nil, "with --from-helm: a values file (repeatable; a later one wins)")
	f.StringArrayVar(&r.opts.Set, "set", nil, "with --from-helm: set values as helm's --set does, key=value[,key=value] (repeatable, applied after --values)")
	f.StringVar(&r.opts.ReleaseName, "release-name", "", "with --from-helm: the release name the chart sees (default: the chart's name)")
	f.StringVar(&r.opts.KubeVersion, "kube-version", "", "with --from-helm: the Kubernetes version the chart sees (.Capabilities.KubeVersion; default: Helm's)")
	f.StringSliceVar(&r.opts.APIVersions, "api-versions", nil, "with --from-helm: API versions the chart sees as served, besides the built-in ones (repeatable or comma-separated)")
	f.BoolVar(&r.opts.PlainHTTP, "plain-http", false, "with --from-helm oci://...: talk plain HTTP to the registry")
	f.StringVar(&r.installation, "installation", "", "with --from-helm: render for this plugin installation of -n as helm install or helm upgrade would (.Release.IsInstall, .IsUpgrade, .Revision from its history; lookup sees its live objects in -n, read with your kubeconfig)")
}

func (r *renderFlags) given() bool { return r.helm != "" || r.kustomize != "" }

// source names the rendered input in errors.
func (r *renderFlags) source() string {
	if r.helm != "" {
		return "chart " + r.helm
	}
	return "kustomization " + r.kustomize
}

// check refuses combinations that cannot mean anything.
func (r *renderFlags) check(cmd *cobra.Command, args []string, file string) error {
	if r.helm != "" && r.kustomize != "" {
		return usageError(errors.New("--from-helm and --from-kustomize: give one of them"))
	}
	if r.given() && (len(args) > 0 || file != "") {
		return usageError(errors.New("--from-helm and --from-kustomize take the place of the manifests argument (and -f): give one"))
	}
	if r.helm != "" {
		if err := r.opts.Validate(); err != nil {
			return usageError(err)
		}
	} else {
		for _, name := range helmOnly {
			if cmd.Flags().Changed(name) {
				return usageError(fmt.Errorf("--%s applies to --from-helm", name))
			}
		}
	}
	return nil
}

// render renders the chart or builds the kustomization, reports each
// hook on standard error, and returns the text and the annotations of the
// strategy; an unset version becomes the chart's.
func (r *renderFlags) render(ctx context.Context, o *options, id *strategy.Identity) ([]byte, map[string]string, error) {
	if r.kustomize != "" {
		text, err := kustomize.Build(r.kustomize)
		return text, nil, err
	}
	opts := r.opts
	opts.Namespace = o.namespace()
	if r.installation != "" {
		if err := r.releaseOf(ctx, o, &opts); err != nil {
			return nil, nil, err
		}
	}
	res, err := helmchart.Helm(ctx, r.helm, opts)
	if err != nil {
		return nil, nil, err
	}
	for _, h := range res.Hooks {
		fmt.Fprintf(o.streams.ErrOut, "helm: %s\n", h)
	}
	if id.Version == "" {
		id.Version = res.Chart.Version
	}
	return res.Manifests, res.Chart.Annotations(), nil
}

// releaseOf sets what the chart sees of the plugin installation
// --installation of -n, read with the caller's kubeconfig: an upgrade to
// the revision after its newest when it has one (or an inventory), else an
// install of revision 1; and its live objects in -n, which lookup alone
// sees (pkg/render's HelmLookup). Nothing is written.
func (r *renderFlags) releaseOf(ctx context.Context, o *options, opts *render.HelmOptions) error {
	c, err := o.cluster()
	if err != nil {
		return err
	}
	owner := inventory.Owner{Namespace: c.namespace, Name: r.installation, Kind: inventory.KindPlugin}
	if err := owner.Validate(); err != nil {
		return usageError(fmt.Errorf("--installation: %w", err))
	}
	h, err := history.NewStore(c.kube).Get(ctx, owner)
	if err != nil {
		return err
	}
	inv, err := inventory.NewStore(c.kube).Get(ctx, owner)
	if err != nil {
		return err
	}
	switch cur := h.Current(); {
	case cur != nil:
		opts.Upgrade, opts.Revision = true, cur.Revision+1
	case inv.Exists():
		opts.Upgrade, opts.Revision = true, 2
	}
	a, err := c.applier()
	if err != nil {
		return err
	}
	objs, err := a.OwnedObjects(ctx, inv, c.namespace, 0)
	if err != nil {
		return err
	}
	opts.Lookup = &render.HelmLookup{Objects: objs}
	what := "an install"
	if opts.Upgrade {
		what = "an upgrade"
	}
	fmt.Fprintf(o.streams.ErrOut, "helm: rendered as %s of %s (revision %d); lookup sees its %d objects in namespace %s\n", what, owner, opts.ReleaseRevision(), len(objs), c.namespace)
	return nil
}
