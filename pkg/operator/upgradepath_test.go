package operator

import (
	"slices"
	"testing"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
)

// status.upgradePath describes the upgrade to the current target only:
// kept while the walk is under way and once it ended, cleared when the
// target changes or the walk is left half-way.
func TestSettleUpgradePath(t *testing.T) {
	walk := []string{"v1.0.0", "v2.0.0", "v3.0.0"}
	for _, c := range []struct {
		name     string
		policy   v1alpha1.UpgradePathPolicy
		deployed string
		target   string
		keep     bool
	}{
		{"under way", v1alpha1.UpgradePathWalk, "v2.0.0", "v3.0.0", true},
		{"ended", v1alpha1.UpgradePathWalk, "v3.0.0", "v3.0.0", true},
		{"ended, then Refuse", v1alpha1.UpgradePathRefuse, "v3.0.0", "v3.0.0", true},
		{"ended, then a new version", v1alpha1.UpgradePathWalk, "v3.0.0", "v3.1.0", false},
		{"rollback", v1alpha1.UpgradePathWalk, "v3.0.0", "v2.0.0", false},
		{"left half-way", "", "v2.0.0", "v3.0.0", false},
		{"another target half-way", v1alpha1.UpgradePathWalk, "v2.0.0", "v2.1.0", false},
	} {
		in := &v1alpha1.Installation{}
		in.Spec.UpgradePath = c.policy
		in.Status.ObservedVersion = c.deployed
		in.Status.UpgradePath = slices.Clone(walk)
		settleUpgradePath(in, c.target)
		if kept := in.Status.UpgradePath != nil; kept != c.keep {
			t.Errorf("%s: upgradePath %v, want kept %t", c.name, in.Status.UpgradePath, c.keep)
		}
	}
}
