package plan

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// HookPhase is a Helm hook event a reconcile runs.
type HookPhase string

// The hook phases, as Helm names them.
const (
	PreInstall   HookPhase = "pre-install"
	PostInstall  HookPhase = "post-install"
	PreUpgrade   HookPhase = "pre-upgrade"
	PostUpgrade  HookPhase = "post-upgrade"
	PreRollback  HookPhase = "pre-rollback"
	PostRollback HookPhase = "post-rollback"
	PreDelete    HookPhase = "pre-delete"
	PostDelete   HookPhase = "post-delete"
)

// HookPhases are every phase a reconcile or an uninstall runs.
var HookPhases = []HookPhase{PreInstall, PostInstall, PreUpgrade, PostUpgrade, PreRollback, PostRollback, PreDelete, PostDelete}

// Hook delete policies (metakeys.HelmHookDeletePolicyAnnotation).
const (
	// HookBeforeCreation deletes the hook's previous object before it is
	// created again; the policy of a hook that names none.
	HookBeforeCreation = "before-hook-creation"
	// HookSucceeded deletes the hook's object once every hook of its phase
	// succeeded (or, when a later hook fails, once that one failed).
	HookSucceeded = "hook-succeeded"
	// HookFailed deletes the hook's object when it failed.
	HookFailed = "hook-failed"
)

// Hook is a hook object of a strategy.
type Hook struct {
	Object *unstructured.Unstructured
	// Phases are the phases it runs in (events other than HookPhases, such
	// as Helm's test events, are left out: a hook may run in none).
	Phases []HookPhase
	// Weight orders the hooks of a phase (metakeys.HelmHookWeightAnnotation).
	Weight int
	// DeletePolicies are its delete policies; never empty (a hook that
	// names none has HookBeforeCreation).
	DeletePolicies []string
}

// Ref names the hook's object.
func (h Hook) Ref() strategy.ObjectRef { return strategy.RefOf(h.Object) }

// Deletes reports whether the hook has delete policy p.
func (h Hook) Deletes(p string) bool { return slices.Contains(h.DeletePolicies, p) }

func (h Hook) String() string {
	return fmt.Sprintf("%s (weight %d, delete policy %s)", h.Ref(), h.Weight, strings.Join(h.DeletePolicies, ","))
}

// IsHook reports whether obj is a hook: it carries metakeys.HelmHookAnnotation.
func IsHook(obj *unstructured.Unstructured) bool {
	_, ok := obj.GetAnnotations()[metakeys.HelmHookAnnotation]
	return ok
}

// HookOf reads a hook object's annotations as Helm does: events split at
// commas and trimmed, a weight that is not an integer is 0, no delete
// policy is HookBeforeCreation.
func HookOf(obj *unstructured.Unstructured) Hook {
	a := obj.GetAnnotations()
	h := Hook{Object: obj}
	for _, e := range strings.Split(a[metakeys.HelmHookAnnotation], ",") {
		p := HookPhase(strings.TrimSpace(e))
		if slices.Contains(HookPhases, p) && !slices.Contains(h.Phases, p) {
			h.Phases = append(h.Phases, p)
		}
	}
	h.Weight, _ = strconv.Atoi(strings.TrimSpace(a[metakeys.HelmHookWeightAnnotation]))
	for _, p := range strings.Split(a[metakeys.HelmHookDeletePolicyAnnotation], ",") {
		if p = strings.TrimSpace(p); p != "" && !slices.Contains(h.DeletePolicies, p) {
			h.DeletePolicies = append(h.DeletePolicies, p)
		}
	}
	if len(h.DeletePolicies) == 0 {
		h.DeletePolicies = []string{HookBeforeCreation}
	}
	return h
}

// SplitHooks returns s without its hook objects (the release's objects,
// which the steps apply, the inventory records and prune deletes), and
// the hooks. s is returned as is when it holds no hook.
func SplitHooks(s *strategy.Strategy) (*strategy.Strategy, []Hook) {
	if !slices.ContainsFunc(s.Objects, IsHook) {
		return s, nil
	}
	out := &strategy.Strategy{Identity: s.Identity}
	var hooks []Hook
	for _, o := range s.Objects {
		if IsHook(o) {
			hooks = append(hooks, HookOf(o))
			continue
		}
		out.Objects = append(out.Objects, o)
	}
	return out, hooks
}

// PhaseHooks returns the hooks that run in phase, in the order Helm runs
// them: by weight, then by name, then by kind (the kind table's order,
// which Helm's install order of the manifests decides when weight and
// name are equal), then by namespace.
func PhaseHooks(hooks []Hook, phase HookPhase) []Hook {
	var out []Hook
	for _, h := range hooks {
		if slices.Contains(h.Phases, phase) {
			out = append(out, h)
		}
	}
	slices.SortStableFunc(out, func(a, b Hook) int {
		if a.Weight != b.Weight {
			return a.Weight - b.Weight
		}
		if c := strings.Compare(a.Object.GetName(), b.Object.GetName()); c != 0 {
			return c
		}
		ga, gb := a.Object.GroupVersionKind().GroupKind(), b.Object.GroupVersionKind().GroupKind()
		if ga != gb {
			if kinds.Less(ga, gb) {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Object.GetNamespace(), b.Object.GetNamespace())
	})
	return out
}

// HookAction says which hook phases surround what a reconcile does.
type HookAction string

// The actions hooks surround.
const (
	HookInstall  HookAction = "install"
	HookUpgrade  HookAction = "upgrade"
	HookRollback HookAction = "rollback"
	HookDelete   HookAction = "delete"
)

// PhasesOf returns the phase before and the phase after an action.
func PhasesOf(a HookAction) (pre, post HookPhase) {
	switch a {
	case HookInstall:
		return PreInstall, PostInstall
	case HookUpgrade:
		return PreUpgrade, PostUpgrade
	case HookRollback:
		return PreRollback, PostRollback
	default:
		return PreDelete, PostDelete
	}
}

// HookPlan is a hook phase of a plan: the hooks it would run, in order.
type HookPlan struct {
	Phase HookPhase `json:"phase"`
	// Post is true for a phase run after the steps (post-*).
	Post  bool   `json:"post,omitempty"`
	Hooks []Item `json:"hooks"`
	// Skipped, when set, says why the phase would not run.
	Skipped string `json:"skipped,omitempty"`
}

// PlanHooks returns the hook phases of action that have hooks, in Helm's
// order within each; skipped, when not empty, says why none would run.
func PlanHooks(hooks []Hook, action HookAction, skipped string) []HookPlan {
	pre, post := PhasesOf(action)
	var out []HookPlan
	for _, phase := range []HookPhase{pre, post} {
		ordered := PhaseHooks(hooks, phase)
		if len(ordered) == 0 {
			continue
		}
		hp := HookPlan{Phase: phase, Post: phase == post, Skipped: skipped}
		for _, h := range ordered {
			hp.Hooks = append(hp.Hooks, Item{Ref: h.Ref(), Object: h.Object, Reason: fmt.Sprintf("weight %d, delete policy %s", h.Weight, strings.Join(h.DeletePolicies, ","))})
		}
		out = append(out, hp)
	}
	return out
}
