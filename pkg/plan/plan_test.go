package plan_test

import (
	"bytes"
	"maps"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/generate"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

func sample(t *testing.T, version string) *strategy.Strategy {
	t.Helper()
	s, err := generate.Sample(&identity.Config{Namespace: "sample-system", Registry: "registry.example/sample", Version: version}, generate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestChoosePath(t *testing.T) {
	for _, tc := range []struct {
		target, observed string
		want             plan.Path
	}{
		{"v1.0.0", "", plan.PathCreate},
		{"v1.1.0", "v1.0.0", plan.PathUpdate},
		{"v1.0.0", "v1.1.0", plan.PathCreate},
		{"v1.0.0", "v1.0.0", plan.PathUpdate},
		{"v1.10.0", "v1.9.0", plan.PathUpdate},
		{"main", "v1.0.0", plan.PathUpdate},
		{"v1.0.0", "devel", plan.PathUpdate},
	} {
		if got := plan.ChoosePath(tc.target, tc.observed); got != tc.want {
			t.Errorf("ChoosePath(%q, %q) = %s, want %s", tc.target, tc.observed, got, tc.want)
		}
	}
}

// The annotation wins, then the caller's names (here KubeVirt's preset),
// then the kind's role in the table; no name is built in.
func TestRoleOf(t *testing.T) {
	obj := func(kind, name, role string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("apps/v1")
		u.SetKind(kind)
		u.SetName(name)
		if role != "" {
			u.SetAnnotations(map[string]string{metakeys.RoleAnnotation: role})
		}
		return u
	}
	kubevirt := kinds.KubeVirtRoles()
	for _, tc := range []struct {
		obj   *unstructured.Unstructured
		names map[string]kinds.Role
		want  kinds.Role
	}{
		{obj("Deployment", "anything", "api"), nil, kinds.RoleAPI},
		{obj("Deployment", "virt-api", ""), kubevirt, kinds.RoleAPI},
		{obj("Deployment", "virt-api", ""), nil, kinds.RoleController},
		{obj("Deployment", "virt-exportproxy", ""), kubevirt, kinds.RoleController},
		{obj("DaemonSet", "virt-handler", ""), kubevirt, kinds.RoleHandler},
		{obj("DaemonSet", "node-agent", ""), kubevirt, kinds.RoleHandler},
		{obj("DaemonSet", "virt-api", "controller"), kubevirt, kinds.RoleController},
		{obj("Deployment", "virt-api-like", ""), kubevirt, kinds.RoleController},
		{obj("StatefulSet", "db", ""), nil, kinds.RoleController},
	} {
		if got := plan.RoleOf(tc.obj, tc.names); got != tc.want {
			t.Errorf("RoleOf(%s %s, %d names) = %s, want %s", tc.obj.GetKind(), tc.obj.GetName(), len(tc.names), got, tc.want)
		}
	}
}

func stepNames(p *plan.Plan) []string {
	var out []string
	for _, s := range p.Steps {
		out = append(out, s.Name)
	}
	return out
}

func TestBuildOrdersStagesAndWaves(t *testing.T) {
	for _, tc := range []struct {
		name     string
		target   string
		observed string
		want     string
	}{
		{"fresh install", "v1.0.0", "", "crds rbac config services workloads/api workloads/controller workloads/handler admission"},
		{"upgrade", "v1.1.0", "v1.0.0", "crds rbac config services workloads/handler workloads/controller workloads/api admission"},
		{"rollback", "v1.0.0", "v1.1.0", "crds rbac config services workloads/api workloads/controller workloads/handler admission"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := plan.Build(sample(t, tc.target), plan.Options{Observed: strategy.Identity{Version: tc.observed}})
			if got := strings.Join(stepNames(p), " "); got != tc.want {
				t.Errorf("steps %q, want %q", got, tc.want)
			}
			n := 0
			for _, st := range p.Steps {
				n += len(st.Items)
			}
			if want := len(sample(t, tc.target).Objects); n != want {
				t.Errorf("plan holds %d objects, strategy %d", n, want)
			}
		})
	}
}

func TestPrintWithoutCluster(t *testing.T) {
	p := plan.Build(sample(t, "v1.0.0"), plan.Options{})
	var buf bytes.Buffer
	if err := p.Print(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"observed nothing: create path", "workloads/api", "Deployment.apps/sample-system/sample-api"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// The table folds the reconciler's own annotations into one line per
// object; real field changes stay one line each.
func TestPrintFoldsIdentityAnnotations(t *testing.T) {
	ann := func(key string) string { return ".metadata.annotations." + key }
	p := &plan.Plan{Target: strategy.Identity{Version: "v2"}, Observed: strategy.Identity{Version: "v1"}, Path: plan.PathUpdate, Steps: []plan.Step{{Name: "workloads/api", Items: []plan.Item{
		{Ref: strategy.ObjectRef{Group: "apps", Kind: "Deployment", Namespace: "ns", Name: "api"}, Action: apply.ActionUpdate, Changes: []apply.Change{
			{Path: ann(metakeys.AppliedHashAnnotation), Live: "aaa", Desired: "bbb"},
			{Path: ann(metakeys.InstallStrategyVersionAnnotation), Live: "v1", Desired: "v2"},
			{Path: ".spec.template.metadata.annotations." + metakeys.InstallStrategyVersionAnnotation, Live: "v1", Desired: "v2"},
			{Path: ".spec.template.spec.containers[0].image", Live: "r/api:v1", Desired: "r/api:v2"},
		}},
		{Ref: strategy.ObjectRef{Kind: "ConfigMap", Namespace: "ns", Name: "c"}, Action: apply.ActionUpdate, Changes: []apply.Change{
			{Path: ann(metakeys.AppliedHashAnnotation), Live: "aaa", Desired: "ccc"},
		}},
		{Ref: strategy.ObjectRef{Kind: "ConfigMap", Namespace: "ns", Name: "d"}, Action: apply.ActionUpdate, Changes: []apply.Change{
			{Path: ".data.mode", Live: nil, Desired: "fast"},
			{Path: ann(metakeys.AppliedHashAnnotation), Live: "aaa", Desired: "ddd"},
		}},
	}}}}
	var buf bytes.Buffer
	if err := p.Print(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"  .spec.template.spec.containers[0].image: r/api:v1 -> r/api:v2\n",
		"  identity annotations: version v1 -> v2\n",
		"  identity annotations: applied hash only (a field set before is no longer set)\n",
		"  .data.mode: <absent> -> fast\n",
		"  identity annotations: applied hash\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "applied-hash") || strings.Contains(out, "install-strategy-version") {
		t.Errorf("table still lists annotation paths:\n%s", out)
	}
}

// CRDKinds maps each kind a strategy's CRDs define to the CRD's name, from
// spec.group and spec.names.kind alone: a CRD whose schema holds a value
// of a type its Go type does not take (the API server refuses it at the
// write, naming it) does not stop the run before.
func TestCRDKinds(t *testing.T) {
	s, _, err := strategy.Parse([]byte(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gizmos.example.com
spec:
  group: example.com
  names: {kind: Gizmo, plural: gizmos}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: "yes"}
---
apiVersion: example.com/v1
kind: Gizmo
metadata: {name: g, namespace: ns}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c, namespace: ns}
`), strategy.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := plan.CRDKinds(s)
	want := map[schema.GroupKind]string{{Group: "example.com", Kind: "Gizmo"}: "gizmos.example.com"}
	if !maps.Equal(got, want) {
		t.Fatalf("CRDKinds: %v, want %v", got, want)
	}
}
