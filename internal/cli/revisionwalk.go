package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/history"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/source"
	"github.com/installstrategy/installstrategy/pkg/upgradepath"
)

// This file is revision/N, the strategy argument of apply and plan that
// names a revision of the installation --name (history NAME lists them):
// its kept strategy, loaded as rollback loads it, through the namespace's
// anchor (source.Revision pinned to the anchored digest and identity); a
// revision the anchor does not record, or whose ConfigMap says otherwise,
// is refused. With --walk-upgrade-path, the versions between are the
// installation's other anchored revisions (source.Revisions), each
// loaded the same way: a tampered one is skipped, named, never walked
// through.

// revisionPrefix begins a revision/N argument.
const revisionPrefix = "revision/"

// revisionRef returns N of a revision/N argument, and whether src is one;
// a malformed N is a usage error.
func revisionRef(src string) (int, bool, error) {
	s, ok := strings.CutPrefix(src, revisionPrefix)
	if !ok {
		return 0, false, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, true, usageError(fmt.Errorf("%s: want revision/N with N a revision number (see history NAME)", src))
	}
	return n, true, nil
}

// revisionWalk is the installation whose revisions a revision/N target
// and its walk come from (options.revisions).
type revisionWalk struct {
	c      *cluster
	owner  inventory.Owner
	anchor *history.Anchor
	dopts  codec.DecodeOptions
	n      int
}

// revisionTarget loads revision n of the installation --name, verified
// against the namespace's anchor; a revision's trust is the anchor, so
// --key and --allow-unsigned do not apply.
func (o *options) revisionTarget(ctx context.Context, n int, f *reconcileFlags) (*codec.Loaded, error) {
	if f.name == "" {
		return nil, usageError(fmt.Errorf("revision/%d is a revision of an installation: give its --name (history NAME lists its revisions)", n))
	}
	if ct := o.clusterTrust; ct != nil && (len(ct.keys) > 0 || ct.allowUnsigned) {
		return nil, usageError(fmt.Errorf("revision/%d is trusted by the namespace's anchor, as rollback trusts it: --key and --allow-unsigned do not apply", n))
	}
	c, err := o.cluster()
	if err != nil {
		return nil, err
	}
	dopts, err := o.decodeOptions()
	if err != nil {
		return nil, err
	}
	owner := inventory.Owner{Namespace: c.namespace, Name: f.name, Kind: inventory.KindPlugin}
	if err := owner.Validate(); err != nil {
		return nil, fmt.Errorf("--name: %w", err)
	}
	anchor, err := history.NewStore(c.kube).Anchor(ctx, owner)
	if err != nil {
		return nil, fmt.Errorf("revision/%d of installation %s: %w", n, owner, err)
	}
	a := anchor.Find(n)
	if a == nil {
		return nil, fmt.Errorf("installation %s: the namespace's anchor records no revision %d (kubectl installstrategy history %s -n %s lists them; rollback --allow-unanchored alone takes an unanchored one)",
			owner, n, owner.Name, owner.Namespace)
	}
	l, status, reason := c.checkAnchored(ctx, dopts, owner, nil, a)
	if status != revisionVerified {
		return nil, fmt.Errorf("revision %d of installation %s is %s: %s; nothing changed", n, owner, status, reason)
	}
	o.revisions = &revisionWalk{c: c, owner: owner, anchor: anchor, dopts: dopts, n: n}
	return l, nil
}

// source names revision n in the history.
func (r *revisionWalk) source(n int) string { return fmt.Sprintf("revision %d", n) }

// walkSource lists the versions of the installation's anchored revisions
// and loads one of them through the anchor: the newest verified revision
// of that version; a version none of whose revisions verifies is
// unusable (skipped, named).
func (r *revisionWalk) walkSource() (source.VersionLister, func(context.Context, string) (walkStep, error)) {
	revs := source.Revisions{Anchored: r.anchor.Revisions}
	return revs, func(ctx context.Context, version string) (walkStep, error) {
		var refused []error
		for _, a := range revs.ByVersion(version) {
			l, status, reason := r.c.checkAnchored(ctx, r.dopts, r.owner, nil, &a)
			if status == revisionVerified {
				return walkStep{version: version, l: l, source: r.source(a.Revision)}, nil
			}
			refused = append(refused, fmt.Errorf("revision %d is %s: %s", a.Revision, status, reason))
		}
		return walkStep{}, upgradepath.Unusable(version, errors.Join(append(refused, errors.New("no verified revision of this version"))...))
	}
}
