package engine

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/health"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// handlerDaemonSet returns the strategy's DaemonSet app/handler running
// image.
func handlerDaemonSet(image string) *unstructured.Unstructured {
	ds := obj("apps/v1", "DaemonSet", "app", "handler")
	labels := map[string]any{"app": "handler"}
	ds.Object["spec"] = map[string]any{
		"selector": map[string]any{"matchLabels": labels},
		"template": map[string]any{"metadata": map[string]any{"labels": labels},
			"spec": map[string]any{"containers": []any{map[string]any{"name": "handler", "image": image}}}},
	}
	return ds
}

// handlerPod returns a pod of app/handler carrying id, ready or failing
// as waiting says ("" for a ready pod).
func handlerPod(name string, id strategy.Identity, waiting string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "app", Labels: map[string]string{"app": "handler"},
		Annotations: map[string]string{metakeys.InstallStrategyVersionAnnotation: id.Version, metakeys.InstallStrategyRegistryAnnotation: id.Registry, metakeys.InstallStrategyIdentifierAnnotation: id.Identifier}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	if waiting != "" {
		p.Status.Conditions[0].Status = corev1.ConditionFalse
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "handler", RestartCount: 3, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: waiting}}}}
	}
	return p
}

// The DaemonSet canary of the update path (applyOne, canary) over the fake
// cluster: when it starts (an update whose pods are outdated, not an
// install, not a first creation), how it widens maxUnavailable once the
// canary pod is ready and restores it, and how a crash-looping canary pod
// stops the rollout with a FailedUpdate event. The cluster tests of
// reconcile_test.go (TestCanaryCrashLoopStopsRollout) show the same with
// the DaemonSet controller of a real cluster.
func TestCanaryWithFakes(t *testing.T) {
	owner := inventory.Owner{Namespace: "app", Name: "demo", Kind: inventory.KindInstallation}
	v1 := strategy.Identity{Registry: "example.com/demo", Version: "v1", Identifier: "id1"}
	v2 := strategy.Identity{Registry: "example.com/demo", Version: "v2", Identifier: "id2"}
	dsRef := strategy.RefOf(handlerDaemonSet(""))
	for _, tc := range []struct {
		name string
		path plan.Path
		// installed says whether the DaemonSet of v1 is live, rolled out.
		installed bool
		pods      []*corev1.Pod
		// canary are the reasons of the EventCanary events.
		canary []string
		// patched is the maxUnavailable the canary patched in ("" for
		// none).
		patched string
		// failed says the canary fails the rollout.
		failed bool
	}{{
		name: "an install rolls out without a canary", path: plan.PathCreate, installed: true,
		pods: []*corev1.Pod{handlerPod("old", v1, "")},
	}, {
		name: "a first DaemonSet on the update path has no canary", path: plan.PathUpdate,
	}, {
		name: "the canary pod is ready: widen, then restore", path: plan.PathUpdate, installed: true,
		pods:    []*corev1.Pod{handlerPod("old", v1, ""), handlerPod("new", v2, "")},
		canary:  []string{"canary started, maxUnavailable 1", "canary ready, maxUnavailable 10%", "rollout done, maxUnavailable 1"},
		patched: "10%",
	}, {
		name: "the canary pod crash-loops: the rollout stops", path: plan.PathUpdate, installed: true,
		pods:   []*corev1.Pod{handlerPod("old", v1, ""), handlerPod("new", v2, "CrashLoopBackOff")},
		canary: []string{"canary started, maxUnavailable 1"},
		failed: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			c := newFakeCluster(t, nil, nil)
			if tc.installed {
				res, err := c.applier(apply.Options{Identity: v1, Owner: owner}).Apply(ctx, handlerDaemonSet("handler:v1"))
				if err != nil {
					t.Fatal(err)
				}
				live := res.Object
				live.Object["status"] = map[string]any{"observedGeneration": int64(1), "desiredNumberScheduled": int64(2),
					"updatedNumberScheduled": int64(2), "numberReady": int64(2), "numberAvailable": int64(2)}
				if _, err := c.dyn.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}).Namespace("app").Update(ctx, live, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				// The canary patches maxUnavailable through the typed
				// client.
				if _, err := c.kube.AppsV1().DaemonSets("app").Create(ctx, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "handler", Namespace: "app"}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			for _, p := range tc.pods {
				if _, err := c.kube.CoreV1().Pods("app").Create(ctx, p, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			c.writes()
			c.kube.ClearActions()
			var canary []string
			opts := Options{Owner: owner, StageDeadline: time.Second, Interval: 10 * time.Millisecond, OnEvent: func(e Event) {
				if e.Type == EventCanary {
					canary = append(canary, e.Reason)
				}
			}}
			opts.defaults()
			a := c.applier(apply.Options{Identity: v2, Owner: owner})
			r := &run{opts: opts, s: &strategy.Strategy{Identity: v2}, a: a, kube: c.kube, inv: inventory.New(owner),
				checker: &health.Checker{Kube: c.kube, Identity: v2, PodsEvery: time.Second},
				res:     &Result{Plan: &plan.Plan{Path: tc.path}}}

			res, err := r.applyOne(ctx, a, plan.Step{Name: "handlers", Stage: kinds.StageWorkloads}, handlerDaemonSet("handler:v2"))
			var canaryErr *CanaryError
			if tc.failed != errors.As(err, &canaryErr) || !tc.failed && err != nil {
				t.Fatalf("apply: %v, want a canary failure: %t", err, tc.failed)
			}
			if tc.failed && (canaryErr.DaemonSet != dsRef || !strings.Contains(canaryErr.Error(), "CrashLoopBackOff")) {
				t.Errorf("canary error %v", canaryErr)
			}
			if want := map[bool]apply.Action{true: apply.ActionUpdate, false: apply.ActionCreate}[tc.installed]; res.Action != want {
				t.Errorf("action %s, want %s", res.Action, want)
			}
			if !slices.Equal(canary, tc.canary) {
				t.Errorf("canary events %q, want %q", canary, tc.canary)
			}
			if image := c.live(t, handlerDaemonSet("")).Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["image"]; image != "handler:v2" {
				t.Errorf("live image %v, want handler:v2", image)
			}
			var patched string
			var failedEvents []string
			for _, act := range c.kube.Actions() {
				switch act := act.(type) {
				case clienttesting.PatchAction:
					if act.GetResource().Resource == "daemonsets" {
						patched = string(act.GetPatch())
					}
				case clienttesting.CreateAction:
					if ev, ok := act.GetObject().(*corev1.Event); ok {
						failedEvents = append(failedEvents, ev.Reason+" "+ev.InvolvedObject.Name)
					}
				}
			}
			if tc.patched == "" && patched != "" || tc.patched != "" && !strings.Contains(patched, `"maxUnavailable":"`+tc.patched+`"`) {
				t.Errorf("maxUnavailable patch %s, want one to %q", patched, tc.patched)
			}
			if wantEvents := map[bool][]string{true: {FailedUpdateReason + " handler"}}[tc.failed]; !slices.Equal(failedEvents, wantEvents) {
				t.Errorf("events written %q, want %q", failedEvents, wantEvents)
			}
		})
	}
}
