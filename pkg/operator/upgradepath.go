package operator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/Masterminds/semver/v3"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/source"
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
// it (trust decided, parsed). When spec.upgradePath is Walk, the source is
// OCI, and the target's declared upgradeFrom does not admit the deployed
// version, it plans the walk (pkg/upgradepath) through the tags of the
// source's repository and returns the first intermediate version's source
// and strategy instead: that one is rolled out (and recorded in the
// history) like any target, and the next reconcile plans again from it.
// Each intermediate version is loaded through ociSource with spec.version
// set to its tag and no pinned digest: a signature by a trusted key (the
// source's keys) for the product, that version and the artifact's digest
// vouches for it, before its Requirements are read. A tag list is not
// trusted; it only says which tags to load. Otherwise it returns sl and l
// as they are.
func (r *Reconciler) walkUpgradePath(ctx context.Context, s *state, sl sourceLoad, l *source.Loaded) (sourceLoad, *source.Loaded, error) {
	in := s.Installation
	deployed := in.Status.ObservedVersion
	if in.Spec.UpgradePath != v1alpha1.UpgradePathWalk || in.Spec.StrategySourceType() != v1alpha1.StrategySourceOCI ||
		deployed == "" || l.Strategy == nil || l.Strategy.Identity.Version == deployed {
		return sl, l, nil
	}
	req, _, err := l.Strategy.Requirements()
	if err != nil || req == nil || req.UpgradeFrom == "" {
		return sl, l, nil // the engine reports a bad declaration
	}
	from, ferr := semver.NewVersion(deployed)
	c, cerr := semver.NewConstraint(req.UpgradeFrom)
	to, terr := semver.NewVersion(l.Strategy.Identity.Version)
	if ferr != nil || cerr != nil || terr != nil || c.Check(from) || !to.GreaterThan(from) {
		return sl, l, nil // admitted, a downgrade, or not semver: the engine decides
	}
	src := in.Spec.Strategy.OCI
	client, err := r.ociClient(ctx, in.Namespace, ociRemote(src))
	if err != nil {
		return sl, nil, err
	}
	tags, truncated, err := client.Tags(ctx, src.Reference, oci.DefaultMaxTags)
	if err != nil {
		return sl, nil, fmt.Errorf("upgrade path: %w", err)
	}
	type hop struct {
		sl sourceLoad
		l  *source.Loaded
	}
	hops := map[string]hop{}
	load := func(ctx context.Context, tag string) (upgradepath.Candidate, error) {
		ref, err := client.WithTag(src.Reference, tag)
		if err != nil {
			return upgradepath.Candidate{}, upgradepath.Unusable(tag, err)
		}
		hin := in.DeepCopy()
		hin.Spec.Version = tag
		hin.Spec.Strategy.OCI = &v1alpha1.OCIStrategySource{Reference: ref, Product: src.Product, Verify: src.Verify,
			SecretRef: src.SecretRef, Interval: src.Interval, Insecure: src.Insecure}
		hsl, err := r.ociSource(ctx, hin)
		if err != nil {
			return upgradepath.Candidate{}, err
		}
		hl, err := hsl.load(ctx)
		if errors.As(err, new(*trust.UntrustedError)) || errors.As(err, new(*trust.RefusedError)) || errors.Is(err, oci.ErrNotStrategy) {
			return upgradepath.Candidate{}, upgradepath.Unusable(tag, err)
		}
		if err != nil {
			return upgradepath.Candidate{}, err
		}
		hreq, _, err := hl.Strategy.Requirements()
		if err != nil {
			return upgradepath.Candidate{}, upgradepath.Unusable(tag, err)
		}
		hops[tag] = hop{hsl, hl}
		c := upgradepath.Candidate{Version: hl.Strategy.Identity.Version}
		if hreq != nil {
			c.UpgradeFrom = hreq.UpgradeFrom
		}
		return c, nil
	}
	target := upgradepath.Candidate{Version: l.Strategy.Identity.Version, UpgradeFrom: req.UpgradeFrom}
	path, err := upgradepath.Plan(ctx, deployed, target, tags, load, upgradepath.Options{})
	var noPath *upgradepath.NoPathError
	if errors.As(err, &noPath) {
		msg := err.Error()
		if truncated {
			msg += fmt.Sprintf(" (the registry lists more than %d tags; only the first were looked at)", oci.DefaultMaxTags)
		}
		return sl, nil, &UpgradePathRefusedError{Err: errors.New(msg)}
	}
	if err != nil {
		return sl, nil, err
	}
	for _, sk := range path.Skipped {
		s.log.Info("upgrade path: version skipped", "version", sk.Version, "reason", sk.Err.Error())
	}
	walk := path.Versions()
	s.update(func(in *v1alpha1.Installation) {
		// A walk under way keeps where it began.
		if old := in.Status.UpgradePath; len(old) > 0 && old[len(old)-1] == target.Version {
			if i := slices.Index(old, deployed); i >= 0 {
				walk = append(slices.Clone(old[:i]), walk...)
			}
		}
		in.Status.UpgradePath = walk
	})
	next := path.Hops[0]
	if next.Version == target.Version {
		return sl, l, nil
	}
	for tag, h := range hops {
		if h.l.Strategy.Identity.Version == next.Version {
			s.log.Info("upgrade path: walking", "path", path.String(), "next", next.Version, "tag", tag)
			s.walking = true
			return h.sl, h.l, nil
		}
	}
	return sl, nil, fmt.Errorf("upgrade path %s: %s was not loaded", path, next.Version)
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
