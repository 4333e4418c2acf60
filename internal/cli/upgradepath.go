package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/source"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/trust"
	"github.com/installstrategy/installstrategy/pkg/upgradepath"
)

// This file is --walk-upgrade-path of apply and plan: an upgrade the
// target's declared upgradeFrom (a Requirements document) does not admit
// from the installed version is walked through the intermediate versions
// the strategy's source lists, as the operator's spec.upgradePath Walk
// does (pkg/upgradepath plans). Without the flag it is refused, as by the
// operator's default.

// walkHelp is the help of --walk-upgrade-path.
const walkHelp = `when the strategy's upgradeFrom does not admit the installed version, walk there through the versions its source lists (oci://REF:TAG: the repository's tags; cm/NAME: the strategies stored in the namespace; --from-helm NAME --repo URL: the chart's versions in the repository's index.yaml; revision/N: the installation's revisions), each loaded through --key (a Helm repository: rendered as the target, with --allow-unsigned; a revision: verified against the namespace's anchor) and applied and rolled over before the next (default: refuse, as the operator's spec.upgradePath Refuse)`

// chartWalk is the chart apply or plan renders (--from-helm), whose
// repository a walk lists (options.chart).
type chartWalk struct {
	c *chartFlags
	f *reconcileFlags
}

// targetSource names the target in the history: the chart rendered, or
// the argument.
func (o *options) targetSource(src, version string) string {
	if o.chart != nil {
		return o.chart.c.source(version)
	}
	if r := o.revisions; r != nil {
		return r.source(r.n)
	}
	return sourceName(src)
}

// walkFlag is --walk-upgrade-path.
type walkFlag struct{ walk bool }

func (w *walkFlag) add(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&w.walk, "walk-upgrade-path", false, walkHelp)
}

// walkStep is one version of a walk, loaded through the trust gate.
type walkStep struct {
	version string
	l       *codec.Loaded
	source  string // where it came from, for the history
}

// walkPlan is a planned walk: the path, and each hop's strategy (the
// last is the target as given).
type walkPlan struct {
	path  *upgradepath.Path
	steps []walkStep
}

// planWalk plans the walk from installed to the target l (given as src)
// when the target's upgradeFrom does not admit installed; nil when it
// does (or there is nothing to walk: a fresh install, a downgrade, no
// declaration). A walk loads versions nobody named on the command line,
// so it needs --key (ct): a listing is not trusted, each version is
// loaded through the gate, and only trusted ones count. No chain is an
// *upgradepath.NoPathError.
func (o *options) planWalk(ctx context.Context, ct *clusterTrust, src, installed string, l *codec.Loaded) (*walkPlan, error) {
	req, _, err := l.Strategy.Requirements()
	if err != nil || req == nil || installed == "" {
		return nil, nil // the engine reports a bad declaration
	}
	target := upgradepath.Candidate{Version: l.Strategy.Identity.Version, UpgradeFrom: req.UpgradeFrom}
	if !upgradepath.Needed(installed, target) {
		return nil, nil
	}
	var (
		lister source.VersionLister
		hop    func(context.Context, string) (walkStep, error)
	)
	if rw := o.revisions; rw != nil {
		// The installation's revisions: the anchor is their trust, as
		// for rollback (revisionwalk.go).
		lister, hop = rw.walkSource()
	} else if ch := o.chart; ch != nil {
		// A chart of a Helm repository: its own trust rule (helmwalk.go).
		if lister, hop, err = ch.c.walkSource(o, ch.f); err != nil {
			return nil, err
		}
		if err := checkChartWalkTrust(o, ct, ch.c.r.opts.RepoURL); err != nil {
			return nil, err
		}
	} else {
		if ct == nil || len(ct.keys) == 0 || ct.allowUnsigned {
			return nil, usageError(errors.New("--walk-upgrade-path loads versions nobody named on the command line: give --key with the keys they must be signed by (--allow-unsigned does not extend to them)"))
		}
		if lister, hop, err = o.walkSource(ctx, src); err != nil {
			return nil, err
		}
	}
	listing, err := lister.Versions(ctx)
	if err != nil {
		return nil, fmt.Errorf("upgrade path: %w", err)
	}
	loaded := map[string]walkStep{}
	load := func(ctx context.Context, version string) (upgradepath.Candidate, error) {
		step, err := hop(ctx, version)
		if err != nil {
			return upgradepath.Candidate{}, err
		}
		c := upgradepath.Candidate{Version: step.l.Strategy.Identity.Version}
		hreq, _, err := step.l.Strategy.Requirements()
		if err != nil {
			return upgradepath.Candidate{}, upgradepath.Unusable(version, err)
		}
		if hreq != nil {
			c.UpgradeFrom = hreq.UpgradeFrom
		}
		loaded[c.Version] = step
		return c, nil
	}
	path, err := upgradepath.Plan(ctx, installed, target, listing.Versions, load, upgradepath.Options{})
	if err != nil {
		if listing.Truncated != "" {
			err = fmt.Errorf("%w (%s)", err, listing.Truncated)
		}
		return nil, err
	}
	w := &walkPlan{path: path}
	for _, h := range path.Hops {
		step, ok := loaded[h.Version]
		if h.Version == target.Version {
			step, ok = walkStep{version: h.Version, l: l, source: o.targetSource(src, h.Version)}, true
		}
		if !ok {
			return nil, fmt.Errorf("upgrade path %s: %s was not loaded", path, h.Version)
		}
		w.steps = append(w.steps, step)
	}
	return w, nil
}

// walkFor plans the walk to the target l (given as src) from the version
// the installation of f runs now (nil: none needed). A refusal is exit
// status 1, as apply's other refusals before any write.
func (o *options) walkFor(ctx context.Context, ct *clusterTrust, src string, l *codec.Loaded, f *reconcileFlags) (*walkPlan, error) {
	c, err := o.cluster()
	if err != nil {
		return nil, err
	}
	owner, err := c.prepareCluster(ctx, l, f)
	if err != nil {
		return nil, err
	}
	observed, err := c.observedIdentity(ctx, l.Strategy, owner, f)
	if err != nil {
		return nil, err
	}
	p, err := o.planWalk(ctx, ct, src, observed.Version, l)
	if errors.As(err, new(*upgradepath.NoPathError)) {
		return nil, &ExitError{Code: 1, Err: fmt.Errorf("apply would write nothing: %w", err)}
	}
	return p, err
}

// walkSource lists the versions the target's source offers and loads one
// of them through the trust gate: the tags of an oci:// repository, or
// the strategies stored in the namespace for cm/NAME. A version whose
// every strategy the gate refuses is unusable (skipped, named).
func (o *options) walkSource(ctx context.Context, src string) (source.VersionLister, func(context.Context, string) (walkStep, error), error) {
	if oci.IsReference(src) {
		c, err := o.ociClient()
		if err != nil {
			return nil, nil, err
		}
		return source.OCITags{Client: c, Reference: src}, func(ctx context.Context, tag string) (walkStep, error) {
			ref, err := c.WithTag(src, tag)
			if err != nil {
				return walkStep{}, upgradepath.Unusable(tag, err)
			}
			l, err := o.loadStrategy(ctx, ref, pick{})
			if err = unusable(tag, err); err != nil {
				return walkStep{}, err
			}
			return walkStep{version: tag, l: l, source: ref}, nil
		}, nil
	}
	if _, ok := clusterRef(src); !ok {
		return nil, nil, errors.New("--walk-upgrade-path: the versions between are listed by the strategy's source: give it as oci://REF:TAG, cm/NAME or revision/N, not a file")
	}
	c, err := o.cluster()
	if err != nil {
		return nil, nil, err
	}
	entries, err := c.store.List(ctx, c.namespace)
	if err != nil {
		return nil, nil, fmt.Errorf("upgrade path: %w", err)
	}
	stored := source.Stored{Entries: entries}
	return stored, func(ctx context.Context, version string) (walkStep, error) {
		var refused []error
		for _, e := range stored.ByVersion(version) {
			l, err := o.clusterTrust.load(ctx, o, c, e)
			if u := (*upgradepath.UnusableError)(nil); errors.As(unusable(version, err), &u) {
				refused = append(refused, u.Err)
				continue
			}
			if err != nil {
				return walkStep{}, err
			}
			return walkStep{version: version, l: l, source: "cm/" + e.Name}, nil
		}
		return walkStep{}, upgradepath.Unusable(version, errors.Join(append(refused, errors.New("no trusted strategy of this version"))...))
	}, nil
}

// unusable marks a refusal of the strategy itself (not trusted, not a
// strategy, does not decode or parse) as an unusable version; a registry
// or API server that cannot be reached stays an error.
func unusable(version string, err error) error {
	switch {
	case errors.As(err, new(*trust.UntrustedError)), errors.As(err, new(*trust.RefusedError)), errors.As(err, new(*store.CorruptError)),
		errors.Is(err, oci.ErrNotStrategy), errors.Is(err, oci.ErrNotChart):
		return upgradepath.Unusable(version, err)
	}
	return err
}

// printWalk prints the planned walk: the path, and each version skipped
// with why.
func printWalk(w io.Writer, p *walkPlan) {
	fmt.Fprintf(w, "upgrade path: %s (%s, each applied and rolled over before the next)\n", p.path, plural(len(p.path.Hops), "hop"))
	for _, h := range p.path.Hops {
		if h.UpgradeFrom != "" {
			fmt.Fprintf(w, "  %s: upgradeFrom %q\n", h.Version, h.UpgradeFrom)
		}
	}
	for _, sk := range p.path.Skipped {
		fmt.Fprintf(w, "  skipped %s: %s\n", sk.Version, sk.Err)
	}
}

// walkApply applies each hop of the walk in turn, as apply --wait would
// (the last one as the flags say), each recorded in the history; the
// first hop that fails ends it, naming where it stopped.
func (o *options) walkApply(ctx context.Context, cl *cluster, p *walkPlan, f *reconcileFlags, a applyFlags) error {
	out := o.streams.Out
	printWalk(out, p)
	from := p.path.From
	for i, step := range p.steps {
		last := i == len(p.steps)-1
		ha := a
		if !last {
			ha.wait = true
			printWarnings(o.streams.ErrOut, step.l.Warnings)
			if err := f.prepare(step.l); err != nil {
				return err
			}
		}
		fmt.Fprintf(out, "upgrade path: hop %d/%d: %s -> %s (%s)\n", i+1, len(p.steps), from, step.version, step.source)
		hctx, cancel := context.WithTimeout(ctx, a.timeout+30*time.Second)
		err := o.runApply(hctx, cl, step.l, f, ha, step.source)
		cancel()
		if err != nil {
			return fmt.Errorf("upgrade path %s stopped at hop %d/%d (%s -> %s), the last version rolled over is %s: %w", p.path, i+1, len(p.steps), from, step.version, from, err)
		}
		from = step.version
	}
	return nil
}

// walkHint is the line that points from a refused upgradeFrom to
// --walk-upgrade-path ("" when unmet refuses nothing else).
func walkHint(unmet []string) string {
	for _, u := range unmet {
		if strings.Contains(u, "upgradeFrom") {
			return "--walk-upgrade-path (with --key; a Helm repository: --allow-unsigned) walks there through the versions the strategy's source lists, when it lists them (oci://REF:TAG, cm/NAME, --from-helm NAME --repo URL, revision/N)"
		}
	}
	return ""
}

// withWalkHint adds walkHint to a refusal of the declared requirements.
func withWalkHint(err error) error {
	var req *engine.RequirementsError
	if errors.As(err, &req) {
		if hint := walkHint(req.Unmet); hint != "" {
			return fmt.Errorf("%w\n%s", err, hint)
		}
	}
	return err
}
