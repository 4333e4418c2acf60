package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/crdsafety"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// prunedCRD is a CRD of group for kind (plural: lower case + "s") that
// keeps any field.
func prunedCRD(group, kind string) string {
	plural := strings.ToLower(kind) + "s"
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: %[2]s.%[1]s}
spec:
  group: %[1]s
  scope: Namespaced
  names: {plural: %[2]s, singular: %[3]s, kind: %[4]s, listKind: %[4]sList}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`, group, plural, strings.ToLower(kind), kind)
}

// TestCRDPrunedRefused: v1 of a strategy has CRDs Alpha, Beta and Gamma, a
// ConfigMap, and one Beta and one Gamma of its own; users create two
// Betas. v2 keeps Alpha only and changes the ConfigMap. Applied with
// PruneCRDs, v2 is refused before any write for Beta alone (crdPruned,
// its two users' objects counted and named, not the strategy's own), as
// plan lists it: the ConfigMap, the inventory and Beta's objects are as
// they were. Gamma, which stores only the strategy's own object (pruned
// with it), is not refused. With the override on Beta the run goes
// ahead and deletes Beta and Gamma.
func TestCRDPrunedRefused(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	group := strings.TrimPrefix(ns, "t-") + ".crdprune.example.com"
	crdName := func(plural string) string { return plural + "." + group }
	t.Cleanup(func() {
		for _, p := range []string{"alphas", "betas", "gammas"} {
			_ = env.Dynamic.Resource(crdGVR).Delete(context.Background(), crdName(p), metav1.DeleteOptions{})
		}
	})
	owner := inventory.Owner{Namespace: ns, Name: "crdprune", Kind: inventory.KindPlugin}
	settings := func(v string) string {
		return fmt.Sprintf("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: %s}\ndata: {v: %q}\n", ns, v)
	}
	own := func(kind string) string {
		return fmt.Sprintf("---\napiVersion: %s/v1\nkind: %s\nmetadata: {name: own, namespace: %s}\nspec: {by: strategy}\n", group, kind, ns)
	}
	v1 := prunedCRD(group, "Alpha") + "---\n" + prunedCRD(group, "Beta") + "---\n" + prunedCRD(group, "Gamma") + settings("1") + own("Beta") + own("Gamma")
	v2 := prunedCRD(group, "Alpha") + settings("2")
	run := func(version, text string, allow ...crdsafety.Allow) (*plan.Plan, *engine.Result, error) {
		t.Helper()
		s, _, err := strategy.Parse([]byte(text), strategy.ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Identity = strategy.Identity{Version: version}
		opts := engine.Options{Owner: owner, PruneCRDs: true, AllowCRDChanges: allow, StageDeadline: time.Minute, Interval: 200 * time.Millisecond}
		p, err := engine.Plan(ctx, env.Config, s, opts)
		if err != nil {
			t.Fatalf("plan %s: %v", version, err)
		}
		res, err := engine.Run(ctx, env.Config, s, opts)
		return p, res, err
	}
	if _, _, err := run("v0.0.1", v1); err != nil {
		t.Fatal(err)
	}
	betas := env.Dynamic.Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "betas"}).Namespace(ns)
	for _, name := range []string{"b1", "b2"} {
		o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": "Beta",
			"metadata": map[string]any{"name": name}, "spec": map[string]any{"by": "user"}}}
		if _, err := betas.Create(ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	snapshot := func() string {
		t.Helper()
		cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		inv, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, inventory.ConfigMapName(owner), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var crds []string
		for _, p := range []string{"alphas", "betas", "gammas"} {
			crd, err := env.Dynamic.Resource(crdGVR).Get(ctx, crdName(p), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			crds = append(crds, p+"@"+crd.GetResourceVersion())
		}
		list, err := betas.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var objs []string
		for _, o := range list.Items {
			objs = append(objs, o.GetName()+"@"+o.GetResourceVersion())
		}
		return fmt.Sprintf("settings %v@%s, inventory %s, crds %v, betas %v", cm.Data, cm.GetResourceVersion(), inv.GetResourceVersion(), crds, objs)
	}

	before := snapshot()
	p, _, err := run("v0.0.2", v2)
	var unsafe *crdsafety.UnsafeError
	if !errors.As(err, &unsafe) {
		t.Fatalf("v2 with PruneCRDs: %v, want a refusal", err)
	}
	wantFinding := func(fs []crdsafety.Finding, what string) {
		t.Helper()
		if len(fs) != 1 {
			t.Fatalf("%s: %v, want betas alone refused", what, fs)
		}
		f := fs[0]
		if f.CRD != crdName("betas") || f.Rule != crdsafety.RuleCRDPruned || f.Objects != 2 || f.Truncated ||
			strings.Join(f.Examples, ",") != ns+"/b1,"+ns+"/b2" {
			t.Errorf("%s: %+v, want %s crdPruned with %s/b1 and %s/b2 (not the strategy's own)", what, f, crdName("betas"), ns, ns)
		}
	}
	wantFinding(unsafe.Findings, "refusal")
	wantFinding(p.Refused(), "plan")
	pruneReason := func(p *plan.Plan, plural string) string {
		for _, it := range p.Prune {
			if it.Ref.Name == crdName(plural) {
				return it.Reason
			}
		}
		return "not in the prune list"
	}
	if got := pruneReason(p, "betas"); !strings.HasSuffix(got, "; deletes 2 stored objects with it (crdPruned, refused)") {
		t.Errorf("plan's prune of betas: %q, want the objects it deletes", got)
	}
	if got := pruneReason(p, "gammas"); got != "not in the target strategy" {
		t.Errorf("plan's prune of gammas: %q", got)
	}
	if !strings.Contains(err.Error(), crdName("betas")+": crdPruned") || !strings.Contains(err.Error(), "2 stored objects affected") {
		t.Errorf("refusal %q does not name the CRD and its objects", err)
	}
	if after := snapshot(); after != before {
		t.Errorf("refused, but written:\n before %s\n after  %s", before, after)
	}

	// The override: the run goes ahead, Beta and Gamma are deleted.
	allow := crdsafety.Allow{CRD: crdName("betas"), Rule: crdsafety.RuleCRDPruned}
	p, res, err := run("v0.0.2", v2, allow)
	if err != nil {
		t.Fatalf("v2 with the override: %v", err)
	}
	if len(p.Refused()) != 0 || len(p.CRDSafety) != 1 || !p.CRDSafety[0].Allowed ||
		!strings.HasSuffix(pruneReason(p, "betas"), "(crdPruned, allowed by override)") {
		t.Errorf("plan with the override: %v, prune of betas %q", p.CRDSafety, pruneReason(p, "betas"))
	}
	pruned := fmt.Sprint(res.Pruned)
	for _, plural := range []string{"betas", "gammas"} {
		if !strings.Contains(pruned, crdName(plural)) {
			t.Errorf("CRD %s not pruned: %s", crdName(plural), pruned)
		}
		testenv.WaitFor(ctx, t, crdName(plural)+" gone", func(ctx context.Context) (bool, string, error) {
			_, err := env.Dynamic.Resource(crdGVR).Get(ctx, crdName(plural), metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Sprint(err), nil
		})
	}
	cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
	if err != nil || cm.Data["v"] != "2" {
		t.Errorf("settings after the run: %v, %v", cm, err)
	}
}
