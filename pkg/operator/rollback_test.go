package operator

import (
	"testing"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// TestRollbackIsAReturnToARolledOutStrategy: a rollout is a rollback (its
// Helm hooks run as helm rollback's) only when it moves from the observed
// strategy to one status.history records with the same identity and digest
// (or, for a chart, the same chart and values).
func TestRollbackIsAReturnToARolledOutStrategy(t *testing.T) {
	v1 := strategy.Identity{Version: "1.0.0", Registry: "r", Identifier: "id-1"}
	v2 := strategy.Identity{Version: "2.0.0", Registry: "r", Identifier: "id-2"}
	rev := func(id strategy.Identity, digest string) v1alpha1.StrategyRevision {
		return v1alpha1.StrategyRevision{Version: id.Version, Registry: id.Registry, Identifier: id.Identifier, Digest: digest}
	}
	helmRev := func(id strategy.Identity, digest, chart, values string) v1alpha1.StrategyRevision {
		r := rev(id, digest)
		r.Source, r.Chart, r.ValuesDigest = v1alpha1.StrategySourceHelm, chart, values
		return r
	}
	inst := func(observed strategy.Identity, loaded *v1alpha1.StrategyStatus, history ...v1alpha1.StrategyRevision) *v1alpha1.Installation {
		in := &v1alpha1.Installation{}
		in.Status.ObservedVersion, in.Status.ObservedRegistry, in.Status.ObservedIdentifier = observed.Version, observed.Registry, observed.Identifier
		in.Status.Phase = v1alpha1.PhaseDeployed
		in.Status.Strategy = loaded
		in.Status.History = history
		return in
	}
	loaded := func(digest string) *v1alpha1.StrategyStatus {
		return &v1alpha1.StrategyStatus{Source: v1alpha1.StrategySourceConfigMap, Digest: digest}
	}
	chart := func(digest, chart, values string) *v1alpha1.StrategyStatus {
		return &v1alpha1.StrategyStatus{Source: v1alpha1.StrategySourceHelm, Digest: digest, Chart: chart, ValuesDigest: values}
	}
	for _, tc := range []struct {
		name   string
		in     *v1alpha1.Installation
		target strategy.Identity
		want   bool
	}{
		{"back to the strategy rolled out before", inst(v2, loaded("sha256:1"), rev(v2, "sha256:2"), rev(v1, "sha256:1")), v1, true},
		{"back to an older one, deeper in the history", inst(v2, loaded("sha256:1"), rev(v2, "sha256:2"), rev(v2, "sha256:0"), rev(v1, "sha256:1")), v1, true},
		{"the same identity, other text: not the strategy rolled out", inst(v2, loaded("sha256:other"), rev(v2, "sha256:2"), rev(v1, "sha256:1")), v1, false},
		{"the same version, another identifier", inst(v2, loaded("sha256:1"), rev(v2, "sha256:2"), rev(strategy.Identity{Version: "1.0.0", Registry: "r", Identifier: "id-x"}, "sha256:1")), v1, false},
		{"an upgrade to a strategy never rolled out", inst(v1, loaded("sha256:2"), rev(v1, "sha256:1")), v2, false},
		{"a resync of the deployed strategy", inst(v1, loaded("sha256:1"), rev(v1, "sha256:1")), v1, false},
		{"the first rollout", inst(strategy.Identity{}, loaded("sha256:1"), rev(v1, "sha256:1")), v1, false},
		{"no digest loaded", inst(v2, loaded(""), rev(v2, "sha256:2"), rev(v1, "")), v1, false},
		{"a chart and values rolled out before, rendered at another revision", inst(v2, chart("sha256:rev3", "h/c@sha256:a", "sha256:v"),
			helmRev(v2, "sha256:rev2", "h/c@sha256:a", "sha256:w"), helmRev(v1, "sha256:rev1", "h/c@sha256:a", "sha256:v")), v1, true},
		{"a chart without values rolled out before, rendered at another revision", inst(v2, chart("sha256:rev3", "h/c@sha256:a", ""),
			helmRev(v2, "sha256:rev2", "h/c@sha256:b", ""), helmRev(v1, "sha256:rev1", "h/c@sha256:a", "")), v1, true},
		{"a chart rolled out before with other values", inst(v2, chart("sha256:rev3", "h/c@sha256:a", "sha256:x"),
			helmRev(v2, "sha256:rev2", "h/c@sha256:a", "sha256:w"), helmRev(v1, "sha256:rev1", "h/c@sha256:a", "sha256:v")), v1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := newRollout(tc.in, tc.target).rollback; got != tc.want {
				t.Fatalf("rollback = %t, want %t", got, tc.want)
			}
		})
	}
}
