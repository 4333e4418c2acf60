package plan_test

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

func hookObj(apiVersion, kind, name string, ann map[string]string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{}
	o.SetAPIVersion(apiVersion)
	o.SetKind(kind)
	o.SetName(name)
	o.SetAnnotations(ann)
	return o
}

func names(hooks []plan.Hook) string {
	var out []string
	for _, h := range hooks {
		out = append(out, h.Object.GetKind()+"/"+h.Object.GetName())
	}
	return strings.Join(out, " ")
}

// Hooks of a phase run by weight (an integer; anything else is 0, as in
// Helm), then name, then kind in the kind table's order; hooks of other
// phases are not among them.
func TestPhaseHooksInHelmsOrder(t *testing.T) {
	hook := func(kind, name, events, weight string) *unstructured.Unstructured {
		api := "v1"
		switch kind {
		case "Job":
			api = "batch/v1"
		case "Role":
			api = "rbac.authorization.k8s.io/v1"
		}
		ann := map[string]string{metakeys.HelmHookAnnotation: events}
		if weight != "" {
			ann[metakeys.HelmHookWeightAnnotation] = weight
		}
		return hookObj(api, kind, name, ann)
	}
	s := &strategy.Strategy{Objects: []*unstructured.Unstructured{
		hook("Job", "patch", "post-install,post-upgrade", "2"),
		hook("Job", "create", "pre-install, pre-upgrade", "1"),
		hook("ServiceAccount", "admission", "pre-install,post-install", "-1"),
		hook("Role", "admission", "pre-install,post-install", "-1"),
		hook("ConfigMap", "zeta", "pre-install", ""),
		hook("ConfigMap", "alpha", "pre-install", "not-a-number"),
		hook("Job", "migrate", "pre-upgrade", "-5"),
		hook("Pod", "test", "test", ""),
		hook("ConfigMap", "goodbye", "pre-delete", ""),
		hookObj("v1", "ConfigMap", "release-object", nil),
	}}
	rest, hooks := plan.SplitHooks(s)
	if len(rest.Objects) != 1 || rest.Objects[0].GetName() != "release-object" {
		t.Fatalf("release objects %v, want release-object alone", rest.Objects)
	}
	if len(hooks) != 9 {
		t.Fatalf("%d hooks, want 9", len(hooks))
	}
	for phase, want := range map[plan.HookPhase]string{
		plan.PreInstall:   "ServiceAccount/admission Role/admission ConfigMap/alpha ConfigMap/zeta Job/create",
		plan.PostInstall:  "ServiceAccount/admission Role/admission Job/patch",
		plan.PreUpgrade:   "Job/migrate Job/create",
		plan.PostUpgrade:  "Job/patch",
		plan.PreRollback:  "",
		plan.PreDelete:    "ConfigMap/goodbye",
		plan.PostDelete:   "",
		plan.PostRollback: "",
	} {
		if got := names(plan.PhaseHooks(hooks, phase)); got != want {
			t.Errorf("%s: %q, want %q", phase, got, want)
		}
	}
	// Reordering the input changes nothing.
	rev := make([]plan.Hook, len(hooks))
	for i, h := range hooks {
		rev[len(hooks)-1-i] = h
	}
	if a, b := names(plan.PhaseHooks(rev, plan.PreInstall)), names(plan.PhaseHooks(hooks, plan.PreInstall)); a != b {
		t.Errorf("order depends on input order: %q vs %q", a, b)
	}
}

// A hook's delete policies are Helm's: listed ones, else
// before-hook-creation.
func TestHookDeletePolicies(t *testing.T) {
	h := plan.HookOf(hookObj("batch/v1", "Job", "j", map[string]string{metakeys.HelmHookAnnotation: "post-install", metakeys.HelmHookDeletePolicyAnnotation: "hook-succeeded, hook-failed"}))
	if !reflect.DeepEqual(h.DeletePolicies, []string{plan.HookSucceeded, plan.HookFailed}) || h.Deletes(plan.HookBeforeCreation) {
		t.Errorf("policies %v", h.DeletePolicies)
	}
	d := plan.HookOf(hookObj("batch/v1", "Job", "j", map[string]string{metakeys.HelmHookAnnotation: "post-install"}))
	if !reflect.DeepEqual(d.DeletePolicies, []string{plan.HookBeforeCreation}) {
		t.Errorf("default policies %v", d.DeletePolicies)
	}
	if s, hooks := plan.SplitHooks(&strategy.Strategy{Objects: []*unstructured.Unstructured{hookObj("v1", "ConfigMap", "c", nil)}}); hooks != nil || len(s.Objects) != 1 {
		t.Errorf("a strategy without hooks: %v %v", s.Objects, hooks)
	}
}

// The plan of an install shows the pre-install phase before the steps and
// post-install after them, each in Helm's order; a phase that will not run
// says why.
func TestPlanHooks(t *testing.T) {
	_, hooks := plan.SplitHooks(&strategy.Strategy{Objects: []*unstructured.Unstructured{
		hookObj("batch/v1", "Job", "b", map[string]string{metakeys.HelmHookAnnotation: "pre-install", metakeys.HelmHookWeightAnnotation: "5"}),
		hookObj("batch/v1", "Job", "a", map[string]string{metakeys.HelmHookAnnotation: "pre-install,post-install", metakeys.HelmHookWeightAnnotation: "7"}),
	}})
	p := &plan.Plan{Hooks: plan.PlanHooks(hooks, plan.HookInstall, "")}
	var b strings.Builder
	if err := p.Print(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	var lines []string
	for _, l := range strings.Split(out, "\n")[2:] {
		if f := strings.Fields(l); len(f) >= 4 {
			lines = append(lines, strings.Join(f[:4], " "))
		}
	}
	want := []string{"hook pre-install run Job.batch/b", "hook pre-install run Job.batch/a", "hook post-install run Job.batch/a"}
	if !reflect.DeepEqual(lines, want) {
		t.Errorf("plan:\n%s", out)
	}
	if got := plan.PlanHooks(hooks, plan.HookUpgrade, ""); got != nil {
		t.Errorf("upgrade phases %v, want none", got)
	}
	skipped := plan.PlanHooks(hooks, plan.HookInstall, "ran")
	if len(skipped) != 2 || skipped[0].Skipped != "ran" {
		t.Errorf("skipped phases %+v", skipped)
	}
}
