package deploy_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/kinds"
)

const operatorNamespace = "installstrategy-system"

// configDir is the operator's kustomize manifests (config/ at the module
// root), which these tests build, check and deploy.
const configDir = "../../config"

// build runs kustomize on dir (under configDir) and returns the objects it
// renders.
func build(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	dir = filepath.Join(configDir, dir)
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range rm.Resources() {
		m, err := r.Map()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out
}

// objects indexes rendered objects by kind/name.
type objects map[string]*unstructured.Unstructured

func index(objs []*unstructured.Unstructured) objects {
	m := objects{}
	for _, o := range objs {
		m[o.GetKind()+"/"+o.GetName()] = o
	}
	return m
}

// get converts the object kind/name into out, failing when it is missing.
func (m objects) get(t *testing.T, kind, name string, out any) {
	t.Helper()
	u, ok := m[kind+"/"+name]
	if !ok {
		t.Fatalf("%s/%s not rendered; have %v", kind, name, m.names())
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		t.Fatalf("%s/%s: %v", kind, name, err)
	}
}

func (m objects) names() []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestDefaultKustomization(t *testing.T) {
	objs := index(build(t, "default"))
	want := []string{
		"ClusterRole/installstrategy-metrics-reader", "ClusterRole/installstrategy-operator", "ClusterRoleBinding/installstrategy-operator",
		"CustomResourceDefinition/installations.installstrategy.io", "Deployment/installstrategy-operator",
		"Namespace/installstrategy-system", "Role/installstrategy-operator", "RoleBinding/installstrategy-operator",
		"Service/installstrategy-operator-metrics", "ServiceAccount/installstrategy-operator",
	}
	if got := objs.names(); !slices.Equal(got, want) {
		t.Fatalf("rendered %v, want %v", got, want)
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding":
			if o.GetNamespace() != "" {
				t.Errorf("%s/%s: cluster-scoped object has namespace %q", o.GetKind(), o.GetName(), o.GetNamespace())
			}
		default:
			if o.GetNamespace() != operatorNamespace {
				t.Errorf("%s/%s: namespace %q, want %s", o.GetKind(), o.GetName(), o.GetNamespace(), operatorNamespace)
			}
		}
	}

	var ns corev1.Namespace
	objs.get(t, "Namespace", operatorNamespace, &ns)
	if ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("namespace labels %v: want restricted pod security enforced", ns.Labels)
	}

	// Bindings name the rendered roles and ServiceAccount.
	var crb rbacv1.ClusterRoleBinding
	var rb rbacv1.RoleBinding
	objs.get(t, "ClusterRoleBinding", "installstrategy-operator", &crb)
	objs.get(t, "RoleBinding", "installstrategy-operator", &rb)
	for _, b := range []struct {
		ref      rbacv1.RoleRef
		subjects []rbacv1.Subject
	}{{crb.RoleRef, crb.Subjects}, {rb.RoleRef, rb.Subjects}} {
		if _, ok := objs[b.ref.Kind+"/"+b.ref.Name]; !ok {
			t.Errorf("binding refers to missing %s/%s", b.ref.Kind, b.ref.Name)
		}
		if len(b.subjects) != 1 || b.subjects[0].Kind != "ServiceAccount" || b.subjects[0].Namespace != operatorNamespace || objs["ServiceAccount/"+b.subjects[0].Name] == nil {
			t.Errorf("binding subjects %+v: want the rendered ServiceAccount", b.subjects)
		}
	}

	var d appsv1.Deployment
	objs.get(t, "Deployment", "installstrategy-operator", &d)
	pod := d.Spec.Template.Spec
	if objs["ServiceAccount/"+pod.ServiceAccountName] == nil {
		t.Errorf("deployment runs as ServiceAccount %q, which is not rendered", pod.ServiceAccountName)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("deployment has %d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Image != "ghcr.io/installstrategy/installstrategy-operator:latest" {
		t.Errorf("image %q: the kustomize images entry was not applied", c.Image)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["metrics"] != 8443 || ports["health"] != 8081 {
		t.Errorf("ports %v, want metrics 8443 and health 8081", ports)
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port != intstr.FromString("health") {
			t.Errorf("%s probe %+v, want GET %s on the health port", p.name, p.probe, p.path)
		}
	}
	for _, want := range []string{"--health-probe-bind-address=:8081", "--metrics-bind-address=:8443", "--leader-elect"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %v lack %s", c.Args, want)
		}
	}
	// The metrics are served over HTTPS behind the API server's
	// authentication (the default), never turned off here.
	for _, a := range c.Args {
		if strings.HasPrefix(a, "--metrics-secure") {
			t.Errorf("args %v set %s: the deployment serves metrics as the default does, to authorized callers only", c.Args, a)
		}
	}
	metricsAccess(t, objs)
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("resource requests %v: want cpu and memory", c.Resources.Requests)
	}
	if lim := c.Resources.Limits.Memory(); lim.Cmp(resource.MustParse("256Mi")) < 0 {
		t.Errorf("memory limit %v is too small for a KubeVirt-sized strategy", lim)
	}
	sc, psc := c.SecurityContext, pod.SecurityContext
	if sc == nil || psc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
		psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("security context not restricted: pod %+v container %+v", psc, sc)
	}

	var svc corev1.Service
	objs.get(t, "Service", "installstrategy-operator-metrics", &svc)
	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("metrics Service selector %v does not select the operator's pods %v", svc.Spec.Selector, d.Spec.Template.Labels)
		}
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort != intstr.FromString("metrics") {
		t.Errorf("metrics Service ports %+v", svc.Spec.Ports)
	}
}

// metricsAccess checks the RBAC of the metrics endpoint: the operator may
// review tokens and access (operator.MetricsAuthFilter), and the reader
// role grants get on /metrics, nothing else, and is bound to nobody.
func metricsAccess(t *testing.T, objs objects) {
	t.Helper()
	var op, reader rbacv1.ClusterRole
	objs.get(t, "ClusterRole", "installstrategy-operator", &op)
	objs.get(t, "ClusterRole", "installstrategy-metrics-reader", &reader)
	for _, want := range []struct{ group, resource string }{{"authentication.k8s.io", "tokenreviews"}, {"authorization.k8s.io", "subjectaccessreviews"}} {
		ok := slices.ContainsFunc(op.Rules, func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.APIGroups, want.group) && slices.Contains(r.Resources, want.resource) && slices.Contains(r.Verbs, "create")
		})
		if !ok {
			t.Errorf("the operator's ClusterRole may not create %s.%s", want.resource, want.group)
		}
	}
	want := []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}
	if !reflect.DeepEqual(reader.Rules, want) {
		t.Errorf("metrics reader rules %+v, want %+v", reader.Rules, want)
	}
	for name, o := range objs {
		if o.GetKind() != "ClusterRoleBinding" && o.GetKind() != "RoleBinding" {
			continue
		}
		if ref, _, _ := unstructured.NestedString(o.Object, "roleRef", "name"); ref == reader.Name {
			t.Errorf("%s binds the metrics reader role: whoever scrapes binds it", name)
		}
	}
}

// TestRBACCoversKindTable checks that the operator may apply and prune
// every kind a strategy can contain (pkg/kinds' table): adding a row there
// without a rule in api/v1alpha1/rbac.go fails here.
func TestRBACCoversKindTable(t *testing.T) {
	var role rbacv1.ClusterRole
	index(build(t, "rbac")).get(t, "ClusterRole", "installstrategy-operator", &role)
	allows := func(group, res string, verbs ...string) bool {
		for _, v := range verbs {
			ok := false
			for _, r := range role.Rules {
				if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, res) && slices.Contains(r.Verbs, v) {
					ok = true
				}
			}
			if !ok {
				return false
			}
		}
		return true
	}
	manage := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	for _, info := range kinds.All() {
		if !allows(info.GroupKind.Group, info.Resource, manage...) {
			t.Errorf("no rule lets the operator manage %s (%s): add one to api/v1alpha1/rbac.go", info.GroupKind, info.Resource)
		}
	}
	for _, res := range []string{"clusterroles", "roles"} {
		if !allows("rbac.authorization.k8s.io", res, "escalate", "bind") {
			t.Errorf("%s: escalate and bind are needed to apply a strategy's roles", res)
		}
	}
	for _, c := range []struct{ group, res, verb string }{
		{v1alpha1.GroupName, "installations", "watch"},
		{v1alpha1.GroupName, "installations/status", "update"},
		{v1alpha1.GroupName, "installations/finalizers", "update"},
		{"", "pods", "list"},
		{"", "pods/log", "get"},
		{"", "events", "create"},
		// An uninstall deletes the Installation's dump Jobs at once.
		{"batch", "jobs", "deletecollection"},
	} {
		if !allows(c.group, c.res, c.verb) {
			t.Errorf("no rule allows %s %s.%s", c.verb, c.res, c.group)
		}
	}
	// Leases only in the operator's namespace.
	if allows("coordination.k8s.io", "leases", "get") {
		t.Error("the ClusterRole grants leases cluster-wide; leader election needs them only in " + operatorNamespace)
	}
}

// TestSampleIsCompleteAndValid decodes the sample strictly (an unknown or
// misspelt field fails) and checks that it spells out every spec field of
// the CRD, so it stays a complete example when fields are added.
func TestSampleIsCompleteAndValid(t *testing.T) {
	objs := index(build(t, "samples"))
	u := objs["Installation/sample"]
	if u == nil {
		t.Fatalf("no Installation/sample in %v", objs.names())
	}
	raw, err := os.ReadFile(filepath.Join(configDir, "samples/installation.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var in v1alpha1.Installation
	if err := yaml.UnmarshalStrict(raw, &in); err != nil {
		t.Fatalf("samples/installation.yaml does not match the Go types: %v", err)
	}
	if in.Spec.StrategySourceType() != v1alpha1.StrategySourceProduct || in.Spec.Version == "" {
		t.Errorf("sample spec %+v", in.Spec)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	index(build(t, "crd")).get(t, "CustomResourceDefinition", "installations.installstrategy.io", &crd)
	spec, _ := u.Object["spec"].(map[string]any)
	for field := range crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties {
		if _, ok := spec[field]; !ok {
			t.Errorf("the sample does not show spec.%s", field)
		}
	}
}

// TestConfigInCluster applies the default kustomization to the test cluster
// (the CRD and namespace for real, everything else as a server-side dry
// run, which runs validation and admission), checks that the operator's
// pod passes the namespace's restricted Pod Security admission, and creates
// the sample Installation.
func TestConfigInCluster(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := testenv.New(t)
	owner := client.FieldOwner("config-test")
	var deployment *unstructured.Unstructured
	objs := build(t, "default")
	// The namespace and the CRD first, for real; then the rest.
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int { return first(b) - first(a) })
	for _, o := range objs {
		var opts []client.PatchOption
		switch o.GetKind() {
		case "CustomResourceDefinition", "Namespace":
		case "Deployment":
			deployment = o
			opts = append(opts, client.DryRunAll)
		default:
			opts = append(opts, client.DryRunAll)
		}
		if err := env.Client.Patch(ctx, o, client.Apply, append(opts, owner, client.ForceOwnership)...); err != nil {
			t.Fatalf("apply %s/%s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	env.WaitCRDEstablished(ctx, t, "installations.installstrategy.io")

	// Pod Security admission enforces on pods, not Deployments: dry-run a
	// pod of the Deployment's template (as the default ServiceAccount, the
	// operator's exists only as a dry run).
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(deployment.Object, &d); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(ctx, t, "default ServiceAccount of "+operatorNamespace, func(ctx context.Context) (bool, string, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: "default"}, &corev1.ServiceAccount{})
		return err == nil, "", client.IgnoreNotFound(err)
	})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "operator-", Namespace: operatorNamespace, Labels: d.Spec.Template.Labels}, Spec: d.Spec.Template.Spec}
	pod.Spec.ServiceAccountName = "default"
	if err := env.Client.Create(ctx, pod, client.DryRunAll); err != nil {
		t.Fatalf("the operator's pod is refused in %s: %v", operatorNamespace, err)
	}

	// The sample, in a namespace of its own.
	ns := env.Namespace(ctx, t)
	raw, err := os.ReadFile(filepath.Join(configDir, "samples/installation.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sample := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &sample.Object); err != nil {
		t.Fatal(err)
	}
	sample.SetNamespace(ns)
	testenv.WaitFor(ctx, t, "sample Installation created", func(ctx context.Context) (bool, string, error) {
		err := env.Client.Create(ctx, sample.DeepCopy())
		return err == nil, "", err
	})
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(sample.GroupVersionKind())
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: sample.GetName()}, got); err != nil {
		t.Fatal(err)
	}
	wantSpec, _ := json.Marshal(sample.Object["spec"])
	gotSpec, _ := json.Marshal(got.Object["spec"])
	if string(wantSpec) != string(gotSpec) {
		t.Errorf("the server changed the sample's spec (it sets every field, so no default should apply):\n got %s\nwant %s", gotSpec, wantSpec)
	}
}

// first is 1 for the objects the others need to exist, else 0.
func first(o *unstructured.Unstructured) int {
	if o.GetKind() == "Namespace" || o.GetKind() == "CustomResourceDefinition" {
		return 1
	}
	return 0
}
