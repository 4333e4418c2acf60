package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	helmcli "helm.sh/helm/v4/pkg/cli"
	"helm.sh/helm/v4/pkg/postrenderer"
	"sigs.k8s.io/yaml"

	"github.com/installstrategy/installstrategy/pkg/history"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/render"
	"github.com/installstrategy/installstrategy/pkg/render/helmchart"
	"github.com/installstrategy/installstrategy/pkg/render/kustomize"
	"github.com/installstrategy/installstrategy/pkg/source"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// renderFlags are encode's --from-helm and --from-kustomize and the
// chart's inputs.
type renderFlags struct {
	helm, kustomize string
	// installation is --installation: render as an install or upgrade of
	// this plugin installation of -n, with lookup seeing its objects.
	installation string
	// postRenderer and postRendererArgs are Helm 4's --post-renderer (a
	// postrenderer/v1 plugin's name) and --post-renderer-args.
	postRenderer     string
	postRendererArgs []string
	opts             render.HelmOptions
}

// helmOnly are the flags that apply to --from-helm only.
var helmOnly = []string{"values", "set", "set-string", "set-file", "set-json", "set-literal", "release-name", "kube-version", "api-versions",
	"plain-http", "installation", "repo", "skip-crds", "skip-schema-validation", "post-renderer", "post-renderer-args", "dependency-update"}

func (r *renderFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&r.helm, "from-helm", "", "render this Helm chart (a folder, a .tgz or an oci:// reference) as helm template does, and encode its objects")
	f.StringVar(&r.kustomize, "from-kustomize", "", "build this kustomization folder as kubectl kustomize does, and encode its objects")
	addChartInputFlags(f, &r.opts)
	f.StringVar(&r.opts.RepoURL, "repo", "", "with --from-helm: the chart repository URL the chart (a name) is in, as helm's --repo (its index.yaml is read; downloads bounded to 64 MiB)")
	f.BoolVar(&r.opts.DependencyUpdate, "dependency-update", false, "with --from-helm: a chart folder that lacks dependencies Chart.yaml names gets them downloaded first (helm dependency update), as helm install --dependency-update")
	f.StringVar(&r.postRenderer, "post-renderer", "", "with --from-helm: the name of a Helm postrenderer/v1 plugin (installed with helm plugin install) run on the rendered objects, as Helm 4's --post-renderer")
	f.StringArrayVar(&r.postRendererArgs, "post-renderer-args", nil, "with --from-helm --post-renderer: an argument to the post-renderer (repeatable)")
	f.StringVar(&r.installation, "installation", "", "with --from-helm: render for this plugin installation of -n as helm install or helm upgrade would (.Release.IsInstall, .IsUpgrade, .Revision from its history; lookup sees its live objects in -n, read with your kubeconfig)")
}

// addChartInputFlags registers the flags that say how a chart is
// rendered (values, Helm's --set family, what the chart sees), as helm
// template names them; encode, apply and plan share them.
func addChartInputFlags(f *pflag.FlagSet, opts *render.HelmOptions) {
	f.StringArrayVar(&opts.ValuesFiles, "values", nil, "with --from-helm: a values file (repeatable; a later one wins)")
	f.StringArrayVar(&opts.Set, "set", nil, "with --from-helm: set values as helm's --set does, key=value[,key=value] (repeatable, applied after --values and --set-json)")
	f.StringArrayVar(&opts.StringValues, "set-string", nil, "with --from-helm: set STRING values as helm's --set-string does, key=value[,key=value] (repeatable, applied after --set)")
	f.StringArrayVar(&opts.FileValues, "set-file", nil, "with --from-helm: set values from files as helm's --set-file does, key=path[,key=path]: the file's text is the value (repeatable, applied after --set-string)")
	f.StringArrayVar(&opts.JSONValues, "set-json", nil, "with --from-helm: set JSON values as helm's --set-json does, key=json[,key=json] or a JSON object (repeatable, applied after --values)")
	f.StringArrayVar(&opts.LiteralValues, "set-literal", nil, "with --from-helm: set a literal STRING value as helm's --set-literal does, key=value, commas and all (repeatable, applied last)")
	f.BoolVar(&opts.SkipCRDs, "skip-crds", false, "with --from-helm: leave out the chart's crds/ folder, as helm install --skip-crds (CRDs among its templates stay)")
	f.BoolVar(&opts.SkipSchemaValidation, "skip-schema-validation", false, "with --from-helm: do not check the values against the chart's values.schema.json")
	f.StringVar(&opts.ReleaseName, "release-name", "", "with --from-helm: the release name the chart sees (default: the chart's name)")
	f.StringVar(&opts.KubeVersion, "kube-version", "", "with --from-helm: the Kubernetes version the chart sees (.Capabilities.KubeVersion; default: Helm's)")
	f.StringSliceVar(&opts.APIVersions, "api-versions", nil, "with --from-helm: API versions the chart sees as served, besides the built-in ones (repeatable or comma-separated)")
	f.BoolVar(&opts.PlainHTTP, "plain-http", false, "with --from-helm oci://...: talk plain HTTP to the registry")
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
	if r.helm != "" && file != "" {
		return usageError(errors.New("with --from-helm, values files are --values (helm's -f): -f is the manifests file here (kubectl's --filename)"))
	}
	if r.given() && (len(args) > 0 || file != "") {
		return usageError(errors.New("--from-helm and --from-kustomize take the place of the manifests argument (and -f): give one"))
	}
	if r.helm != "" {
		if err := r.opts.Validate(); err != nil {
			return usageError(err)
		}
		if len(r.postRendererArgs) > 0 && r.postRenderer == "" {
			return usageError(errors.New("--post-renderer-args needs --post-renderer"))
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

// versions resolves --version and --strategy-version (id.Version) as a
// Helm user guesses them: with --from-helm, --version is the chart's
// version (helm's --version) and the strategy's version is
// --strategy-version, by default the chart's (set by render); without a
// chart, --version is the strategy's version, as it always was, and
// --strategy-version says the same.
func (r *renderFlags) versions(version string, id *strategy.Identity) error {
	if r.helm != "" {
		r.opts.ChartVersion = version
		return nil
	}
	switch {
	case version != "" && id.Version != "" && version != id.Version:
		return usageError(fmt.Errorf("--version %s and --strategy-version %s: without --from-helm both are the strategy's version; give one", version, id.Version))
	case id.Version == "":
		id.Version = version
	}
	if id.Version == "" {
		return usageError(errors.New("--strategy-version (or --version) is required: the strategy's product version"))
	}
	return nil
}

// render renders the chart or builds the kustomization, reports each
// hook on standard error, and returns the text and the annotations of the
// strategy (with the chart's rendered NOTES.txt as a Notes document); an
// unset version becomes the chart's.
func (r *renderFlags) render(ctx context.Context, o *options, id *strategy.Identity) ([]byte, map[string]string, error) {
	if r.kustomize != "" {
		l, err := source.Kustomize{Dir: r.kustomize, Build: kustomize.Build}.Load(ctx)
		if err != nil {
			return nil, nil, err
		}
		return l.Text, nil, nil
	}
	opts := r.opts
	opts.Namespace = o.namespace()
	if r.installation != "" {
		if err := r.releaseOf(ctx, o, &opts); err != nil {
			return nil, nil, err
		}
	}
	if r.postRenderer != "" {
		pr, err := postrenderer.NewPostRendererPlugin(helmcli.New(), r.postRenderer, r.postRendererArgs...)
		if err != nil {
			return nil, nil, fmt.Errorf("--post-renderer %s: %w (Helm 4 takes the name of a postrenderer/v1 plugin installed with helm plugin install, not a program's path)", r.postRenderer, err)
		}
		opts.PostRenderer = pr
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
	text := res.Manifests
	if res.Notes != "" {
		// The chart's NOTES.txt travels in the strategy's text (so under
		// its digest and signature) as a Notes document, which is never
		// applied; apply prints it (strategy.NotesGroupKind).
		notes, err := yaml.Marshal(strategy.NotesObject(res.Notes).Object)
		if err != nil {
			return nil, nil, err
		}
		text = append(append(append([]byte{}, text...), "---\n# Source: NOTES.txt\n"...), notes...)
	}
	return text, res.Chart.Annotations(), nil
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
