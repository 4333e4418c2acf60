package reconcile_test

import (
	"strings"
	"testing"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/apply/applytest"
	"github.com/installstrategy/installstrategy/pkg/reconcile"
)

// A Reconciler reading from the informer cache: an upgrade still waits
// for the new rollout (a cached copy of the previous generation is not
// taken for it), and an idle run of the same strategy writes nothing and
// reads a handful of objects, not one each.
func TestCachedReconcilerUpgradeAndIdleRun(t *testing.T) {
	se := newSampleEnv(t)
	ctx := t.Context()
	cfg, rec := applytest.Record(se.env.Config)
	live := applytest.StartCache(t, cfg)
	base, err := reconcile.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rc := base.WithCache(live)
	run := func(version string, observed string) *reconcile.Result {
		t.Helper()
		s := sample(t, se.ns, version)
		opts := se.options(t)
		if observed != "" {
			opts.Observed = sample(t, se.ns, observed).Identity
		}
		res, err := rc.Run(ctx, s, opts)
		assertRolledOver(t, se, res, err)
		return res
	}
	run("v1.0.0", "")
	rec.Reset()
	upgrade := run("v1.1.0", "v1.0.0")
	// The rollout's health checks read the workloads' status from the
	// cache (their controllers' status writes included), not the API
	// server: only a check that comes before the informer has stored the
	// write goes there (6 reads when a copy was trusted only at the
	// version written; 1 here on a quiet machine).
	var workloadReads []string
	for _, r := range rec.Reads() {
		if strings.Contains(r.Path, "/deployments/") || strings.Contains(r.Path, "/daemonsets/") {
			workloadReads = append(workloadReads, r.Path)
		}
	}
	// The result keeps what happened to each object, not a second copy
	// of the objects.
	for _, res := range upgrade.Applied {
		if res.Object != nil {
			t.Errorf("the upgrade's result holds the object %s", res.Ref)
		}
	}
	t.Logf("upgrade: %d objects, workloads read one by one: %v", len(upgrade.Applied), workloadReads)
	if len(workloadReads) > 4 {
		t.Errorf("upgrade read workloads one by one %d times, want at most 4: %v", len(workloadReads), workloadReads)
	}
	// The cache has seen every object by now; an idle run of the same
	// strategy reads from it.
	rec.Reset()
	res := run("v1.1.0", "v1.1.0")
	if n := res.Count(apply.ActionUnchanged); n != len(res.Applied) {
		t.Errorf("idle run: %d of %d objects unchanged", n, len(res.Applied))
	}
	writes, reads := rec.Writes(), rec.Reads()
	t.Logf("idle run of %d objects: %d writes, %d reads: %v", len(res.Applied), len(writes), len(reads), reads)
	if len(writes) != 0 {
		t.Errorf("idle run wrote: %v", writes)
	}
	// Discovery (2), the inventory, and the namespaces merged into (not
	// the installation's, so not cached) are read; objects are not.
	if len(reads) > 6 {
		t.Errorf("idle run made %d reads, want at most 6", len(reads))
	}
}
