package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/health"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// appliedCRDs is a CRD step whose objects were applied: the API server
// establishes them while the steps that do not need their kinds run.
type appliedCRDs struct {
	step    plan.Step
	objs    []*unstructured.Unstructured
	results []apply.Result
	// defines holds the kind each object defines (ok false for the
	// step's Namespaces), by index.
	defines []definedKind
}

type definedKind struct {
	gk schema.GroupKind
	ok bool
}

// needed returns the indexes of the objects step must wait for: every one
// for a CRD step, else those defining a kind step writes (none when the
// step writes none of their kinds). A step that writes one CRD's kind
// waits for that CRD only: the others go on being established while it
// runs (KubeVirt's instancetypes need 2 of its 21 CRDs).
func (c *appliedCRDs) needed(step plan.Step) []int {
	if c == nil {
		return nil
	}
	var out []int
	if step.Stage == kinds.StageCRDs {
		for i := range c.objs {
			out = append(out, i)
		}
		return out
	}
	writes := map[schema.GroupKind]bool{}
	for _, it := range step.Items {
		writes[it.Object.GroupVersionKind().GroupKind()] = true
	}
	crds := 0
	for i, d := range c.defines {
		if d.ok {
			crds++
			if writes[d.gk] {
				out = append(out, i)
			}
		}
	}
	if len(out) > 0 && len(out) == crds {
		// All of the step's CRDs: with its Namespaces, the whole step.
		return c.needed(plan.Step{Stage: kinds.StageCRDs})
	}
	return out
}

// split returns the part of c at the indexes idx and the rest (nil when
// empty).
func (c *appliedCRDs) split(idx []int) (part, rest *appliedCRDs) {
	part = &appliedCRDs{step: c.step}
	rest = &appliedCRDs{step: c.step}
	in := map[int]bool{}
	for _, i := range idx {
		in[i] = true
	}
	for i := range c.objs {
		dst := rest
		if in[i] {
			dst = part
		}
		dst.objs = append(dst.objs, c.objs[i])
		dst.results = append(dst.results, c.results[i])
		dst.defines = append(dst.defines, c.defines[i])
	}
	if len(rest.objs) == 0 {
		rest = nil
	}
	return part, rest
}

// leaveCreatedCRDs drops from the CRD step still to settle the objects
// this run created, for a run that does not wait (Options.NoWait) at its
// end: no step writes their kinds any more (those that did waited for
// them), and a new CRD has no stored versions to migrate, so waiting for
// the API server to establish them would only delay the end of the run,
// as neither kubectl apply nor helm install without --wait does. CRDs
// this run updated are still waited for, for their stored versions.
func (r *run) leaveCreatedCRDs() {
	c := r.crds
	if c == nil {
		return
	}
	var keep []int
	for i, res := range c.results {
		if res.Action != apply.ActionCreate {
			keep = append(keep, i)
		}
	}
	if len(keep) > 0 {
		r.crds, _ = c.split(keep)
		return
	}
	r.crds = nil
	r.emit(Event{Type: EventStepReady, Step: c.step.Name})
}

// settleCRDs waits for the objects at idx of the applied CRD step (all of
// them when idx is nil), if any, until they are established, then makes
// their kinds known to the applier and migrates stored versions the CRDs
// drop; the rest stay for a later step or the end of the run. Its failure
// is the CRD step's, which is ready once all its objects are.
func (r *run) settleCRDs(ctx context.Context, idx []int) error {
	c := r.crds
	if c == nil {
		return nil
	}
	var rest *appliedCRDs
	if idx != nil {
		c, rest = c.split(idx)
	}
	r.crds = rest
	// A CRD's write response is judged only when it already shows the
	// CRD established (an update of an established one): a created CRD's
	// response has no conditions yet, and by now (a step or more later)
	// the API server has likely established it, so it is read instead of
	// waiting out a round. The wait's last copies serve the stored
	// versions' check below, which reads only their status.
	seen := map[strategy.ObjectRef]*unstructured.Unstructured{}
	var seenMu sync.Mutex
	err := r.wait(ctx, c.step, c.objs, c.results, waitHow{readyResponsesOnly: true, uncachedInterval: crdPollInterval, seen: func(live *unstructured.Unstructured) {
		seenMu.Lock()
		defer seenMu.Unlock()
		seen[strategy.RefOf(live)] = health.Essentials(live) // status, not KubeVirt's 8 MB of schemas
	}})
	if err == nil && written(c.results) {
		// Kinds of the new (or changed) CRDs are served now, or about to
		// be: discovery lists them shortly after they are established.
		err = r.waitServed(ctx, c)
	}
	if err == nil {
		// Even when this run wrote no CRD: an earlier one may have
		// written it and stopped before migrating (the wait's copies of
		// the CRDs, else reads from the cache when there is one).
		err = r.migrateStoredVersions(ctx, c.objs, seen)
	}
	if err != nil {
		r.emit(Event{Type: EventDegraded, Step: c.step.Name, Reason: err.Error()})
		return &StepError{Step: c.step.Name, Err: err}
	}
	if rest == nil {
		r.emit(Event{Type: EventStepReady, Step: c.step.Name})
	}
	return nil
}

// waitServed waits (within the step deadline) until discovery serves the
// kind of every CRD in c, asking it again (the applier's REST mapper reset)
// unless what it said last serves them all already: the API
// server adds a new CRD's group and version to discovery shortly after it
// reports the CRD established, and a mapping asked in between would take
// the kind for one the cluster does not serve, and skip the custom
// resources of the strategy's own CRD (seen once in make test-repeat,
// TestCRDsEstablishWhileLaterStepsRun).
func (r *run) waitServed(ctx context.Context, c *appliedCRDs) error {
	type kind struct {
		ref     strategy.ObjectRef
		version string
	}
	var want []kind
	for _, o := range c.objs {
		gvr, ok := strategy.DefinedResource(o) // not Namespaces; a CRD serving no version has nothing to map
		if !ok {
			continue
		}
		gk, _ := strategy.DefinedKind(o)
		want = append(want, kind{strategy.ObjectRef{Group: gk.Group, Kind: gk.Kind}, gvr.Version})
	}
	missing := ""
	served := func() (bool, error) {
		for _, k := range want {
			_, err := r.a.Mapping(k.ref, k.version)
			var notServed *apply.NotServedError
			if errors.As(err, &notServed) {
				missing = k.ref.GroupKind().String()
				return false, nil
			}
			if err != nil {
				return false, err
			}
		}
		return true, nil
	}
	// A recreated CRD (an immutable field changed, its scope) may map
	// as it did before: discovery is asked again whatever it said last.
	asked := slices.ContainsFunc(c.results, func(res apply.Result) bool { return res.Action == apply.ActionRecreate })
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, r.opts.StageDeadline, true, func(ctx context.Context) (bool, error) {
		if !asked {
			asked = true
			// What discovery said last may serve them all already (a
			// step before waited for its CRDs since they were
			// established): no need to ask again.
			if ok, err := served(); ok || err != nil {
				return ok, err
			}
		}
		r.a.ResetMapper()
		return served()
	})
	if err != nil && missing != "" && ctx.Err() == nil {
		return fmt.Errorf("kind %s of an established CRD is not served by discovery: %w", missing, err)
	}
	return err
}

// written reports whether any result wrote its object.
func written(results []apply.Result) bool {
	for _, res := range results {
		switch res.Action {
		case apply.ActionCreate, apply.ActionUpdate, apply.ActionRecreate:
			return true
		}
	}
	return false
}

// newAppliedCRDs holds the CRD step just applied, with the kind each of
// its objects defines (none for the step's Namespaces), for the steps
// after it to settle (see needed).
func newAppliedCRDs(step plan.Step, objs []*unstructured.Unstructured, results []apply.Result) *appliedCRDs {
	c := &appliedCRDs{step: step, objs: objs, results: results}
	for _, o := range objs {
		gk, ok := strategy.DefinedKind(o)
		c.defines = append(c.defines, definedKind{gk: gk, ok: ok})
	}
	return c
}
