package operator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/source"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/trust"
	"github.com/installstrategy/installstrategy/pkg/upgradepath"
)

// UpgradePathRefusedError is a walk that spec.upgradePath Walk asked for
// and no chain of trusted versions makes: a Refusal with reason
// UpgradePathRefused.
type UpgradePathRefusedError struct{ Err error }

func (e *UpgradePathRefusedError) Error() string { return e.Err.Error() }
func (e *UpgradePathRefusedError) Unwrap() error { return e.Err }

// RefusalReason is v1alpha1.ReasonUpgradePathRefused.
func (e *UpgradePathRefusedError) RefusalReason() string { return v1alpha1.ReasonUpgradePathRefused }

// walkUpgradePath is called with the target strategy as its source loaded
// it (trust decided, parsed). When spec.upgradePath is Walk, the source
// can list versions (walkSourceOf: OCI and Helm by their repository's
// tags, a configMap by the strategies stored in the namespace), and the
// target's declared upgradeFrom does not admit the deployed version, it
// plans the walk (pkg/upgradepath) and returns the first intermediate
// version's source and strategy instead: that one is rolled out (and
// recorded in the history) like any target, and the next reconcile plans
// again from it. Each intermediate version is loaded through the
// source's own trust gate as if spec.version named it (no pinned
// digest), before its Requirements are read; a listing is not trusted.
// Otherwise it returns sl and l as they are. status.upgradePath is kept
// only while it describes the upgrade to this target (settleUpgradePath).
func (r *Reconciler) walkUpgradePath(ctx context.Context, s *state, sl sourceLoad, l *source.Loaded) (sourceLoad, *source.Loaded, error) {
	in := s.Installation
	if l.Strategy == nil {
		return sl, l, nil
	}
	s.update(func(in *v1alpha1.Installation) { settleUpgradePath(in, l.Strategy.Identity.Version) })
	target, ok := walkTarget(in, l)
	if !ok {
		return sl, l, nil
	}
	ws, err := r.walkSourceOf(ctx, in)
	if err != nil || ws == nil {
		return sl, nil, err
	}
	path, loaded, err := r.planWalk(ctx, s, ws, target)
	if err != nil {
		return sl, nil, err
	}
	recordWalk(s, path, target.Version)
	next := path.Hops[0]
	if next.Version == target.Version {
		return sl, l, nil
	}
	h, ok := loaded[next.Version]
	if !ok {
		return sl, nil, fmt.Errorf("upgrade path %s: %s was not loaded", path, next.Version)
	}
	s.log.Info("upgrade path: walking", "path", path.String(), "next", next.Version, "from", h.l.From)
	s.walking = true
	return h.sl, h.l, nil
}

// settleUpgradePath clears status.upgradePath once it no longer describes
// the Installation's upgrade: the target is another version than the
// walk's last (a new version, a rollback), or the walk was left before it
// ended (spec.upgradePath no longer Walk while an intermediate version is
// deployed). A walk that ended stays until the target changes.
func settleUpgradePath(in *v1alpha1.Installation, target string) {
	walk := in.Status.UpgradePath
	if len(walk) == 0 {
		return
	}
	last := walk[len(walk)-1]
	if last != target || (in.Spec.UpgradePath != v1alpha1.UpgradePathWalk && in.Status.ObservedVersion != last) {
		in.Status.UpgradePath = nil
	}
}

// walkTarget returns the target as the planner takes it, and whether a
// walk is asked for and needed: spec.upgradePath Walk, a deployed
// version, and a target whose valid upgradeFrom does not admit it
// (anything else is the engine's to judge).
func walkTarget(in *v1alpha1.Installation, l *source.Loaded) (upgradepath.Candidate, bool) {
	deployed := in.Status.ObservedVersion
	if in.Spec.UpgradePath != v1alpha1.UpgradePathWalk || deployed == "" {
		return upgradepath.Candidate{}, false
	}
	req, _, err := l.Strategy.Requirements()
	if err != nil || req == nil {
		return upgradepath.Candidate{}, false // the engine reports a bad declaration
	}
	target := upgradepath.Candidate{Version: l.Strategy.Identity.Version, UpgradeFrom: req.UpgradeFrom}
	return target, upgradepath.Needed(deployed, target)
}

// walkSource lists the versions an Installation's source offers and
// loads one of them as the source would were spec.version (and the
// reference) to name it.
type walkSource struct {
	lister source.VersionLister
	// hops returns the loads of a listed version: several when several
	// stored strategies claim it (the first trusted one is taken).
	hops func(ctx context.Context, version string) ([]sourceLoad, error)
}

// walkSourceOf is the Installation's source as a walk lists and loads it;
// nil for a source that lists no versions (the engine then refuses).
func (r *Reconciler) walkSourceOf(ctx context.Context, in *v1alpha1.Installation) (*walkSource, error) {
	at := func(version string) *v1alpha1.Installation {
		hin := in.DeepCopy()
		hin.Spec.Version = version
		return hin
	}
	switch in.Spec.StrategySourceType() {
	case v1alpha1.StrategySourceOCI:
		src := in.Spec.Strategy.OCI
		client, err := r.ociClient(ctx, in.Namespace, ociRemote(src))
		if err != nil {
			return nil, err
		}
		return &walkSource{lister: source.OCITags{Client: client, Reference: src.Reference},
			hops: func(ctx context.Context, tag string) ([]sourceLoad, error) {
				ref, err := client.WithTag(src.Reference, tag)
				if err != nil {
					return nil, upgradepath.Unusable(tag, err)
				}
				hin, o := at(tag), *src
				o.Reference, o.Digest, o.Mirrors = ref, "", nil
				hin.Spec.Strategy.OCI = &o
				hsl, err := r.ociSource(ctx, hin)
				return []sourceLoad{hsl}, err
			}}, nil
	case v1alpha1.StrategySourceHelm:
		src := in.Spec.Strategy.Helm
		client, err := r.ociClient(ctx, in.Namespace, helmRemote(src))
		if err != nil {
			return nil, err
		}
		return &walkSource{lister: source.OCITags{Client: client, Reference: src.Chart, Chart: true},
			hops: func(ctx context.Context, version string) ([]sourceLoad, error) {
				ref, err := client.WithTag(src.Chart, source.ChartTag(version))
				if err != nil {
					return nil, upgradepath.Unusable(version, err)
				}
				hin, h := at(version), *src
				h.Chart, h.Digest = ref, ""
				hin.Spec.Strategy.Helm = &h
				hsl, err := r.helmSource(ctx, hin)
				return []sourceLoad{hsl}, err
			}}, nil
	case v1alpha1.StrategySourceConfigMap:
		entries, err := r.plain.List(ctx, in.Namespace)
		if err != nil {
			return nil, fmt.Errorf("upgrade path: %w", err)
		}
		stored := source.Stored{Entries: entries}
		return &walkSource{lister: stored,
			hops: func(ctx context.Context, version string) ([]sourceLoad, error) {
				var out []sourceLoad
				for _, e := range stored.ByVersion(version) {
					hin, c := at(version), *in.Spec.Strategy.ConfigMap
					c.Name, c.Digest = e.Name, ""
					hin.Spec.Strategy.ConfigMap = &c
					hsl, err := r.configMapSource(ctx, hin)
					if err != nil {
						return nil, err
					}
					out = append(out, hsl)
				}
				return out, nil
			}}, nil
	}
	return nil, nil
}

// walkHop is an intermediate version as its source loaded it.
type walkHop struct {
	sl sourceLoad
	l  *source.Loaded
}

// planWalk lists the source's versions and plans the walk to target,
// loading the versions between through their trust gate; the loaded ones
// are returned by version. No chain is an *UpgradePathRefusedError.
func (r *Reconciler) planWalk(ctx context.Context, s *state, ws *walkSource, target upgradepath.Candidate) (*upgradepath.Path, map[string]walkHop, error) {
	listing, err := ws.lister.Versions(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("upgrade path: %w", err)
	}
	loaded := map[string]walkHop{}
	load := func(ctx context.Context, version string) (upgradepath.Candidate, error) {
		sls, err := ws.hops(ctx, version)
		if err != nil {
			return upgradepath.Candidate{}, err
		}
		var refused []error
		for _, hsl := range sls {
			c, hl, err := loadCandidate(ctx, hsl)
			if u := (*upgradepath.UnusableError)(nil); errors.As(err, &u) {
				refused = append(refused, u.Err)
				continue
			}
			if err != nil {
				return upgradepath.Candidate{}, err
			}
			loaded[c.Version] = walkHop{hsl, hl}
			return c, nil
		}
		if len(refused) == 0 {
			refused = append(refused, errors.New("no strategy of this version"))
		}
		return upgradepath.Candidate{}, upgradepath.Unusable(version, errors.Join(refused...))
	}
	path, err := upgradepath.Plan(ctx, s.Installation.Status.ObservedVersion, target, listing.Versions, load, upgradepath.Options{})
	if errors.As(err, new(*upgradepath.NoPathError)) {
		msg := err.Error()
		if listing.Truncated != "" {
			msg += " (" + listing.Truncated + ")"
		}
		s.update(func(in *v1alpha1.Installation) { in.Status.UpgradePath = nil })
		return nil, nil, &UpgradePathRefusedError{Err: errors.New(msg)}
	}
	if err != nil {
		return nil, nil, err
	}
	for _, sk := range path.Skipped {
		s.log.Info("upgrade path: version skipped", "version", sk.Version, "reason", sk.Err.Error())
	}
	return path, loaded, nil
}

// loadCandidate loads one intermediate version through its source's
// trust gate and reads its Requirements. A refusal of the strategy (not
// trusted, not a strategy, does not parse, a bad declaration) is an
// *upgradepath.UnusableError; a registry or API server that cannot be
// reached is not.
func loadCandidate(ctx context.Context, sl sourceLoad) (upgradepath.Candidate, *source.Loaded, error) {
	unusable := func(err error) error { return upgradepath.Unusable("", err) }
	l, err := sl.load(ctx)
	switch {
	case errors.As(err, new(*trust.UntrustedError)), errors.As(err, new(*trust.RefusedError)), errors.As(err, new(*store.CorruptError)),
		errors.As(err, new(*source.VersionError)), errors.Is(err, oci.ErrNotStrategy), errors.Is(err, oci.ErrNotChart):
		return upgradepath.Candidate{}, nil, unusable(err)
	case err != nil:
		return upgradepath.Candidate{}, nil, err
	case l.Strategy == nil:
		return upgradepath.Candidate{}, nil, unusable(errors.New("not loaded"))
	}
	req, _, err := l.Strategy.Requirements()
	if err != nil {
		return upgradepath.Candidate{}, nil, unusable(err)
	}
	c := upgradepath.Candidate{Version: l.Strategy.Identity.Version}
	if req != nil {
		c.UpgradeFrom = req.UpgradeFrom
	}
	return c, l, nil
}

// recordWalk sets status.upgradePath to the walk: from where it began
// (a walk under way to the same target keeps its start) to the target.
func recordWalk(s *state, path *upgradepath.Path, target string) {
	walk := path.Versions()
	s.update(func(in *v1alpha1.Installation) {
		if old := in.Status.UpgradePath; len(old) > 0 && old[len(old)-1] == target {
			if i := slices.Index(old, path.From); i >= 0 {
				walk = append(slices.Clone(old[:i]), walk...)
			}
		}
		in.Status.UpgradePath = walk
	})
}

// walkOn runs the gc stage and, when this reconcile rolled out an
// intermediate version of a walk, comes back at once for the next one.
func (r *Reconciler) walkOn(gc func(context.Context, *state) (bool, error)) func(context.Context, *state) (bool, error) {
	return func(ctx context.Context, s *state) (bool, error) {
		done, err := gc(ctx, s)
		if err == nil && s.walking && s.Installation.Status.Phase == v1alpha1.PhaseDeployed {
			s.Result.RequeueAfter = 10 * time.Millisecond
		}
		return done, err
	}
}
