package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/operator"
)

// createWidget creates a Widget of the sample product in the namespace.
func (e *e2e) createWidget(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	w := &unstructured.Unstructured{}
	w.SetAPIVersion("sample.installstrategy.io/v1alpha1")
	w.SetKind("Widget")
	w.SetName(name)
	if _, err := e.env.Dynamic.Resource(widgets).Namespace(e.ns).Create(ctx, w, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// deleteInstallation deletes the Installation (it goes once the operator
// has removed the product).
func (e *e2e) deleteInstallation(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	in, err := e.get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.Delete(ctx, in); err != nil {
		t.Fatal(err)
	}
}

// waitGone waits until the Installation no longer exists.
func (e *e2e) waitGone(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	testenv.WaitFor(ctx, t, "installation "+name+" gone", func(ctx context.Context) (bool, string, error) {
		in, err := e.get(ctx, name)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, "", err
		}
		return false, describe(in), nil
	})
}

// An Installation deleted while it is still Deploying (its api Deployment
// never becomes ready, and the step's deadline is far away) is removed at
// once: the rollout stops and the delete stages run, instead of waiting
// for the step's deadline.
func TestDeleteWhileDeploying(t *testing.T) {
	e := setup(t, withOptions(func(o *operator.Options) { o.StageDeadline = 30 * time.Minute }))
	ctx := t.Context()
	spec := sampleSpec("v1.0.0")
	spec.UninstallStrategy = v1alpha1.UninstallRemoveWorkloads
	spec.PruneCRDs = true
	spec.CustomizeComponents = &v1alpha1.CustomizeComponents{Patches: []v1alpha1.CustomizePatch{{
		ResourceKind: "Deployment", ResourceName: "sample-api", Type: v1alpha1.StrategicMergePatchType,
		Patch: `{"spec":{"template":{"metadata":{"labels":{"` + testenv.BehaviourLabel + `":"` + string(testenv.BehaviourNeverReady) + `"}}}}}`,
	}}}
	e.create(ctx, t, "sample", spec)
	testenv.WaitFor(ctx, t, "sample Deploying with sample-api written", func(ctx context.Context) (bool, string, error) {
		in, err := e.get(ctx, "sample")
		if err != nil {
			return false, "", err
		}
		var d appsv1.Deployment
		err = e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "sample-api"}, &d)
		return in.Status.Phase == v1alpha1.PhaseDeploying && err == nil, describe(in), nil
	})
	e.deleteInstallation(ctx, t, "sample")
	// testenv's default timeout is far below the step's deadline.
	e.waitGone(ctx, t, "sample")
	if e.exists(ctx, t, &appsv1.Deployment{}, "sample-api") {
		t.Error("deployment sample-api outlived the deleted installation")
	}
}

// The product's webhook (failurePolicy Fail, no pod serves it on kwok's
// nodes) guards the deletion of Widgets; deleting the Installation still
// completes: the webhook goes first.
func TestDeleteWithItsWebhookDown(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	spec := sampleSpec("v1.0.0")
	spec.UninstallStrategy = v1alpha1.UninstallRemoveWorkloads
	spec.PruneCRDs = true
	spec.CustomizeComponents = &v1alpha1.CustomizeComponents{Patches: []v1alpha1.CustomizePatch{{
		ResourceKind: "ValidatingWebhookConfiguration", ResourceName: "*", Type: v1alpha1.JSONPatchType,
		Patch: `[{"op":"replace","path":"/webhooks/0/rules/0/operations","value":["DELETE"]},{"op":"replace","path":"/webhooks/0/failurePolicy","value":"Fail"}]`,
	}}}
	e.create(ctx, t, "sample", spec)
	e.waitDeployed(ctx, t, "sample", "v1.0.0")
	e.createWidget(ctx, t, "w1")
	err := e.env.Dynamic.Resource(widgets).Namespace(e.ns).Delete(ctx, "w1", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
	if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Fatalf("deleting a widget with the webhook down: %v, want it refused by the webhook", err)
	}
	e.deleteInstallation(ctx, t, "sample")
	e.waitGone(ctx, t, "sample")
	owner := inventory.Owner{Namespace: e.ns, Name: "sample", Kind: inventory.KindInstallation}
	hooks, err := e.env.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{LabelSelector: owner.Selector()})
	if err != nil || len(hooks.Items) != 0 {
		t.Errorf("the installation's webhooks after the delete: %v %v", hooks, err)
	}
	if _, err := e.env.Dynamic.Resource(widgets).Namespace(e.ns).Get(ctx, "w1", metav1.GetOptions{}); err == nil {
		t.Error("widget w1 outlived the installation (pruneCRDs is set)")
	}
}
