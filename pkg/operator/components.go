package operator

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// components is status.components as the engine's events of one rollout
// tell it: each workload of the strategy that keeps pods running
// (kinds.KeepsPods), in strategy order, with the pod counts and the
// readiness the last wait round that checked it found
// (engine.EventProgress). Nothing is read from the cluster for it.
type components struct {
	list  []v1alpha1.ComponentStatus
	index map[strategy.ObjectRef]int
}

// newComponents starts from the strategy's workloads. A workload the
// previous status reports keeps its counts until an event says otherwise,
// and its RolledOver only when keepRolledOver (the rollout's target is the
// one it was rolled over to).
func newComponents(s *strategy.Strategy, prev []v1alpha1.ComponentStatus, keepRolledOver bool) *components {
	c := &components{index: map[strategy.ObjectRef]int{}}
	if s == nil {
		return c
	}
	old := map[[2]string]v1alpha1.ComponentStatus{}
	for _, p := range prev {
		old[[2]string{p.Kind, p.Name}] = p
	}
	for _, o := range s.Objects {
		if !kinds.KeepsPods(o.GroupVersionKind().GroupKind()) {
			continue
		}
		comp := v1alpha1.ComponentStatus{Name: o.GetName(), Kind: o.GetKind(), Role: string(plan.RoleOf(o, kinds.KubeVirtRoles()))}
		if p, ok := old[[2]string{comp.Kind, comp.Name}]; ok {
			comp.Desired, comp.Updated, comp.Ready = p.Desired, p.Updated, p.Ready
			comp.RolledOver = p.RolledOver && keepRolledOver
		}
		c.index[strategy.RefOf(o)] = len(c.list)
		c.list = append(c.list, comp)
	}
	return c
}

// observe records what e says of the components and reports whether
// anything changed: a workload written anew is rolling out until a wait
// round finds it ready; a round sets the counts and readiness of the
// workloads it checked.
func (c *components) observe(e engine.Event) bool {
	changed := false
	switch e.Type {
	case engine.EventApplied:
		i, ok := c.index[e.Ref]
		if !ok {
			return false
		}
		switch e.Action {
		case apply.ActionCreate, apply.ActionUpdate, apply.ActionRecreate:
			changed = c.list[i].RolledOver
			c.list[i].RolledOver = false
		}
	case engine.EventProgress:
		for _, st := range e.Progress {
			i, ok := c.index[st.Ref]
			if !ok {
				continue
			}
			next := c.list[i]
			next.RolledOver = st.Ready
			if n := st.Replicas; n != nil {
				next.Desired, next.Updated, next.Ready = n.Desired, n.Updated, n.Ready
			}
			if next != c.list[i] {
				c.list[i], changed = next, true
			}
		}
	}
	return changed
}

// status returns a copy of the components for the status.
func (c *components) status() []v1alpha1.ComponentStatus {
	if len(c.list) == 0 {
		return nil
	}
	out := make([]v1alpha1.ComponentStatus, len(c.list))
	copy(out, c.list)
	return out
}

// countObject counts what e wrote or deleted in the objects metric.
func (m *Metrics) countObject(e engine.Event) {
	switch e.Type {
	case engine.EventApplied:
		m.Objects.WithLabelValues(e.Ref.Kind, string(e.Action)).Inc()
	case engine.EventPruned:
		m.Objects.WithLabelValues(e.Ref.Kind, string(apply.ActionDelete)).Inc()
	}
}

// runEvents turns the engine's events of one rollout into what the
// operator reports: the objects metric, Events of the Installation, log
// lines, and status.components, which it writes at most once per
// ProgressInterval while steps wait (at once when a step is ready).
type runEvents struct {
	r         *Reconciler
	s         *state
	ctx       context.Context
	comps     *components
	interval  time.Duration
	lastWrite time.Time
	dirty     bool
}

func (r *Reconciler) newRunEvents(ctx context.Context, s *state, keepRolledOver bool) *runEvents {
	interval := r.opts.ProgressInterval
	if interval <= 0 {
		interval = DefaultProgressInterval
	}
	w := &runEvents{r: r, s: s, ctx: ctx, interval: interval,
		comps: newComponents(s.Strategy, s.Installation.Status.Components, keepRolledOver)}
	w.dirty = w.setStatus()
	return w
}

// setStatus puts the components into the state's status; it reports
// whether that changed it.
func (w *runEvents) setStatus() bool {
	comps, changed := w.comps.status(), false
	w.s.update(func(in *v1alpha1.Installation) {
		if !equalComponents(in.Status.Components, comps) {
			in.Status.Components, changed = comps, true
		}
	})
	return changed
}

// observe is the run's engine.Options.OnEvent.
func (w *runEvents) observe(e engine.Event) {
	w.r.metrics.countObject(e)
	w.report(e)
	if w.comps.observe(e) && w.setStatus() {
		w.dirty = true
	}
	switch e.Type {
	case engine.EventProgress, engine.EventCanary:
		if time.Since(w.lastWrite) < w.interval {
			return
		}
	case engine.EventStepReady:
	default:
		return
	}
	if !w.dirty {
		return
	}
	w.dirty, w.lastWrite = false, time.Now()
	if err := w.r.writeStatus(w.ctx, w.s); err != nil && w.ctx.Err() == nil {
		w.s.log.V(1).Info("progress not written", "error", err.Error())
	}
}

// report turns an event into an Event of the Installation or a log line.
func (w *runEvents) report(e engine.Event) {
	r, in, log := w.r, w.s.Installation, w.s.log
	switch e.Type {
	case engine.EventPruned:
		r.event(in, corev1.EventTypeNormal, v1alpha1.ReasonPruned, "Prune", "deleted %s", e.Ref)
	case engine.EventKept:
		r.event(in, corev1.EventTypeNormal, v1alpha1.ReasonKept, "Prune", "kept %s: %s", e.Ref, e.Reason)
	case engine.EventCanary:
		r.event(in, corev1.EventTypeNormal, v1alpha1.ReasonCanary, "Rollout", "%s: %s", e.Ref, e.Reason)
	case engine.EventStaleCache:
		log.Info("stale cache", "step", e.Step, "object", e.Ref.String(), "reason", e.Reason)
		r.event(in, corev1.EventTypeWarning, v1alpha1.ReasonStaleCache, "Rollout", "%s: %s", e.Ref, e.Reason)
	case engine.EventStepStarted:
		log.V(1).Info("step started", "step", e.Step)
	case engine.EventStepReady:
		log.V(1).Info("step ready", "step", e.Step)
	}
}

func equalComponents(a, b []v1alpha1.ComponentStatus) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
