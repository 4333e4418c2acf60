// Package upgradepath plans the walk from an installed version to a
// target whose declared upgradeFrom range (strategy.Requirements) does
// not admit it: the shortest chain of versions, each admitted by the
// upgradeFrom of the next, taking the highest version that still lies on
// a shortest chain at each hop (as OLM's resolver prefers the newest
// replacement).
//
// The planner is pure. What versions exist comes from a listing (OCI tags,
// stored strategies) that is not trusted: it only says which versions to
// look at. Each candidate is read through Load, which must load it through
// its source's trust gate (pkg/source: signature or pin before parse) and
// only then read its Requirements; a candidate Load refuses is skipped
// (Unusable) and named in the plan, never walked through.
package upgradepath

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// DefaultMaxCandidates bounds the versions Plan loads (those strictly
// between the installed and the target version); more is an error rather
// than that many pulls.
const DefaultMaxCandidates = 100

// Candidate is a version as its source's trust gate loaded it.
type Candidate struct {
	// Version is the version the trusted strategy says it is (its signed
	// identity), which must be the listed one.
	Version string
	// UpgradeFrom is its declared upgradeFrom constraint; "" admits any
	// older version.
	UpgradeFrom string
}

// Load loads a listed version through its source's trust gate. An error
// wrapped by Unusable skips the version; any other stops the plan (a
// registry that cannot be reached must not make the path longer).
type Load func(ctx context.Context, version string) (Candidate, error)

// UnusableError is a listed version Load refused (not trusted, does not
// parse, holds another version): it is skipped.
type UnusableError struct {
	Version string
	Err     error
}

func (e *UnusableError) Error() string { return e.Version + ": " + e.Err.Error() }
func (e *UnusableError) Unwrap() error { return e.Err }

// Unusable marks err as the refusal of version: the plan skips it.
func Unusable(version string, err error) error { return &UnusableError{Version: version, Err: err} }

// Hop is one version of a path.
type Hop struct {
	Version     string
	UpgradeFrom string
}

func (h Hop) String() string {
	if h.UpgradeFrom == "" {
		return h.Version
	}
	return fmt.Sprintf("%s (upgradeFrom %q)", h.Version, h.UpgradeFrom)
}

// Path is a planned walk.
type Path struct {
	// From is the installed version.
	From string
	// Hops are the versions to apply in order; the last is the target.
	Hops []Hop
	// Skipped are the listed versions that Load refused.
	Skipped []*UnusableError
}

// Versions returns From and the hops' versions, in order.
func (p *Path) Versions() []string {
	out := []string{p.From}
	for _, h := range p.Hops {
		out = append(out, h.Version)
	}
	return out
}

func (p *Path) String() string { return strings.Join(p.Versions(), " -> ") }

// Options bound a plan.
type Options struct {
	// MaxCandidates bounds the versions loaded; 0 means
	// DefaultMaxCandidates.
	MaxCandidates int
}

// NoPathError says that no chain of the listed versions reaches the
// target: each candidate with what it admits, and those skipped.
type NoPathError struct {
	From, To   string
	Candidates []Hop
	Skipped    []*UnusableError
}

func (e *NoPathError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "no upgrade path from %s to %s", e.From, e.To)
	if len(e.Candidates) <= 1 {
		b.WriteString(" through the listed versions: none between them can be loaded")
	} else {
		parts := make([]string, 0, len(e.Candidates))
		for _, c := range e.Candidates {
			parts = append(parts, c.String())
		}
		b.WriteString(" through " + strings.Join(parts, ", "))
	}
	for _, s := range e.Skipped {
		b.WriteString("; skipped " + s.Error())
	}
	return b.String()
}

// node is a version of the graph.
type node struct {
	hop Hop
	v   *semver.Version
	c   *semver.Constraints // nil admits any
}

// admits reports whether a strategy at n may be applied over from.
func (n node) admits(from *semver.Version) bool {
	return n.v.GreaterThan(from) && (n.c == nil || n.c.Check(from))
}

// Plan finds the walk from installed to the target (its version and
// upgradeFrom, already loaded through the trust gate) through the listed
// versions. A target that admits installed is a path of one hop and
// nothing is loaded. Only listed versions strictly between installed and
// target (semantic versions; others are ignored) are loaded, highest
// first, at most Options.MaxCandidates of them.
func Plan(ctx context.Context, installed string, target Candidate, listed []string, load Load, opts Options) (*Path, error) {
	from, err := semver.NewVersion(installed)
	if err != nil {
		return nil, fmt.Errorf("upgrade path: the installed version %q is not a semantic version", installed)
	}
	to, err := parseNode(target)
	if err != nil {
		return nil, fmt.Errorf("upgrade path: target %w", err)
	}
	if !to.v.GreaterThan(from) {
		return nil, fmt.Errorf("upgrade path: the target %s is not newer than the installed %s", target.Version, installed)
	}
	path := &Path{From: installed}
	if to.admits(from) {
		path.Hops = []Hop{to.hop}
		return path, nil
	}
	between, err := Between(listed, installed, target.Version, opts.MaxCandidates)
	if err != nil {
		return nil, err
	}
	nodes := []node{to}
	for _, l := range between {
		n, err := loadNode(ctx, l, load)
		var unusable *UnusableError
		switch {
		case errors.As(err, &unusable):
			path.Skipped = append(path.Skipped, unusable)
			continue
		case err != nil:
			return nil, err
		}
		nodes = append(nodes, n)
	}
	// nodes[0] is the target, the rest from the highest down.
	dist := distances(nodes)
	hops := chain(nodes, dist, from)
	if hops == nil {
		ne := &NoPathError{From: installed, To: target.Version, Skipped: path.Skipped}
		for i := len(nodes) - 1; i >= 0; i-- { // lowest first
			ne.Candidates = append(ne.Candidates, nodes[i].hop)
		}
		return nil, ne
	}
	path.Hops = hops
	return path, nil
}

// Between returns the listed versions strictly between installed and
// target (semantic versions; others ignored, duplicates once, in the
// listed spelling), highest first; more than max (0:
// DefaultMaxCandidates) is an error.
func Between(listed []string, installed, target string, max int) ([]string, error) {
	from, err := semver.NewVersion(installed)
	if err != nil {
		return nil, fmt.Errorf("upgrade path: the installed version %q is not a semantic version", installed)
	}
	to, err := semver.NewVersion(target)
	if err != nil {
		return nil, fmt.Errorf("upgrade path: the target version %q is not a semantic version", target)
	}
	between := map[string]string{} // canonical semver -> listed spelling
	for _, l := range listed {
		v, err := semver.NewVersion(l)
		if err != nil || !v.GreaterThan(from) || !v.LessThan(to) {
			continue
		}
		if _, dup := between[v.String()]; !dup {
			between[v.String()] = l
		}
	}
	if max <= 0 {
		max = DefaultMaxCandidates
	}
	if len(between) > max {
		return nil, fmt.Errorf("upgrade path from %s to %s: %d versions lie between them, more than the %d this plan loads", installed, target, len(between), max)
	}
	out := make([]string, 0, len(between))
	for _, l := range between {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool {
		return semver.MustParse(out[i]).GreaterThan(semver.MustParse(out[j]))
	})
	return out, nil
}

// loadNode loads the listed version l: an error that is not an
// *UnusableError stops the plan; a strategy that is not the version it
// was listed as is unusable.
func loadNode(ctx context.Context, l string, load Load) (node, error) {
	c, err := load(ctx, l)
	if errors.As(err, new(*UnusableError)) {
		return node{}, err
	}
	if err != nil {
		return node{}, fmt.Errorf("upgrade path: load %s: %w", l, err)
	}
	n, err := parseNode(c)
	if err == nil {
		if lv := semver.MustParse(l); !n.v.Equal(lv) {
			err = fmt.Errorf("listed as %s, the strategy is version %s", l, c.Version)
		}
	}
	if err != nil {
		return node{}, &UnusableError{Version: l, Err: err}
	}
	return n, nil
}

// distances returns, for each node, the hops from it to the target
// nodes[0] (-1: none), found backwards from the target.
func distances(nodes []node) []int {
	dist := make([]int, len(nodes))
	for i := range dist {
		dist[i] = -1
	}
	dist[0] = 0
	for changed := true; changed; {
		changed = false
		for i := range nodes {
			for j := range nodes {
				if dist[j] < 0 || !nodes[j].admits(nodes[i].v) {
					continue
				}
				if d := dist[j] + 1; dist[i] < 0 || d < dist[i] {
					dist[i], changed = d, true
				}
			}
		}
	}
	return dist
}

// chain returns the hops of a shortest chain from from to the target
// nodes[0], the highest version on a shortest chain at each hop; nil when
// there is none.
func chain(nodes []node, dist []int, from *semver.Version) []Hop {
	best := -1 // hops from installed
	for j := range nodes {
		if dist[j] >= 0 && nodes[j].admits(from) && (best < 0 || dist[j]+1 < best) {
			best = dist[j] + 1
		}
	}
	if best < 0 {
		return nil
	}
	var hops []Hop
	cur, left := from, best
	for left > 0 {
		// nodes is ordered highest first after the target: the first
		// match is the highest version on a shortest chain.
		next := -1
		if dist[0] == left-1 && nodes[0].admits(cur) {
			next = 0
		} else {
			for j := 1; j < len(nodes); j++ {
				if dist[j] == left-1 && nodes[j].admits(cur) {
					next = j
					break
				}
			}
		}
		hops = append(hops, nodes[next].hop)
		cur, left = nodes[next].v, left-1
	}
	return hops
}

func parseNode(c Candidate) (node, error) {
	v, err := semver.NewVersion(c.Version)
	if err != nil {
		return node{}, fmt.Errorf("version %q is not a semantic version", c.Version)
	}
	n := node{hop: Hop{Version: c.Version, UpgradeFrom: c.UpgradeFrom}, v: v}
	if c.UpgradeFrom != "" {
		if n.c, err = semver.NewConstraint(c.UpgradeFrom); err != nil {
			return node{}, fmt.Errorf("%s: upgradeFrom %q: %w", c.Version, c.UpgradeFrom, err)
		}
	}
	return n, nil
}

// Needed reports whether an upgrade from installed to target needs a
// walk: both are semantic versions, the target is newer, and its
// upgradeFrom (valid) does not admit installed. Anything else (admitted,
// a downgrade, a re-apply, not semver, a bad declaration) is the
// engine's to judge.
func Needed(installed string, target Candidate) bool {
	from, err := semver.NewVersion(installed)
	if err != nil || target.UpgradeFrom == "" {
		return false
	}
	n, err := parseNode(target)
	return err == nil && n.v.GreaterThan(from) && !n.admits(from)
}
