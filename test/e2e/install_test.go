package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/cli"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
)

func TestInstallAndUpgrade(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	e.create(ctx, t, "sample", sampleSpec("v1.0.0"))
	in := e.waitDeployed(ctx, t, "sample", "v1.0.0")

	wantID, _ := expectedIdentity(t, e.ns, "v1.0.0", nil)
	if in.Status.ObservedIdentifier != wantID || in.Status.TargetIdentifier != wantID || in.Status.ObservedRegistry != "registry.example/sample" {
		t.Errorf("observed %s %s, target %s; want identifier %s", in.Status.ObservedRegistry, in.Status.ObservedIdentifier, in.Status.TargetIdentifier, wantID)
	}
	assertCondition(t, in, v1alpha1.ConditionAvailable, metav1.ConditionTrue, v1alpha1.ReasonAllComponentsReady)
	assertCondition(t, in, v1alpha1.ConditionProgressing, metav1.ConditionFalse, v1alpha1.ReasonAllComponentsReady)
	assertCondition(t, in, v1alpha1.ConditionDegraded, metav1.ConditionFalse, v1alpha1.ReasonAllComponentsReady)
	assertCondition(t, in, v1alpha1.ConditionCreated, metav1.ConditionTrue, v1alpha1.ReasonAllResourcesCreated)
	assertCondition(t, in, v1alpha1.ConditionSynchronized, metav1.ConditionTrue, v1alpha1.ReasonAllResourcesSynchronized)
	if !slices.Contains(in.Finalizers, v1alpha1.Finalizer) {
		t.Errorf("finalizers %v, want %s", in.Finalizers, v1alpha1.Finalizer)
	}
	if s := in.Status.Strategy; s == nil || s.Source != v1alpha1.StrategySourceProduct || s.ConfigMap == "" || s.Digest == "" {
		t.Errorf("status.strategy = %+v, want source Product with its configmap and digest", s)
	}
	if len(in.Status.Components) != 3 {
		t.Errorf("components %+v, want api, controller and handler", in.Status.Components)
	}
	for _, c := range in.Status.Components {
		if !c.RolledOver || c.Ready != c.Desired || c.Role == "" {
			t.Errorf("component %+v not rolled over", c)
		}
	}
	var d appsv1.Deployment
	if owner := (inventory.Owner{Namespace: e.ns, Name: "sample", Kind: inventory.KindInstallation}); !e.exists(ctx, t, &d, "sample-api") || !owner.Owns(d.Labels) {
		t.Errorf("deployment sample-api labels %v, want those of installation %s", d.Labels, owner)
	}
	if !e.exists(ctx, t, &corev1.ConfigMap{}, "sample-legacy-settings") {
		t.Error("v1.0.0's configmap sample-legacy-settings is missing")
	}

	// Upgrade: Progressing with UpdateInProgress while Available stays true.
	e.update(ctx, t, "sample", func(in *v1alpha1.Installation) { in.Spec.Version = "v1.1.0" })
	var sawUpdate bool
	var last *v1alpha1.Installation
	err := pollInstallation(ctx, e, "sample", func(cur *v1alpha1.Installation) bool {
		last = cur
		if c := cur.Condition(v1alpha1.ConditionProgressing); c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonUpdateInProgress {
			sawUpdate = true
			if !cur.IsConditionTrue(v1alpha1.ConditionAvailable) {
				t.Errorf("Available not true during the update: %s", describe(cur))
			}
			if cur.Status.Phase != v1alpha1.PhaseDeploying || cur.Status.TargetVersion != "v1.1.0" || cur.Status.ObservedVersion != "v1.0.0" {
				t.Errorf("during the update: %s", describe(cur))
			}
		}
		return cur.IsDeployed() && cur.Status.ObservedVersion == "v1.1.0"
	})
	if err != nil {
		t.Fatalf("upgrade: %v; last %s", err, describe(last))
	}
	in = last
	if !sawUpdate {
		t.Error("never saw Progressing=True/UpdateInProgress")
	}
	wantID, _ = expectedIdentity(t, e.ns, "v1.1.0", nil)
	if in.Status.ObservedIdentifier != wantID {
		t.Errorf("observed identifier %s, want %s", in.Status.ObservedIdentifier, wantID)
	}
	assertCondition(t, in, v1alpha1.ConditionAvailable, metav1.ConditionTrue, v1alpha1.ReasonAllComponentsReady)
	assertCondition(t, in, v1alpha1.ConditionProgressing, metav1.ConditionFalse, v1alpha1.ReasonAllComponentsReady)
	if !e.exists(ctx, t, &corev1.Service{}, "sample-controller-metrics") {
		t.Error("v1.1.0's service sample-controller-metrics is missing")
	}
	if e.exists(ctx, t, &corev1.ConfigMap{}, "sample-legacy-settings") {
		t.Error("sample-legacy-settings, removed in v1.1.0, is still there")
	}
	d = appsv1.Deployment{}
	e.exists(ctx, t, &d, "sample-api")
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "registry.example/sample/sample-api:v1.1.0" {
		t.Errorf("sample-api image %s", img)
	}
	// Garbage collection (after the status is written) leaves the
	// deployed strategy and those status.history names (v1.0.0's), for
	// rollback.
	testenv.WaitFor(ctx, t, "v1.1.0's and v1.0.0's strategies stored, v1.1.0 newest in status.history", func(ctx context.Context) (bool, string, error) {
		cms, err := e.env.Kube.CoreV1().ConfigMaps(e.ns).List(ctx, metav1.ListOptions{LabelSelector: metakeys.StrategyLabel})
		if err != nil {
			return false, "", err
		}
		ids := make([]string, 0, len(cms.Items))
		for i := range cms.Items {
			ids = append(ids, codec.DescribeConfigMap(&cms.Items[i]).Identity.Version)
		}
		slices.Sort(ids)
		cur, err := e.get(ctx, "sample")
		if err != nil {
			return false, "", err
		}
		h := cur.Status.History
		return strings.Join(ids, ",") == "v1.0.0,v1.1.0" && len(h) == 2 && h[0].Version == "v1.1.0" && h[0].Identifier == wantID && h[1].Version == "v1.0.0",
			strings.Join(ids, ",") + fmt.Sprintf(" history %+v", h), nil
	})

	// Rollback through the plugin: spec.strategy points at v1.0.0's stored
	// strategy (its digest pinned) and the operator rolls it out.
	var out, errOut bytes.Buffer
	if code := cli.Main([]string{"rollback", "sample", "--yes", "-n", e.ns, "--kubeconfig", os.Getenv(testenv.KubeconfigEnv)}, cli.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}); code != 0 {
		t.Fatalf("kubectl installstrategy rollback: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	in = e.waitDeployed(ctx, t, "sample", "v1.0.0")
	if s := in.Spec.Strategy; s == nil || s.ConfigMap == nil || s.ConfigMap.Digest == "" {
		t.Errorf("spec.strategy after rollback: %+v, want a ConfigMap with its digest", s)
	}
	if !e.exists(ctx, t, &corev1.ConfigMap{}, "sample-legacy-settings") {
		t.Error("v1.0.0's configmap sample-legacy-settings is not back after the rollback")
	}
	testenv.WaitFor(ctx, t, "the rollback recorded as revision 3", func(ctx context.Context) (bool, string, error) {
		cur, err := e.get(ctx, "sample")
		if err != nil {
			return false, "", err
		}
		h := cur.Status.History
		return len(h) == 3 && h[0].Revision == 3 && h[0].Version == "v1.0.0" && h[0].Source == v1alpha1.StrategySourceConfigMap, fmt.Sprintf("%+v", h), nil
	})
	// The plugin's history of an Installation is its status.history.
	out.Reset()
	if code := cli.Main([]string{"history", "sample", "-n", e.ns, "--kubeconfig", os.Getenv(testenv.KubeconfigEnv), "-o", "jsonpath={.revisions[*].revision} {.revisions[*].identity.version}"},
		cli.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}); code != 0 || out.String() != "3 2 1 v1.0.0 v1.1.0 v1.0.0" {
		t.Errorf("kubectl installstrategy history: exit %d %q, want revisions 3 2 1 of v1.0.0 v1.1.0 v1.0.0\n%s", code, out.String(), errOut.String())
	}
}

// pollInstallation polls until done returns true.
func pollInstallation(ctx context.Context, e *e2e, name string, done func(*v1alpha1.Installation) bool) error {
	return testenv.Poll(ctx, name, func(ctx context.Context) (bool, string, error) {
		in, err := e.get(ctx, name)
		if err != nil {
			return false, "", err
		}
		return done(in), describe(in), nil
	})
}

func TestCustomizeComponents(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	e.create(ctx, t, "sample", sampleSpec("v1.0.0"))
	before := e.waitDeployed(ctx, t, "sample", "v1.0.0")

	cc := &v1alpha1.CustomizeComponents{Patches: []v1alpha1.CustomizePatch{
		{ResourceKind: "Deployment", ResourceName: "sample-controller", Type: v1alpha1.StrategicMergePatchType, Patch: `{"spec":{"replicas":4}}`},
		{ResourceKind: "ConfigMap", ResourceName: "sample-config", Type: v1alpha1.JSONPatchType, Patch: `[{"op":"add","path":"/data/customized","value":"yes"}]`},
	}}
	e.update(ctx, t, "sample", func(in *v1alpha1.Installation) { in.Spec.CustomizeComponents = cc })
	wantID, _ := expectedIdentity(t, e.ns, "v1.0.0", cc)
	if wantID == before.Status.ObservedIdentifier {
		t.Fatalf("the patches did not change the identifier %s", wantID)
	}
	var last *v1alpha1.Installation
	if err := pollInstallation(ctx, e, "sample", func(in *v1alpha1.Installation) bool {
		last = in
		return in.IsDeployed() && in.Status.ObservedIdentifier == wantID
	}); err != nil {
		t.Fatalf("customised rollout: %v; last %s", err, describe(last))
	}
	d := e.env.WaitDeploymentRolledOut(ctx, t, e.ns, "sample-controller")
	if *d.Spec.Replicas != 4 {
		t.Errorf("sample-controller replicas %d, want 4", *d.Spec.Replicas)
	}
	var cm corev1.ConfigMap
	if !e.exists(ctx, t, &cm, "sample-config") || cm.Data["customized"] != "yes" {
		t.Errorf("sample-config data %v, want customized=yes", cm.Data)
	}
}

func TestSecondInstallationIsNotActive(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	e.create(ctx, t, "first", sampleSpec("v1.0.0"))
	e.waitDeployed(ctx, t, "first", "v1.0.0")
	e.create(ctx, t, "second", sampleSpec("v1.1.0"))
	var last *v1alpha1.Installation
	if err := pollInstallation(ctx, e, "second", func(in *v1alpha1.Installation) bool {
		last = in
		c := in.Condition(v1alpha1.ConditionSynchronized)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonAnotherInstallationActive
	}); err != nil {
		t.Fatalf("second: %v; last %s", err, describe(last))
	}
	if last.Status.Phase != v1alpha1.PhaseDeleted || last.Status.TargetVersion != "" {
		t.Errorf("second: %s, want phase Deleted and no target", describe(last))
	}
	first, err := e.get(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	if !first.IsDeployed() || first.Status.ObservedVersion != "v1.0.0" {
		t.Errorf("first: %s", describe(first))
	}
	var d appsv1.Deployment
	e.exists(ctx, t, &d, "sample-api")
	if !(inventory.Owner{Namespace: e.ns, Name: "first"}).Owns(d.Labels) || d.Spec.Template.Spec.Containers[0].Image != "registry.example/sample/sample-api:v1.0.0" {
		t.Errorf("sample-api changed hands: labels %v image %s", d.Labels, d.Spec.Template.Spec.Containers[0].Image)
	}
}

var widgets = schema.GroupVersionResource{Group: "sample.installstrategy.io", Version: "v1alpha1", Resource: "widgets"}

func TestUninstall(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	spec := sampleSpec("v1.0.0")
	spec.PruneCRDs = true
	// No pod serves the sample's webhook on kwok's nodes: a stand-in
	// serves it with the engine's certificate (failurePolicy Fail kept).
	hook := e.env.ServeWebhookStandIn(ctx, t, e.ns, "sample-api", "sample-api-certs")
	e.create(ctx, t, "sample", spec)
	e.waitDeployed(ctx, t, "sample", "v1.0.0")

	e.createWidget(ctx, t, "w1")
	if hook.Reviews.Load() == 0 {
		t.Error("the Widget was created without a review by the sample's webhook")
	}
	e.deleteInstallation(ctx, t, "sample")
	// The default strategy blocks while a Widget exists.
	var last *v1alpha1.Installation
	if err := pollInstallation(ctx, e, "sample", func(in *v1alpha1.Installation) bool {
		last = in
		c := in.Condition(v1alpha1.ConditionDegraded)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonUninstallBlocked
	}); err != nil {
		t.Fatalf("blocked uninstall: %v; last %s", err, describe(last))
	}
	if !e.exists(ctx, t, &appsv1.Deployment{}, "sample-api") {
		t.Error("a blocked uninstall removed sample-api")
	}

	e.update(ctx, t, "sample", func(in *v1alpha1.Installation) { in.Spec.UninstallStrategy = v1alpha1.UninstallRemoveWorkloads })
	testenv.WaitFor(ctx, t, "installation gone", func(ctx context.Context) (bool, string, error) {
		in, err := e.get(ctx, "sample")
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, "", err
		}
		return false, describe(in), nil
	})
	for _, name := range []string{"sample-api", "sample-controller"} {
		if e.exists(ctx, t, &appsv1.Deployment{}, name) {
			t.Errorf("deployment %s still exists", name)
		}
	}
	if e.exists(ctx, t, &appsv1.DaemonSet{}, "sample-handler") {
		t.Error("daemonset sample-handler still exists")
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	err := e.c.Get(ctx, client.ObjectKey{Name: "widgets.sample.installstrategy.io"}, crd)
	if err == nil && crd.DeletionTimestamp == nil {
		t.Error("crd widgets still exists (pruneCRDs is set)")
	}
	cms, err := e.env.Kube.CoreV1().ConfigMaps(e.ns).List(ctx, metav1.ListOptions{LabelSelector: metakeys.StrategyLabel})
	if err != nil || len(cms.Items) != 0 {
		t.Errorf("stored strategies left: %v %v", len(cms.Items), err)
	}
	if _, err := e.env.Dynamic.Resource(widgets).Namespace(e.ns).Get(ctx, "w1", metav1.GetOptions{}); err == nil {
		t.Error("widget w1 still exists")
	}
}
