package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/installstrategy/installstrategy/pkg/render"
	"github.com/installstrategy/installstrategy/pkg/render/helmchart"
	"github.com/installstrategy/installstrategy/pkg/render/kustomize"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// renderFlags are encode's --from-helm and --from-kustomize and the
// chart's inputs.
type renderFlags struct {
	helm, kustomize string
	opts            render.HelmOptions
}

// helmOnly are the flags that apply to --from-helm only.
var helmOnly = []string{"values", "set", "release-name", "kube-version", "api-versions", "plain-http"}

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
