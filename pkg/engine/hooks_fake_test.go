package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// A hook phase (hookRunner) over a fake of the interface it takes
// (hookClient): the order of its writes and deletes, and what a failure
// stops. The cluster tests of hooks_test.go show the same with real Jobs.

// fakeHookClient holds live objects by ref and records what it is asked
// to do ("apply REF", "delete REF"). A written Job finishes as outcome
// says ("Complete" unless it names "Failed").
type fakeHookClient struct {
	owner   inventory.Owner
	live    map[string]*unstructured.Unstructured
	outcome map[string]string
	ops     []string
}

func (c *fakeHookClient) Get(_ context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return c.live[strategy.RefOf(obj).String()], nil
}

func (c *fakeHookClient) Apply(_ context.Context, obj *unstructured.Unstructured) (apply.Result, error) {
	ref := strategy.RefOf(obj).String()
	c.ops = append(c.ops, "apply "+ref)
	live := obj.DeepCopy()
	live.SetLabels(c.owner.Labels())
	live.SetUID(types.UID("uid-" + ref))
	if live.GetKind() == "Job" {
		cond := "Complete"
		if c.outcome[ref] != "" {
			cond = c.outcome[ref]
		}
		live.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": cond, "status": "True", "reason": "Test"}}}
	}
	c.live[ref] = live
	return apply.Result{Action: apply.ActionCreate, Object: live}, nil
}

func (c *fakeHookClient) Delete(_ context.Context, live *unstructured.Unstructured) error {
	ref := strategy.RefOf(live).String()
	c.ops = append(c.ops, "delete "+ref)
	delete(c.live, ref)
	return nil
}

func (c *fakeHookClient) WaitGone(context.Context, *unstructured.Unstructured) error { return nil }

var _ hookClient = (*fakeHookClient)(nil)

func TestHookPhaseWithFakes(t *testing.T) {
	owner := inventory.Owner{Namespace: "app", Name: "demo", Kind: inventory.KindPlugin}
	hook := func(kind, name string, weight int, policies ...string) plan.Hook {
		o := obj("batch/v1", kind, "app", name)
		if kind == "CustomResourceDefinition" {
			o = defining("example.com", "Widget", "widgets")
		}
		return plan.Hook{Object: o, Phases: []plan.HookPhase{plan.PreInstall}, Weight: weight, DeletePolicies: policies}
	}
	liveOf := func(h plan.Hook, labels map[string]string) *unstructured.Unstructured {
		o := h.Object.DeepCopy()
		o.SetLabels(labels)
		return o
	}
	migrate, seed := hook("Job", "migrate", 0, plan.HookBeforeCreation), hook("Job", "seed", 1, plan.HookSucceeded)
	check := hook("Job", "check", 2, plan.HookFailed)
	for _, tc := range []struct {
		name    string
		hooks   []plan.Hook
		live    []*unstructured.Unstructured
		outcome map[string]string
		ops     []string
		// wantErr is a substring of the phase's error; "" for none.
		wantErr string
	}{{
		name:  "hooks run by weight; hook-succeeded deletes once all succeeded",
		hooks: []plan.Hook{seed, migrate},
		ops:   []string{"apply Job.batch/app/migrate", "apply Job.batch/app/seed", "delete Job.batch/app/seed"},
	}, {
		name:  "before-hook-creation deletes the object of the run before",
		hooks: []plan.Hook{migrate},
		live:  []*unstructured.Unstructured{liveOf(migrate, owner.Labels())},
		ops:   []string{"delete Job.batch/app/migrate", "apply Job.batch/app/migrate"},
	}, {
		name:    "a failed hook stops the phase: its hook-failed policy and the hook-succeeded policies of the hooks before it apply",
		hooks:   []plan.Hook{check, seed, hook("Job", "later", 3)},
		outcome: map[string]string{"Job.batch/app/check": "Failed"},
		ops:     []string{"apply Job.batch/app/seed", "apply Job.batch/app/check", "delete Job.batch/app/check", "delete Job.batch/app/seed"},
		wantErr: "hook Job.batch/app/check: job failed",
	}, {
		name:    "a live object that is not the installation's is not deleted, nor is the hook run",
		hooks:   []plan.Hook{migrate},
		live:    []*unstructured.Unstructured{liveOf(migrate, map[string]string{"app": "theirs"})},
		wantErr: "is not installation app/demo's; not deleted",
	}, {
		name:  "a CRD is never deleted by a hook's policy",
		hooks: []plan.Hook{hook("CustomResourceDefinition", "", 0, plan.HookSucceeded)},
		ops:   []string{"apply CustomResourceDefinition.apiextensions.k8s.io/widgets.example.com"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c := &fakeHookClient{owner: owner, live: map[string]*unstructured.Unstructured{}, outcome: tc.outcome}
			for _, o := range tc.live {
				c.live[strategy.RefOf(o).String()] = o
			}
			var events []Event
			h := &hookRunner{a: c, owner: owner, hooks: tc.hooks, deadline: time.Minute, interval: time.Millisecond,
				emit: func(e Event) { events = append(events, e) }}
			err := h.run(t.Context(), plan.PreInstall)
			if !slices.Equal(c.ops, tc.ops) {
				t.Errorf("operations\n%s\nwant\n%s", strings.Join(c.ops, "\n"), strings.Join(tc.ops, "\n"))
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("phase failed: %v", err)
			case tc.wantErr != "":
				var se *StepError
				if !errors.As(err, &se) || se.Step != "hook "+string(plan.PreInstall) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want a *StepError of step hook %s saying %q", err, plan.PreInstall, tc.wantErr)
				}
				if events[len(events)-1].Type != EventDegraded {
					t.Errorf("last event %+v, want %s", events[len(events)-1], EventDegraded)
				}
			}
		})
	}
}
