// Package plan owns the order in which a strategy is reconciled and what
// would change: it splits a strategy into steps (the kind table's stages,
// with workloads in waves by role and upgrade path, then prune), and, given
// the live cluster, says per object whether it would be created, updated
// (with the fields that change), left unchanged, skipped (kind not served,
// with the reason) or deleted (pruned). Building and printing a plan never
// writes to the cluster; where only the server knows the answer (whether a
// write is accepted, or needs a recreate) it asks with a server-side dry run.
package plan

import (
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/crdsafety"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// Path is the workload rollout order, chosen by comparing the target version
// with the observed one.
type Path string

const (
	// PathCreate (fresh install or rollback): api first, then controllers,
	// then handlers (DaemonSets).
	PathCreate Path = "create"
	// PathUpdate (upgrade, or versions that are not semver): handlers first
	// (canary), then controllers, then api last.
	PathUpdate Path = "update"
)

// ChoosePath returns PathCreate when nothing is observed or the target is an
// older semantic version than the observed one (a rollback), PathUpdate
// otherwise, including when either version is not semver.
func ChoosePath(target, observed string) Path {
	if observed == "" {
		return PathCreate
	}
	t, err1 := version.ParseSemantic(target)
	o, err2 := version.ParseSemantic(observed)
	if err1 != nil || err2 != nil {
		return PathUpdate
	}
	if t.LessThan(o) {
		return PathCreate
	}
	return PathUpdate
}

// RoleOf returns the role of a workload: its metakeys.RoleAnnotation, else
// its name in roles (e.g. kinds.KubeVirtRoles()), else its kind's role in
// the kind table (kinds.RoleOf).
func RoleOf(obj *unstructured.Unstructured, roles map[string]kinds.Role) kinds.Role {
	return kinds.RoleOf(obj.GroupVersionKind().GroupKind(), obj.GetName(), obj.GetAnnotations()[metakeys.RoleAnnotation], roles)
}

// waves returns the workload roles in rollout order for a path.
func waves(p Path) []kinds.Role {
	if p == PathCreate {
		return []kinds.Role{kinds.RoleAPI, kinds.RoleController, kinds.RoleHandler}
	}
	return []kinds.Role{kinds.RoleHandler, kinds.RoleController, kinds.RoleAPI}
}

// Item is one object of a plan and what would happen to it.
type Item struct {
	Ref strategy.ObjectRef `json:"ref"`
	// Action is empty until the plan is compared with the cluster.
	Action apply.Action `json:"action,omitempty"`
	Reason string       `json:"reason,omitempty"`
	// Changes lists the fields an update changes.
	Changes []apply.Change `json:"changes,omitempty"`
	// Object is the strategy object (nil for prune items).
	Object *unstructured.Unstructured `json:"-"`
	// Live is the live object, nil when absent.
	Live *unstructured.Unstructured `json:"-"`
}

// Step is a group of objects written together; the reconciler waits until
// every one is ready before the next step.
type Step struct {
	// Name is the stage name, with "/role" for workload waves, or "prune".
	Name  string      `json:"name"`
	Stage kinds.Stage `json:"-"`
	// Role is set for workload waves.
	Role  kinds.Role `json:"role,omitempty"`
	Items []Item     `json:"items"`
}

// Plan is the ordered steps that make a cluster match a strategy.
type Plan struct {
	Target   strategy.Identity `json:"target"`
	Observed strategy.Identity `json:"observed"`
	Path     Path              `json:"path"`
	Steps    []Step            `json:"steps"`
	// Prune lists objects to delete after the rollover, in deletion order.
	Prune []Item `json:"prune,omitempty"`
	// Blocked, when set, says why a reconcile would write nothing at all:
	// the strategy's cluster-scoped objects are claimed by another
	// installation (pkg/engine's ClaimedError). The steps still show
	// what each object would do once the claim is released.
	Blocked string `json:"blocked,omitempty"`
	// CRDSafety lists the unsafe changes of the strategy's CRDs against
	// the live ones and their stored objects (pkg/crdsafety): those not
	// Allowed by an override make a reconcile refuse before any write.
	CRDSafety []crdsafety.Finding `json:"crdSafety,omitempty"`
	// Unmet lists the strategy's declared requirements the cluster does
	// not meet (strategy.Requirements): a reconcile refuses before any
	// write while one is.
	Unmet []string `json:"unmet,omitempty"`
	// Hooks are the Helm hook phases around the steps (PlanHooks): the
	// pre-* phase runs before the first step, the post-* phase after the
	// last one, before prune.
	Hooks []HookPlan `json:"hooks,omitempty"`
}

// Refused returns the CRD changes a reconcile would refuse.
func (p *Plan) Refused() []crdsafety.Finding { return crdsafety.Refused(p.CRDSafety) }

// PruneStep is the name of the step that deletes what the strategy no
// longer holds.
const PruneStep = "prune"

// Options tunes Build. The zero value names no workloads' roles and has
// an empty observed identity (a fresh install: the create path).
type Options struct {
	// Observed is the identity the cluster runs now.
	Observed strategy.Identity
	// Roles maps workload names to roles, for workloads without a
	// metakeys.RoleAnnotation (kinds.KubeVirtRoles() for KubeVirt's); a
	// workload in neither has its kind's role (kinds.Info.Role).
	Roles map[string]kinds.Role
}

// Build orders a strategy's objects into steps without looking at a
// cluster. Every stage of the kind table is a step (empty ones are left
// out), except workloads, which are one step per role in the path's order.
func Build(s *strategy.Strategy, opts Options) *Plan {
	p := &Plan{Target: s.Identity, Observed: opts.Observed, Path: ChoosePath(s.Identity.Version, opts.Observed.Version)}
	byStage := map[kinds.Stage][]Item{}
	byRole := map[kinds.Role][]Item{}
	for _, o := range s.Objects {
		info, _ := kinds.Lookup(o.GroupVersionKind().GroupKind())
		it := Item{Ref: strategy.RefOf(o), Object: o}
		if info.Stage == kinds.StageWorkloads {
			r := RoleOf(o, opts.Roles)
			byRole[r] = append(byRole[r], it)
			continue
		}
		byStage[info.Stage] = append(byStage[info.Stage], it)
	}
	for _, st := range kinds.Stages() {
		if st != kinds.StageWorkloads {
			if items := byStage[st]; len(items) > 0 {
				p.Steps = append(p.Steps, Step{Name: st.String(), Stage: st, Items: items})
			}
			continue
		}
		seen := map[kinds.Role]bool{}
		for _, r := range waves(p.Path) {
			seen[r] = true
			if items := byRole[r]; len(items) > 0 {
				p.Steps = append(p.Steps, Step{Name: st.String() + "/" + string(r), Stage: st, Role: r, Items: items})
			}
		}
		// Roles outside the three known ones roll out last, by name.
		var other []string
		for r := range byRole {
			if !seen[r] {
				other = append(other, string(r))
			}
		}
		sort.Strings(other)
		for _, r := range other {
			p.Steps = append(p.Steps, Step{Name: st.String() + "/" + r, Stage: st, Role: kinds.Role(r), Items: byRole[kinds.Role(r)]})
		}
	}
	return p
}
