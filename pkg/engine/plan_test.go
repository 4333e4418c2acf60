package engine_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// The plan of an upgrade, observed against the live cluster, says what the
// upgrade will do and writes nothing.
func TestPlanOfUpgradeWritesNothing(t *testing.T) {
	se := newSampleEnv(t)
	ctx := t.Context()
	v1, v2 := sample(t, se.ns, "v1.0.0"), sample(t, se.ns, "v1.1.0")
	if _, err := se.run(v1, strategy.Identity{}, engine.Options{NoWait: true}); err != nil {
		t.Fatal(err)
	}

	cfg, rec := recordedConfig(se)
	p, err := engine.Plan(ctx, cfg, v2, engine.Options{Observed: v1.Identity, Owner: sampleOwner(se.ns)})
	if err != nil {
		t.Fatal(err)
	}
	if w := rec.Writes(); len(w) != 0 {
		t.Errorf("plan wrote %v", w)
	}
	if p.Path != plan.PathUpdate {
		t.Errorf("path %s", p.Path)
	}
	actions := map[string]apply.Action{}
	for _, st := range p.Steps {
		for _, it := range st.Items {
			actions[it.Ref.Kind+"/"+it.Ref.Name] = it.Action
			if it.Action == apply.ActionUpdate && len(it.Changes) == 0 {
				t.Errorf("%s: update without changes", it.Ref)
			}
		}
	}
	for key, want := range map[string]apply.Action{
		"Service/sample-controller-metrics": apply.ActionCreate,
		"Deployment/sample-api":             apply.ActionUpdate,
		"ConfigMap/sample-config":           apply.ActionUpdate,
	} {
		if actions[key] != want {
			t.Errorf("%s: %s, want %s", key, actions[key], want)
		}
	}
	if len(p.Prune) != 1 || p.Prune[0].Ref.Name != "sample-legacy-settings" || p.Prune[0].Action != apply.ActionDelete {
		t.Errorf("prune %+v", p.Prune)
	}
	var buf bytes.Buffer
	if err := p.Print(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"update path", "prune", "sample-legacy-settings", ".spec.template.spec.containers[0].image"} {
		if !strings.Contains(out, want) {
			t.Errorf("printed plan lacks %q:\n%s", want, out)
		}
	}
	if c := p.Counts(); c["create"] != 1 || c["delete"] != 1 || c["update"] == 0 {
		t.Errorf("counts %v", c)
	}
}
