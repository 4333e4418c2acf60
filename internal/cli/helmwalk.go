package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/source"
	"github.com/installstrategy/installstrategy/pkg/strategy"
	"github.com/installstrategy/installstrategy/pkg/upgradepath"
)

// This file is --from-helm of apply and plan: the strategy is a Helm
// chart rendered as encode --from-helm renders it (same flags, same
// text), and with --repo and --walk-upgrade-path the versions between
// the installed one and the target are the chart's versions in the
// repository's index.yaml (source.HelmIndex), each rendered as the target
// is.
//
// Trust: a Helm repository over HTTP carries no signature installstrategy
// verifies (Helm's .prov files are PGP, and not checked here). The chart
// and the version the user names are the user's own choice, as a file is;
// the versions a walk renders are named by the repository's index, so
// apply takes them only with --allow-unsigned (the user says the
// repository is theirs to trust), and --key, which nothing there can
// meet, is refused rather than ignored. plan writes nothing and shows the
// walk with a note, as it reads other unverified strategies.

// chartFlags are apply's and plan's --from-helm and the chart's inputs
// (encode's, less those that need a separate encode: --installation,
// --post-renderer, --dependency-update, --from-kustomize).
type chartFlags struct{ r renderFlags }

func (c *chartFlags) add(cmd *cobra.Command) {
	r := &c.r
	f := cmd.Flags()
	f.StringVar(&r.helm, "from-helm", "", "render this Helm chart (a folder, a .tgz, an oci:// reference, or a name with --repo) as encode --from-helm does and use it as the strategy; --version is then the chart's version, and the strategy's version the chart's")
	addChartInputFlags(f, &r.opts)
	f.StringVar(&r.opts.RepoURL, "repo", "", "with --from-helm: the chart repository URL the chart (a name) is in, as helm's --repo; --walk-upgrade-path lists the chart's versions in its index.yaml")
}

func (c *chartFlags) given() bool { return c.r.helm != "" }

// check refuses what cannot go with --from-helm; file is -f.
func (c *chartFlags) check(cmd *cobra.Command, args []string, file string, adopting bool) error {
	if !c.given() {
		for _, name := range helmOnly {
			if cmd.Flags().Lookup(name) != nil && cmd.Flags().Changed(name) {
				return usageError(fmt.Errorf("--%s applies to --from-helm", name))
			}
		}
		return nil
	}
	if adopting {
		return usageError(errors.New("--adopt-helm-release takes the strategy as an argument or -f; render the chart with encode --from-helm first"))
	}
	return c.r.check(cmd, args, file)
}

// source names the chart in the history: the repository, the chart and
// the version rendered.
func (c *chartFlags) source(version string) string {
	if c.r.opts.RepoURL != "" {
		return fmt.Sprintf("chart %s %s of %s", c.r.helm, version, c.r.opts.RepoURL)
	}
	if version != "" {
		return fmt.Sprintf("chart %s %s", c.r.helm, version)
	}
	return "chart " + c.r.helm
}

// load renders the chart at version (a version or a range, as helm's
// --version; "" the newest) and loads it as apply would load the text
// encode --from-helm makes of it, with the flags' registry and
// identifier.
func (c *chartFlags) load(ctx context.Context, o *options, version string, f *reconcileFlags) (*codec.Loaded, error) {
	r := c.r
	r.opts.ChartVersion = version
	id := strategy.Identity{Registry: f.identity.Registry, Identifier: f.identity.Identifier}
	rendered, annotations, err := r.render(ctx, o, &id)
	if err != nil {
		return nil, err
	}
	text, _, err := parseManifests(r.source(), rendered, false)
	if err != nil {
		return nil, err
	}
	cm, err := codec.EncodeText(text, codec.EncodeOptions{Namespace: o.namespace(), Identity: id})
	if err != nil {
		return nil, err
	}
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	for k, v := range annotations {
		cm.Annotations[k] = v
	}
	dopts, err := o.decodeOptions()
	if err != nil {
		return nil, err
	}
	return codec.LoadConfigMap(c.source(id.Version), cm, dopts, strategy.ParseOptions{})
}

// walkSource lists the chart's versions in the repository's index.yaml
// and renders one of them as the target was rendered. The user's trust
// decides first (checkWalkTrust).
func (c *chartFlags) walkSource(o *options, f *reconcileFlags) (source.VersionLister, func(context.Context, string) (walkStep, error), error) {
	if c.r.opts.RepoURL == "" {
		return nil, nil, usageError(errors.New("--walk-upgrade-path with --from-helm lists the chart's versions in its repository: give the chart as a name with --repo URL (a chart in a registry: apply oci://REF:TAG of a strategy, or the operator's spec.strategy.helm)"))
	}
	lister := source.HelmIndex{URL: c.r.opts.RepoURL, Chart: c.r.helm}
	return lister, func(ctx context.Context, version string) (walkStep, error) {
		l, err := c.load(ctx, o, version, f)
		if err != nil {
			// A version that does not render (a broken chart, values it
			// refuses) is named and skipped; the repository unreachable
			// is an error of the listing, met before.
			return walkStep{}, upgradepath.Unusable(version, err)
		}
		return walkStep{version: version, l: l, source: c.source(version)}, nil
	}, nil
}

// checkChartWalkTrust is the trust rule of a walk through a Helm
// repository over HTTP: --allow-unsigned for apply (plan: a note), never
// --key.
func checkChartWalkTrust(o *options, ct *clusterTrust, url string) error {
	switch {
	case ct != nil && len(ct.keys) > 0:
		return usageError(fmt.Errorf("--walk-upgrade-path --from-helm: the Helm repository %s carries no signature installstrategy verifies, so --key can check none of the versions the walk renders; give --allow-unsigned to take them as the repository serves them", url))
	case ct != nil && ct.allowUnsigned:
		fmt.Fprintf(o.streams.ErrOut, "warning: the versions of the walk are rendered from the Helm repository %s without a signature (--allow-unsigned): whoever can write the repository or its index.yaml (or, over http://, the network between) chose them\n", url)
		return nil
	case ct != nil && ct.optional:
		fmt.Fprintf(o.streams.ErrOut, "note: the versions of the walk are rendered from the Helm repository %s, which signs nothing installstrategy verifies; apply --walk-upgrade-path takes them only with --allow-unsigned\n", url)
		return nil
	}
	return usageError(fmt.Errorf("--walk-upgrade-path --from-helm renders versions nobody named on the command line from the Helm repository %s, which signs nothing installstrategy verifies: give --allow-unsigned to take them as the repository serves them (--key cannot check them)", url))
}
