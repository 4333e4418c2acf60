package engine_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// denyLabelled makes the API server refuse, by a ValidatingAdmissionPolicy
// (admission, not validation: a dry run meets it too), any Secret of ns
// labelled preflight=deny.
func denyLabelled(t *testing.T, env *testenv.Env, ns string) {
	ctx := t.Context()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "preflight-" + ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"secrets"}},
				}}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "!has(object.metadata.labels) || !('preflight' in object.metadata.labels) || object.metadata.labels['preflight'] != 'deny'",
				Message:    "labelled preflight=deny",
			}},
		},
	}
	pols := env.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	if _, err := pols.Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pols.Delete(t.Context(), policy.Name, metav1.DeleteOptions{}) })
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}},
		},
	}
	bindings := env.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	if _, err := bindings.Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bindings.Delete(t.Context(), binding.Name, metav1.DeleteOptions{}) })
	// The policy takes effect once the API server has loaded it: wait
	// until a dry run of a labelled Secret is refused.
	probe := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "probe", Labels: map[string]string{"preflight": "deny"}}}
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := env.Kube.CoreV1().Secrets(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the policy never refused a labelled Secret: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// The server-side preflight refuses a whole run, before its first write,
// when the API server would refuse any object it writes: by validation
// (a Deployment with negative replicas, a Service without ports) or by
// admission (a Secret a ValidatingAdmissionPolicy denies), each named.
// Nothing is written: not the objects of the steps before them, not the
// inventory; on an upgrade (where the preflight runs by default) the
// installed objects keep their values. Without the preflight
// (PreflightNever) the first steps are written before the refusal, which is
// what the preflight is for.
func TestServerPreflightRefusesBeforeAnyWrite(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	denyLabelled(t, env, ns)
	owner := inventory.Owner{Namespace: ns, Name: "preflight"}

	bad := func() []*unstructured.Unstructured {
		deploy := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "negative", "namespace": ns},
			"spec": map[string]any{"replicas": int64(-1),
				"selector": map[string]any{"matchLabels": map[string]any{"app": "x"}},
				"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "x"}},
					"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "busybox"}}}}},
		}}
		svc := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Service",
			"metadata": map[string]any{"name": "portless", "namespace": ns},
			"spec":     map[string]any{"selector": map[string]any{"app": "x"}},
		}}
		secret := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Secret",
			"metadata": map[string]any{"name": "denied", "namespace": ns, "labels": map[string]any{"preflight": "deny"}},
		}}
		return []*unstructured.Unstructured{deploy, svc, secret}
	}
	wantRefused := []strategy.ObjectRef{
		{Group: "apps", Kind: "Deployment", Namespace: ns, Name: "negative"},
		{Kind: "Service", Namespace: ns, Name: "portless"},
		{Kind: "Secret", Namespace: ns, Name: "denied"},
	}
	checkRefusal := func(t *testing.T, err error) {
		t.Helper()
		var pe *engine.PreflightError
		if !errors.As(err, &pe) {
			t.Fatalf("want a *engine.PreflightError, got %v", err)
		}
		var got []strategy.ObjectRef
		for _, r := range pe.Refused {
			got = append(got, r.Ref)
		}
		for _, ref := range wantRefused {
			if !slices.Contains(got, ref) {
				t.Errorf("%s not refused: %v", ref, err)
			}
		}
		if len(got) != len(wantRefused) {
			t.Errorf("refused %v, want %v", got, wantRefused)
		}
		if !strings.Contains(err.Error(), "labelled preflight=deny") || !strings.Contains(err.Error(), "nothing was written") {
			t.Errorf("the refusal does not say the policy's message and that nothing was written: %v", err)
		}
	}
	first := configMapObject(ns, "first")
	s := &strategy.Strategy{Identity: strategy.Identity{Version: "v1"}, Objects: append([]*unstructured.Unstructured{first}, bad()...)}
	_, err := engine.Run(ctx, env.Config, s, engine.Options{Owner: owner, StageDeadline: time.Minute, NoWait: true, ServerPreflight: engine.PreflightAlways})
	checkRefusal(t, err)
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "first", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the ConfigMap of the first step was written before the refusal: %v", err)
	}
	if invs, err := env.Kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	} else {
		for _, cm := range invs.Items {
			if cm.Name != "kube-root-ca.crt" {
				t.Errorf("ConfigMap %s written before the refusal", cm.Name)
			}
		}
	}

	// An upgrade (preflight by default): v1 installed, v2 changes the
	// ConfigMap and holds the refused objects: the ConfigMap keeps v1's
	// value.
	good := &strategy.Strategy{Identity: strategy.Identity{Version: "v1"}, Objects: []*unstructured.Unstructured{configMapObject(ns, "first")}}
	if _, err := engine.Run(ctx, env.Config, good, engine.Options{Owner: owner, StageDeadline: time.Minute}); err != nil {
		t.Fatal(err)
	}
	changed := configMapObject(ns, "first")
	changed.Object["data"] = map[string]any{"v": "v2"}
	v2 := &strategy.Strategy{Identity: strategy.Identity{Version: "v2"}, Objects: append([]*unstructured.Unstructured{changed}, bad()...)}
	_, err = engine.Run(ctx, env.Config, v2, engine.Options{Owner: owner, Observed: good.Identity, StageDeadline: time.Minute, NoWait: true})
	checkRefusal(t, err)
	cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "first", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["v"] != "new" {
		t.Errorf("the upgrade wrote the ConfigMap before the refusal: %v", cm.Data)
	}

	// Without the preflight the ConfigMap's step is written before the
	// write that fails.
	_, err = engine.Run(ctx, env.Config, v2, engine.Options{Owner: owner, Observed: good.Identity, StageDeadline: time.Minute, NoWait: true, ServerPreflight: engine.PreflightNever})
	if err == nil {
		t.Fatal("a run without the preflight wrote refused objects")
	}
	if cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "first", metav1.GetOptions{}); err != nil || cm.Data["v"] != "v2" {
		t.Errorf("without the preflight the first step should be written: %v %v", cm.Data, err)
	}
}

func requirements(spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "installstrategy.io/v1alpha1", "kind": "Requirements",
		"metadata": map[string]any{"name": "requirements"}, "spec": spec}}
}

// A strategy's declared requirements are checked against the real cluster
// before any write: met, the strategy installs and the declaration is
// neither applied nor recorded; unmet (an API server too old, an API not
// served, no node with a label, an upgrade from a version the strategy may
// not follow), the run is refused with one line each and nothing written,
// and Plan lists the same lines.
func TestDeclaredRequirements(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	owner := inventory.Owner{Namespace: ns, Name: "requirements"}
	nodes, err := env.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("nodes: %v", err)
	}
	var label map[string]any
	for k, v := range nodes.Items[0].Labels {
		label = map[string]any{k: v}
		break
	}
	met := &strategy.Strategy{Identity: strategy.Identity{Version: "v1.0.0"}, Objects: []*unstructured.Unstructured{
		configMapObject(ns, "a"),
		requirements(map[string]any{"kubernetesVersion": ">= 1.20.0-0", "apis": []any{"v1", "apps/v1/Deployment"},
			"nodes": []any{map[string]any{"matchLabels": label}}, "upgradeFrom": ">= 0.9.0"}),
	}}
	res, err := engine.Run(ctx, env.Config, met, engine.Options{Owner: owner, StageDeadline: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range res.Applied {
		if a.Ref.Kind == "Requirements" {
			t.Errorf("the declaration was applied: %+v", a)
		}
	}
	inv, err := inventory.NewStore(env.Kube).Get(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	for ref := range inv.Entries {
		if ref.Kind == "Requirements" {
			t.Errorf("the declaration is in the inventory: %v", ref)
		}
	}

	changed := configMapObject(ns, "a")
	changed.Object["data"] = map[string]any{"v": "v3"}
	unmet := &strategy.Strategy{Identity: strategy.Identity{Version: "v3.0.0"}, Objects: []*unstructured.Unstructured{
		changed, configMapObject(ns, "b"),
		requirements(map[string]any{"kubernetesVersion": "< 1.20.0-0", "apis": []any{"apps/v1/Gizmo", "nothing.installstrategy.test/v1"},
			"nodes": []any{map[string]any{"matchLabels": map[string]any{"installstrategy.test/never": "yes"}}}, "upgradeFrom": ">= 2.0.0"}),
	}}
	want := []string{
		`kubernetesVersion "< 1.20.0-0": the API server is v`,
		"apis: apps/v1/Gizmo is not served",
		"apis: nothing.installstrategy.test/v1 is not served",
		"nodes: no node carries installstrategy.test/never=yes",
		`upgradeFrom ">= 2.0.0": version v1.0.0 is installed`,
	}
	opts := engine.Options{Owner: owner, Observed: met.Identity, StageDeadline: time.Minute}
	_, err = engine.Run(ctx, env.Config, unmet, opts)
	var re *engine.RequirementsError
	if !errors.As(err, &re) {
		t.Fatalf("want a *engine.RequirementsError, got %v", err)
	}
	p, err := engine.Plan(ctx, env.Config, unmet, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range [][]string{re.Unmet, p.Unmet} {
		if len(got) != len(want) {
			t.Errorf("unmet %q, want %d lines", got, len(want))
			continue
		}
		for i := range want {
			if !strings.HasPrefix(got[i], want[i]) {
				t.Errorf("unmet[%d] %q, want %q…", i, got[i], want[i])
			}
		}
	}
	cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "a", metav1.GetOptions{})
	if err != nil || cm.Data["v"] != "new" {
		t.Errorf("the refused upgrade wrote a: %v %v", cm.Data, err)
	}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "b", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused upgrade created b: %v", err)
	}
}
