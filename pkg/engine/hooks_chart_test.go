package engine_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/render"
	"github.com/installstrategy/installstrategy/pkg/render/helmchart"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// ingress-nginx 4.15.1 as shipped: its admission webhook's certificate
// Jobs are hooks (create-secret pre-install,pre-upgrade; patch
// post-install,post-upgrade; their ServiceAccount and RBAC in both phases
// at weight -1 or 1 above the Jobs), every one before-hook-creation,
// hook-succeeded, the Jobs with ttlSecondsAfterFinished: 0. An install
// runs the pre-install hooks in Helm's order before any of the release's
// objects and the post-install ones after all of them, waits for both
// Jobs (kwok completes their pods), deletes every hook after its phase,
// and records none in the inventory. An upgrade to the same chart with
// another value runs the upgrade hooks the same way.
func TestIngressNginxAdmissionHooks(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	chart := filepath.Join("..", "render", "testdata", "charts", "ingress-nginx-4.15.1.tgz")
	load := func(version string, set ...string) *strategy.Strategy {
		res, err := helmchart.Helm(ctx, chart, render.HelmOptions{Namespace: ns, KubeVersion: "v1.36.0", Set: set})
		if err != nil {
			t.Fatal(err)
		}
		s, _, err := strategy.Parse(res.Manifests, strategy.ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Identity = strategy.Identity{Version: version}
		return s
	}
	owner := inventory.Owner{Namespace: ns, Name: "ingress-nginx"}
	for _, c := range []struct {
		version   string
		set       []string
		pre, post plan.HookPhase
	}{
		{"4.15.1", nil, plan.PreInstall, plan.PostInstall},
		{"4.15.1-debug", []string{"controller.logLevel=3"}, plan.PreUpgrade, plan.PostUpgrade},
	} {
		s := load(c.version, c.set...)
		_, hooks := plan.SplitHooks(s)
		var want []string
		for _, phase := range []plan.HookPhase{c.pre, c.post} {
			for _, h := range plan.PhaseHooks(hooks, phase) {
				want = append(want, "hook "+string(phase)+" apply "+h.Ref().Kind+"/"+h.Ref().Name)
			}
		}
		if len(want) != 12 || !strings.HasSuffix(want[5], "Job/ingress-nginx-admission-create") || !strings.HasSuffix(want[11], "Job/ingress-nginx-admission-patch") {
			t.Fatalf("%s: hooks in Helm's order:\n%s\nwant 6 a phase, each ending with its Job", c.version, strings.Join(want, "\n"))
		}
		var log hookLog
		if _, err := engine.Run(ctx, env.Config, s, engine.Options{Owner: owner, StageDeadline: 3 * time.Minute, OnEvent: log.on}); err != nil {
			t.Fatalf("%s: %v", c.version, err)
		}
		got := hooksOnly(log.take())
		t.Logf("%s:\n%s", c.version, strings.Join(got, "\n"))
		var applied []string
		firstRelease, lastRelease := -1, -1
		for i, l := range got {
			if strings.HasPrefix(l, "release ") {
				if firstRelease < 0 {
					firstRelease = i
				}
				lastRelease = i
			}
			if strings.HasPrefix(l, "hook ") && strings.Contains(l, " apply ") {
				applied = append(applied, l)
			}
		}
		if !slices.Equal(applied, want) {
			t.Errorf("%s: hooks applied:\n%s\nwant:\n%s", c.version, strings.Join(applied, "\n"), strings.Join(want, "\n"))
		}
		if c.pre == plan.PreInstall {
			// On install every release object is applied between the
			// phases; an upgrade may apply none (only what changed).
			for i, l := range got {
				pre := strings.HasPrefix(l, "hook "+string(c.pre))
				post := strings.HasPrefix(l, "hook "+string(c.post))
				if (pre && i > firstRelease) || (post && i < lastRelease) || firstRelease < 0 {
					t.Errorf("%s: %q at %d, release objects from %d to %d", c.version, l, i, firstRelease, lastRelease)
				}
			}
		}
		// hook-succeeded: no hook object is left.
		for _, h := range hooks {
			if live, err := env.Dynamic.Resource(gvr(h.Ref().Kind)).Namespace(h.Object.GetNamespace()).Get(ctx, h.Ref().Name, metav1.GetOptions{}); err == nil && live.GetDeletionTimestamp() == nil {
				t.Errorf("%s: hook %s left", c.version, h.Ref())
			}
		}
		inv, err := inventory.NewStore(env.Kube).Get(ctx, owner)
		if err != nil {
			t.Fatal(err)
		}
		for ref := range inv.Entries {
			if slices.ContainsFunc(hooks, func(h plan.Hook) bool { return h.Ref().Kind == ref.Kind && h.Ref().Name == ref.Name }) {
				t.Errorf("%s: hook %s in the inventory", c.version, ref)
			}
		}
	}
}
