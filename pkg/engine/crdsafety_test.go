package engine_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/crdsafety"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// gadgetCRD is things.GROUP with one version v1 whose spec has the given
// properties (YAML flow map entries).
func gadgetCRD(group, scope, props string) string { return testenv.ThingsCRD(group, scope, props) }

const gadgetProps = `color: {type: string, enum: [red, green, blue]}, size: {type: integer}, note: {type: string}`

// preflightRig runs strategies of things.GROUP for one installation on a
// real cluster, with a plan before each run that must list what the run
// refuses, and snapshots what a refusal must leave as it was.
type preflightRig struct {
	t       *testing.T
	env     *testenv.Env
	ns      string
	group   string
	crdName string
	owner   inventory.Owner
	things  dynamic.ResourceInterface
	version int
}

func newPreflightRig(t *testing.T, name string) *preflightRig {
	env, ns, group := thingsGroup(t)
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "things"}
	return &preflightRig{t: t, env: env, ns: ns, group: group, crdName: "things." + group,
		owner: inventory.Owner{Namespace: ns, Name: name, Kind: inventory.KindPlugin}, things: env.Dynamic.Resource(gvr).Namespace(ns)}
}

// run plans and runs text with opts (its owner, deadline and interval
// set here).
func (r *preflightRig) run(text string, opts engine.Options) (*engine.Result, error) {
	t, ctx := r.t, r.t.Context()
	t.Helper()
	s, _, err := strategy.Parse([]byte(text), strategy.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.version++
	s.Identity = strategy.Identity{Version: fmt.Sprintf("v0.0.%d", r.version)}
	opts.Owner, opts.StageDeadline, opts.Interval = r.owner, time.Minute, 200*time.Millisecond
	p, perr := engine.Plan(ctx, r.env.Config, s, opts)
	res, err := engine.Run(ctx, r.env.Config, s, opts)
	var unsafe *crdsafety.UnsafeError
	errors.As(err, &unsafe)
	if perr != nil || unsafe == nil && len(p.Refused()) > 0 || unsafe != nil && len(p.Refused()) != len(unsafe.Findings) {
		t.Errorf("plan lists %v (%v), run: %v", p.Refused(), perr, err)
	}
	return res, err
}

// snapshot describes the CRD, the inventory and every custom resource.
func (r *preflightRig) snapshot() string {
	t, ctx := r.t, r.t.Context()
	t.Helper()
	crd, err := r.env.Dynamic.Resource(crdGVR).Get(ctx, r.crdName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm, err := r.env.Kube.CoreV1().ConfigMaps(r.ns).Get(ctx, inventory.ConfigMapName(r.owner), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	list, err := r.things.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var objs []string
	for _, o := range list.Items {
		objs = append(objs, fmt.Sprintf("%s@%s=%v", o.GetName(), o.GetResourceVersion(), o.Object["spec"]))
	}
	return fmt.Sprintf("crd %s uid %s, inventory %s, objects %v", crd.GetResourceVersion(), crd.GetUID(), cm.GetResourceVersion(), objs)
}

// TestCRDPreflight: on a real cluster, each unsafe CRD change is refused
// before any write (the CRD, its custom resources and the inventory are
// as they were; plan lists the refusal), and its override lets it
// through; the same change that no stored object is affected by applies.
func TestCRDPreflight(t *testing.T) {
	rig := newPreflightRig(t, "gadgets")
	env, ns, group, crdName := rig.env, rig.ns, rig.group, rig.crdName
	ctx := t.Context()
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "things"}
	run := func(text string, allow ...crdsafety.Allow) (*engine.Result, error) {
		t.Helper()
		return rig.run(text, engine.Options{AllowCRDChanges: allow})
	}
	mustRun := func(text string, allow ...crdsafety.Allow) {
		t.Helper()
		if _, err := run(text, allow...); err != nil {
			t.Fatalf("run: %v", err)
		}
	}
	snapshot := rig.snapshot
	refused := func(name, text string, rule crdsafety.Rule, path string) {
		t.Helper()
		before := snapshot()
		_, err := run(text)
		var unsafe *crdsafety.UnsafeError
		if !errors.As(err, &unsafe) {
			t.Fatalf("%s: run error %v, want a refusal", name, err)
		}
		found := false
		for _, f := range unsafe.Findings {
			found = found || f.Rule == rule && f.CRD == crdName && f.Path == path
		}
		if !found || !strings.Contains(err.Error(), crdName) {
			t.Errorf("%s: refusal %v, want %s at %q", name, err, rule, path)
		}
		if after := snapshot(); after != before {
			t.Errorf("%s: refused, but written:\n before %s\n after  %s", name, before, after)
		}
	}
	mustRun(gadgetCRD(group, "Namespaced", gadgetProps))
	create := func(name, spec string) {
		t.Helper()
		o := &unstructured.Unstructured{}
		o.SetAPIVersion(group + "/v1")
		o.SetKind("Thing")
		o.SetName(name)
		o.Object["spec"] = map[string]any{}
		for kv := range strings.SplitSeq(spec, ",") {
			k, v, _ := strings.Cut(kv, "=")
			o.Object["spec"].(map[string]any)[k] = v
		}
		if _, err := env.Dynamic.Resource(gvr).Namespace(ns).Create(ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create("blue", "color=blue")
	create("noted", "note=keep me")

	// A field removed that an object uses: refused; the override applies.
	noNote := strings.Replace(gadgetProps, ", note: {type: string}", "", 1)
	refused("note removed", gadgetCRD(group, "Namespaced", noNote), crdsafety.RuleFieldRemoved, ".spec.note")
	// An enum tightened below a stored value: refused.
	noBlue := strings.Replace(gadgetProps, "[red, green, blue]", "[red, green]", 1)
	refused("blue removed", gadgetCRD(group, "Namespaced", noBlue), crdsafety.RuleEnumTightened, ".spec.color")
	// Scope changed: refused (never a delete and recreate).
	refused("scope", gadgetCRD(group, "Cluster", gadgetProps), crdsafety.RuleScope, "")

	// A field nobody uses removed: applied.
	noSize := strings.Replace(gadgetProps, ", size: {type: integer}", "", 1)
	mustRun(gadgetCRD(group, "Namespaced", noSize))
	// The overrides.
	mustRun(gadgetCRD(group, "Namespaced", strings.Replace(noSize, "[red, green, blue]", "[red, green]", 1)), crdsafety.Allow{CRD: crdName, Rule: crdsafety.RuleEnumTightened})
	final := strings.Replace(strings.Replace(noSize, "[red, green, blue]", "[red, green]", 1), ", note: {type: string}", "", 1)
	mustRun(gadgetCRD(group, "Namespaced", final), crdsafety.Allow{CRD: crdName, Rule: crdsafety.RuleFieldRemoved})
	live, err := env.Dynamic.Resource(crdGVR).Get(ctx, crdName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(fmt.Sprint(live.Object["spec"]), "note:") {
		t.Errorf("the accepted field removal was not applied: %v", live.Object["spec"])
	}
	// The scope change accepted: the CRD is recreated Cluster-scoped.
	mustRun(gadgetCRD(group, "Cluster", final), crdsafety.Allow{CRD: crdName, Rule: crdsafety.RuleScope})
	crd, err := env.Dynamic.Resource(crdGVR).Get(ctx, crdName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if scope, _, _ := unstructured.NestedString(crd.Object, "spec", "scope"); scope != "Cluster" {
		t.Errorf("scope %s after the accepted change", scope)
	}
}
