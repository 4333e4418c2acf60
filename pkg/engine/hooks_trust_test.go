package engine_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/inventory"
)

// A hook's delete policy never deletes a live object that does not carry
// the installation's labels. Someone else's ConfigMap of a
// before-hook-creation hook's name: the run stops before the hook, naming
// it. Someone else's ConfigMap of a hook-failed hook's name: the hook's
// apply conflicts and the policy leaves it. A hook-succeeded hook's
// object another writer took over (its labels replaced) while the phase
// ran: the policy leaves it. Each object keeps its data.
func TestHookNeverDeletesAForeignObject(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	foreign := func(t *testing.T, name string) {
		t.Helper()
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"owner": "someone-else"}},
			Data:       map[string]string{"v": "theirs"},
		}
		if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	theirs := func(t *testing.T, name string) {
		t.Helper()
		cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s after the run: %v (someone else's object was deleted)", name, err)
		}
		if cm.Data["v"] != "theirs" {
			t.Errorf("%s after the run: data %v, want someone else's", name, cm.Data)
		}
	}
	refused := func(t *testing.T, err error, phase, name, policy string) {
		t.Helper()
		var step *engine.StepError
		if !errors.As(err, &step) || step.Step != "hook "+phase {
			t.Fatalf("error %v, want a step error of hook %s", err, phase)
		}
		if !strings.Contains(err.Error(), ns+"/"+name) || !strings.Contains(err.Error(), "delete policy "+policy) || !strings.Contains(err.Error(), "not deleted") {
			t.Errorf("error %q does not name %s/%s and its refused %s policy", err, ns, name, policy)
		}
		t.Log(err)
	}

	t.Run("before-hook-creation", func(t *testing.T) {
		foreign(t, "bhc")
		s := hookStrategy("v1", configMapObject(ns, "app-bhc"), asHook(configMapObject(ns, "bhc"), "pre-install", "", "before-hook-creation"))
		_, err := engine.Run(ctx, env.Config, s, engine.Options{Owner: inventory.Owner{Namespace: ns, Name: "bhc"}, StageDeadline: time.Minute})
		refused(t, err, "pre-install", "bhc", "before-hook-creation")
		theirs(t, "bhc")
		if exists(t, env, ns, "ConfigMap", "app-bhc") {
			t.Error("the release's ConfigMap was applied after the hook was refused")
		}
	})

	t.Run("hook-failed", func(t *testing.T) {
		foreign(t, "failed")
		s := hookStrategy("v1", configMapObject(ns, "app-failed"), asHook(configMapObject(ns, "failed"), "pre-install", "", "hook-failed"))
		_, err := engine.Run(ctx, env.Config, s, engine.Options{Owner: inventory.Owner{Namespace: ns, Name: "failed"}, StageDeadline: time.Minute})
		refused(t, err, "pre-install", "failed", "hook-failed")
		theirs(t, "failed")
	})

	t.Run("hook-succeeded", func(t *testing.T) {
		// Once the run applied the hook, another writer takes the
		// object over: its labels and data are theirs now.
		takeOver := func(e engine.Event) {
			if e.Type != engine.EventApplied || e.Ref.Kind != "ConfigMap" || e.Ref.Name != "succeeded" {
				return
			}
			cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "succeeded", metav1.GetOptions{})
			if err != nil {
				t.Error(err)
				return
			}
			cm.Labels = map[string]string{"owner": "someone-else"}
			cm.Data = map[string]string{"v": "theirs"}
			if _, err := env.Kube.CoreV1().ConfigMaps(ns).Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
				t.Error(err)
			}
		}
		s := hookStrategy("v1", configMapObject(ns, "app-succeeded"), asHook(configMapObject(ns, "succeeded"), "post-install", "", "hook-succeeded"))
		_, err := engine.Run(ctx, env.Config, s, engine.Options{Owner: inventory.Owner{Namespace: ns, Name: "succeeded"}, StageDeadline: time.Minute, OnEvent: takeOver})
		refused(t, err, "post-install", "succeeded", "hook-succeeded")
		theirs(t, "succeeded")
	})
}
