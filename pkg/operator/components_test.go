package operator

import (
	"errors"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/health"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

func obj(apiVersion, kind, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace("ns")
	u.SetName(name)
	return u
}

// status.components comes from the engine's events: the strategy's
// workloads that keep pods running, their counts and readiness from the
// last wait round, rolling out again once written anew.
func TestComponentsFromEvents(t *testing.T) {
	api, ds, job := obj("apps/v1", "Deployment", "api"), obj("apps/v1", "DaemonSet", "handler"), obj("batch/v1", "Job", "migrate")
	s := &strategy.Strategy{Objects: []*unstructured.Unstructured{obj("v1", "ConfigMap", "cm"), api, job, ds}}
	prev := []v1alpha1.ComponentStatus{{Name: "api", Kind: "Deployment", Desired: 2, Updated: 2, Ready: 2, RolledOver: true}}
	round := func(sts ...health.Status) engine.Event {
		return engine.Event{Type: engine.EventProgress, Progress: sts}
	}
	ready := func(o *unstructured.Unstructured, ok bool, d, u, r int32) health.Status {
		return health.Status{Ref: strategy.RefOf(o), Ready: ok, Replicas: &health.Replicas{Desired: d, Updated: u, Ready: r}}
	}
	for _, tc := range []struct {
		name       string
		keep       bool
		events     []engine.Event
		apiRolled  bool
		apiCounts  [3]int32
		dsRolled   bool
		dsDesired  int32
		wantChange bool
	}{
		{name: "a resync keeps what it does not reach", keep: true, apiRolled: true, apiCounts: [3]int32{2, 2, 2}},
		{name: "another target is not rolled over before a round says so", apiCounts: [3]int32{2, 2, 2}},
		{name: "written anew: rolling out", keep: true, events: []engine.Event{{Type: engine.EventApplied, Ref: strategy.RefOf(api), Action: apply.ActionUpdate}},
			apiCounts: [3]int32{2, 2, 2}, wantChange: true},
		{name: "unchanged stays rolled over", keep: true, events: []engine.Event{{Type: engine.EventApplied, Ref: strategy.RefOf(api), Action: apply.ActionUnchanged}},
			apiRolled: true, apiCounts: [3]int32{2, 2, 2}},
		{name: "rounds set counts and readiness", events: []engine.Event{round(ready(api, false, 3, 1, 2), ready(job, true, 0, 0, 0)), round(ready(api, true, 3, 3, 3), ready(ds, false, 2, 0, 1))},
			apiRolled: true, apiCounts: [3]int32{3, 3, 3}, dsDesired: 2, wantChange: true},
		{name: "a round without counts keeps them", keep: true, events: []engine.Event{round(health.Status{Ref: strategy.RefOf(api), Reason: "does not exist"})},
			apiCounts: [3]int32{2, 2, 2}, wantChange: true},
	} {
		c := newComponents(s, prev, tc.keep)
		changed := false
		for _, e := range tc.events {
			changed = c.observe(e) || changed
		}
		got := c.status()
		if len(got) != 2 || got[0].Name != "api" || got[1].Name != "handler" || got[1].Role == "" {
			t.Fatalf("%s: components %+v, want api and handler (not the Job)", tc.name, got)
		}
		a, h := got[0], got[1]
		if a.RolledOver != tc.apiRolled || [3]int32{a.Desired, a.Updated, a.Ready} != tc.apiCounts || h.RolledOver != tc.dsRolled || h.Desired != tc.dsDesired || changed != tc.wantChange {
			t.Errorf("%s: api %+v, handler %+v, changed %v", tc.name, a, h, changed)
		}
	}
}

// The objects metric counts what the events say was written and deleted.
func TestObjectsMetricFromEvents(t *testing.T) {
	m := NewMetrics()
	ref := strategy.ObjectRef{Group: "apps", Kind: "Deployment", Namespace: "ns", Name: "api"}
	for _, e := range []engine.Event{{Type: engine.EventApplied, Ref: ref, Action: apply.ActionCreate}, {Type: engine.EventPruned, Ref: ref},
		{Type: engine.EventProgress, Ref: ref}, {Type: engine.EventApplied, Ref: ref, Action: apply.ActionCreate}} {
		m.countObject(e)
	}
	if n := counter(t, m, "Deployment", "create"); n != 2 {
		t.Errorf("created %v, want 2", n)
	}
	if n := counter(t, m, "Deployment", "delete"); n != 1 {
		t.Errorf("deleted %v, want 1", n)
	}
}

// The conditions a rollout's outcome sets.
func TestRolloutConditions(t *testing.T) {
	target := strategy.Identity{Version: "v2", Registry: "r", Identifier: "id"}
	in := &v1alpha1.Installation{}
	markDeploying(in, rollout{updating: true, observed: strategy.Identity{Version: "v1"}}, target)
	if c := in.Condition(v1alpha1.ConditionProgressing); c == nil || c.Reason != v1alpha1.ReasonUpdateInProgress || in.Status.Phase != v1alpha1.PhaseDeploying || in.Status.TargetVersion != "v2" {
		t.Errorf("deploying: %+v", in.Status)
	}
	markFailed(in, failureReason(errors.New("boom"), in), errors.New("boom"))
	if c := in.Condition(v1alpha1.ConditionSynchronized); c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonApplyFailed {
		t.Errorf("failed apply: Synchronized %+v", c)
	}
	deg := &health.DegradedError{Reason: health.ReasonFailed}
	if r := failureReason(deg, in); r != v1alpha1.ReasonDeploymentFailed {
		t.Errorf("degraded: reason %s", r)
	}
	markDeployed(in, target)
	for _, ct := range []v1alpha1.ConditionType{v1alpha1.ConditionAvailable, v1alpha1.ConditionCreated, v1alpha1.ConditionSynchronized} {
		if c := in.Condition(ct); c == nil || c.Status != metav1.ConditionTrue {
			t.Errorf("deployed: %s %+v", ct, c)
		}
	}
	if in.Status.Phase != v1alpha1.PhaseDeployed || in.Status.ObservedVersion != "v2" {
		t.Errorf("deployed: %+v", in.Status)
	}
}

func counter(t *testing.T, m *Metrics, kind, action string) float64 {
	t.Helper()
	return testutil.ToFloat64(m.Objects.WithLabelValues(kind, action))
}
