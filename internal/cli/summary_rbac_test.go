package cli

import (
	"bytes"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// rbacPlan is a plan that updates a binding (a subject added), a role (a
// rule widened) and a ConfigMap holding a list of maps, as the applier
// reports them: each atomic list changed as a whole.
func rbacPlan(t *testing.T) *plan.Plan {
	t.Helper()
	live := parseText(t, `---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: cluster-admin}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: Group, name: "system:masters"}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: reader, namespace: ns}
rules:
- {apiGroups: [""], resources: [pods], verbs: [get]}
---
apiVersion: example.io/v1
kind: Widget
metadata: {name: w, namespace: ns}
spec:
  items:
  - {port: 80, protocol: TCP}
`)
	want := parseText(t, `---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: cluster-admin}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: Group, name: "system:masters"}
- {kind: ServiceAccount, name: mallory, namespace: ns}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: reader, namespace: ns}
rules:
- {apiGroups: [""], resources: [pods, secrets], verbs: [get, list]}
---
apiVersion: example.io/v1
kind: Widget
metadata: {name: w, namespace: ns}
spec:
  items:
  - {port: 80, protocol: UDP}
`)
	p := &plan.Plan{}
	var items []plan.Item
	for i, o := range want.Objects {
		l := live.Objects[i]
		var changes []apply.Change
		for _, path := range [][]string{{"subjects"}, {"rules"}, {"spec", "items"}} {
			a, _, _ := unstructured.NestedFieldNoCopy(l.Object, path...)
			b, _, _ := unstructured.NestedFieldNoCopy(o.Object, path...)
			if a != nil || b != nil {
				changes = append(changes, apply.Change{Path: "." + strings.Join(path, "."), Live: a, Desired: b})
			}
		}
		items = append(items, plan.Item{Ref: strategy.RefOf(o), Action: apply.ActionUpdate, Object: o, Live: l, Changes: changes})
	}
	p.Steps = []plan.Step{{Name: "test", Items: items}}
	return p
}

// TestPlanSummaryRBAC: plan's summary shows RBAC subjects and rules, and
// any list of maps, with their items: never ".subjects [] → []" (the
// forged Helm release of issue 39 added a subject to cluster-admin so).
func TestPlanSummaryRBAC(t *testing.T) {
	var b bytes.Buffer
	printSummary(&b, summarisePlan(rbacPlan(t)), palette{})
	out := b.String()
	golden(t, "plan-rbac-summary", out)
	for _, w := range []string{"ServiceAccount:ns/mallory", "Group:system:masters", "+ get, list on secrets", "protocol: UDP"} {
		if !strings.Contains(out, w) {
			t.Errorf("summary does not show %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "[] → []") {
		t.Errorf("summary hides a list change:\n%s", out)
	}
}

// TestValuePairNeverEqual: whatever two different values are, their
// rendering differs (long lists cut alike, 1 and "1").
func TestValuePairNeverEqual(t *testing.T) {
	long := func(last string) []any {
		var l []any
		for range 40 {
			l = append(l, map[string]any{"kind": "User", "name": "someone-with-a-long-name"})
		}
		return append(l, map[string]any{"kind": "User", "name": last})
	}
	for _, c := range []struct{ a, b any }{
		{long("a"), long("b")},
		{int64(1), "1"},
		{[]any{}, map[string]any{}},
		{[]any{map[string]any{}}, []any{map[string]any{"x": nil}}},
		{strings.Repeat("x", 70) + "a", strings.Repeat("x", 70) + "b"},
	} {
		if a, b := valuePair(c.a, c.b); a == b {
			t.Errorf("%#v and %#v both render as %s", c.a, c.b, a)
		}
	}
}
