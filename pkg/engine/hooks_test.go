package engine_test

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// asHook marks o as a Helm hook of events, with a weight and delete
// policies when given.
func asHook(o *unstructured.Unstructured, events, weight, policies string) *unstructured.Unstructured {
	ann := map[string]string{metakeys.HelmHookAnnotation: events}
	if weight != "" {
		ann[metakeys.HelmHookWeightAnnotation] = weight
	}
	if policies != "" {
		ann[metakeys.HelmHookDeletePolicyAnnotation] = policies
	}
	o.SetAnnotations(ann)
	return o
}

// hookJob is a Job of one pod that kwok completes (or fails, with
// testenv.BehaviourFail's labels).
func hookJob(ns, name string, podLabels map[string]string) *unstructured.Unstructured {
	labels := map[string]any{}
	for k, v := range podLabels {
		labels[k] = v
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "batch/v1", "kind": "Job",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"backoffLimit": int64(0),
			"template": map[string]any{
				"metadata": map[string]any{"labels": labels},
				"spec": map[string]any{
					"restartPolicy": "Never",
					"containers":    []any{map[string]any{"name": "hook", "image": "registry.example/hook:1"}},
				},
			},
		},
	}}
}

// hookLog records the objects a run applies and deletes, by step, in
// order.
type hookLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *hookLog) on(e engine.Event) {
	if e.Ref == (strategy.ObjectRef{}) || (e.Type != engine.EventApplied && e.Type != engine.EventPruned) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	step := e.Step
	if !strings.HasPrefix(step, "hook ") {
		step = "release"
	}
	verb := "apply"
	if e.Type == engine.EventPruned {
		verb = "delete"
	}
	l.lines = append(l.lines, step+" "+verb+" "+e.Ref.Kind+"/"+e.Ref.Name)
}

func (l *hookLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.lines
	l.lines = nil
	return out
}

// hooksOnly drops the release's Namespace lines (implicit namespaces).
func hooksOnly(lines []string) []string {
	return slices.DeleteFunc(slices.Clone(lines), func(l string) bool { return strings.HasPrefix(l, "release apply Namespace/") })
}

func exists(t *testing.T, env *testenv.Env, ns, kind, name string) bool {
	t.Helper()
	var err error
	switch kind {
	case "Job":
		_, err = env.Kube.BatchV1().Jobs(ns).Get(t.Context(), name, metav1.GetOptions{})
	case "ConfigMap":
		_, err = env.Kube.CoreV1().ConfigMaps(ns).Get(t.Context(), name, metav1.GetOptions{})
	case "ServiceAccount":
		_, err = env.Kube.CoreV1().ServiceAccounts(ns).Get(t.Context(), name, metav1.GetOptions{})
	default:
		t.Fatalf("kind %s", kind)
	}
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

func hookStrategy(version string, objs ...*unstructured.Unstructured) *strategy.Strategy {
	s := &strategy.Strategy{Identity: strategy.Identity{Version: version}, Objects: objs}
	s.Sort()
	return s
}

// Install hooks run as helm install runs them: the pre-install phase
// before the release's objects, by weight then name (a ConfigMap and a Job
// of equal weight by name; the ServiceAccount of weight -1 first), each
// Job waited for until it completed; the post-install phase after the
// release's objects, its hook-succeeded Job deleted after it completed,
// the others (before-hook-creation) left until they run again (the
// ServiceAccount of both phases is deleted and created anew). Hook objects are not in the
// inventory; a second run of the same strategy runs no hook again.
func TestHooksRunInHelmsOrder(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	s := hookStrategy("v1",
		configMapObject(ns, "app"),
		asHook(hookJob(ns, "b-create", nil), "pre-install,pre-upgrade", "1", ""),
		asHook(configMapObject(ns, "a-config"), "pre-install", "1", ""),
		asHook(&unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": "z-sa", "namespace": ns}}}, "pre-install,post-install", "-1", ""),
		asHook(hookJob(ns, "patch", nil), "post-install,post-upgrade", "", "before-hook-creation,hook-succeeded"),
	)
	owner := inventory.Owner{Namespace: ns, Name: "hooks"}
	var log hookLog
	opts := engine.Options{Owner: owner, StageDeadline: 2 * time.Minute, OnEvent: log.on}
	res, err := engine.Run(ctx, env.Config, s, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"hook pre-install apply ServiceAccount/z-sa",
		"hook pre-install apply ConfigMap/a-config",
		"hook pre-install apply Job/b-create",
		"release apply ConfigMap/app",
		// before-hook-creation: the pre-install phase's copy goes first.
		"hook post-install delete ServiceAccount/z-sa",
		"hook post-install apply ServiceAccount/z-sa",
		"hook post-install apply Job/patch",
		"hook post-install delete Job/patch",
	}
	got := hooksOnly(log.take())
	if !slices.Equal(got, want) {
		t.Fatalf("run:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	job, err := env.Kube.BatchV1().Jobs(ns).Get(ctx, "b-create", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if job.Status.Succeeded != 1 {
		t.Errorf("pre-install Job status %+v, want it completed", job.Status)
	}
	if exists(t, env, ns, "Job", "patch") {
		t.Error("the hook-succeeded Job is still there")
	}
	if !exists(t, env, ns, "ConfigMap", "a-config") {
		t.Error("the before-hook-creation ConfigMap is gone")
	}
	for _, a := range res.Applied {
		if a.Ref.Kind != "ConfigMap" && a.Ref.Kind != "Namespace" || a.Ref.Name == "a-config" {
			t.Errorf("hook %s among the release's results", a.Ref)
		}
	}
	inv, err := inventory.NewStore(env.Kube).Get(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	for ref := range inv.Entries {
		if ref.Name != "app" && ref.Kind != "Namespace" {
			t.Errorf("hook %s in the inventory", ref)
		}
	}
	if inv.HooksRan == "" {
		t.Errorf("inventory does not record that the hooks ran")
	}

	// The same strategy again: no hook runs; its plan says why.
	p, err := engine.Plan(ctx, env.Config, s, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Hooks) != 2 || p.Hooks[0].Phase != plan.PreUpgrade || p.Hooks[0].Skipped == "" {
		t.Errorf("plan of a re-run: hooks %+v, want the upgrade phases, skipped", p.Hooks)
	}
	if _, err := engine.Run(ctx, env.Config, s, opts); err != nil {
		t.Fatal(err)
	}
	if got := hooksOnly(log.take()); !slices.Equal(got, []string{"release apply ConfigMap/app"}) {
		t.Errorf("re-run: %v, want the release's ConfigMap alone", got)
	}
}

// A hook that fails stops the run before the release's objects, with an
// error naming the phase and the hook; its hook-failed policy deletes it.
func TestHookFailureStopsTheRun(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	s := hookStrategy("v1",
		configMapObject(ns, "app"),
		asHook(hookJob(ns, "broken", testenv.BehaviourLabels(testenv.BehaviourFail)), "pre-install", "", "hook-failed"),
	)
	owner := inventory.Owner{Namespace: ns, Name: "failing"}
	var log hookLog
	_, err := engine.Run(ctx, env.Config, s, engine.Options{Owner: owner, StageDeadline: 2 * time.Minute, OnEvent: log.on})
	var step *engine.StepError
	if !errors.As(err, &step) || step.Step != "hook pre-install" || !strings.Contains(err.Error(), "Job.batch/"+ns+"/broken") || !strings.Contains(err.Error(), "failed") {
		t.Fatalf("error %v, want a step error of hook pre-install naming the Job", err)
	}
	t.Log(err)
	if exists(t, env, ns, "ConfigMap", "app") {
		t.Error("the release's ConfigMap was applied after the hook failed")
	}
	if exists(t, env, ns, "Job", "broken") {
		t.Error("the hook-failed Job is still there")
	}
	if got, want := hooksOnly(log.take()), []string{"hook pre-install apply Job/broken", "hook pre-install delete Job/broken"}; !slices.Equal(got, want) {
		t.Errorf("run: %v, want %v", got, want)
	}
}

// An install runs the install hooks only: the objects of the upgrade,
// rollback and delete hooks are not created; an upgrade then runs the
// upgrade hooks and not the install ones.
func TestHooksOfOtherPhasesNotApplied(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	strat := func(version string) *strategy.Strategy {
		return hookStrategy(version,
			configMapObject(ns, "app"),
			asHook(configMapObject(ns, "install"), "pre-install", "", ""),
			asHook(configMapObject(ns, "upgrade"), "pre-upgrade", "", ""),
			asHook(configMapObject(ns, "rollback"), "pre-rollback,post-rollback", "", ""),
			asHook(configMapObject(ns, "delete"), "pre-delete", "", ""),
			asHook(configMapObject(ns, "test"), "test", "", ""),
		)
	}
	owner := inventory.Owner{Namespace: ns, Name: "phases"}
	var log hookLog
	opts := engine.Options{Owner: owner, StageDeadline: time.Minute, OnEvent: log.on}
	if _, err := engine.Run(ctx, env.Config, strat("v1"), opts); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"app": true, "install": true, "upgrade": false, "rollback": false, "delete": false, "test": false} {
		if got := exists(t, env, ns, "ConfigMap", name); got != want {
			t.Errorf("after install: ConfigMap %s exists %v, want %v", name, got, want)
		}
	}
	log.take()
	if _, err := engine.Run(ctx, env.Config, strat("v2"), opts); err != nil {
		t.Fatal(err)
	}
	if got, want := hooksOnly(log.take()), []string{"hook pre-upgrade apply ConfigMap/upgrade", "release apply ConfigMap/app"}; !slices.Equal(got, want) {
		t.Errorf("upgrade: %v, want %v", got, want)
	}
}

// A rollback (Options.Rollback) runs the rollback hooks instead of the
// upgrade hooks.
func TestRollbackRunsRollbackHooks(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	strat := func(version string) *strategy.Strategy {
		return hookStrategy(version,
			configMapObject(ns, "app-"+version),
			asHook(configMapObject(ns, "upgrade"), "pre-upgrade", "", ""),
			asHook(configMapObject(ns, "pre-rollback"), "pre-rollback", "", ""),
			asHook(configMapObject(ns, "post-rollback"), "post-rollback", "", "hook-succeeded"),
		)
	}
	owner := inventory.Owner{Namespace: ns, Name: "rollback"}
	var log hookLog
	opts := engine.Options{Owner: owner, StageDeadline: time.Minute, OnEvent: log.on}
	for _, v := range []string{"v1", "v2"} {
		if _, err := engine.Run(ctx, env.Config, strat(v), opts); err != nil {
			t.Fatal(err)
		}
	}
	log.take()
	opts.Rollback = true
	if _, err := engine.Run(ctx, env.Config, strat("v1"), opts); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"hook pre-rollback apply ConfigMap/pre-rollback",
		"release apply ConfigMap/app-v1",
		"release delete ConfigMap/app-v2",
		"hook post-rollback apply ConfigMap/post-rollback",
		"hook post-rollback delete ConfigMap/post-rollback",
	}
	if got := hooksOnly(log.take()); !slices.Equal(got, want) {
		t.Errorf("rollback:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Uninstall with the installed strategy runs its pre-delete hooks before
// it deletes anything and its post-delete hooks after the release's
// objects are gone; the hook objects are not the release's, so it does
// not delete them (their policy does).
func TestDeleteHooksAroundUninstall(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	s := hookStrategy("v1",
		configMapObject(ns, "app"),
		asHook(hookJob(ns, "scale-down", nil), "pre-delete", "", "hook-succeeded"),
		asHook(configMapObject(ns, "goodbye"), "post-delete", "", ""),
		asHook(configMapObject(ns, "install"), "pre-install", "", ""),
	)
	owner := inventory.Owner{Namespace: ns, Name: "deletes"}
	if _, err := engine.Run(ctx, env.Config, s, engine.Options{Owner: owner, StageDeadline: 2 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	var log hookLog
	deleted, err := engine.Uninstall(ctx, env.Config, engine.UninstallOptions{Owner: owner, Wait: true, Strategy: s, OnEvent: log.on})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"hook pre-delete apply Job/scale-down",
		"hook pre-delete delete Job/scale-down",
		"release delete ConfigMap/app",
		"hook post-delete apply ConfigMap/goodbye",
	}
	if got := log.take(); !slices.Equal(got, want) {
		t.Errorf("uninstall:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !slices.Contains(deleted, strategy.ObjectRef{Kind: "ConfigMap", Namespace: ns, Name: "app"}) {
		t.Errorf("deleted %v", deleted)
	}
	if !exists(t, env, ns, "ConfigMap", "goodbye") || exists(t, env, ns, "Job", "scale-down") {
		t.Error("post-delete ConfigMap absent or hook-succeeded Job present")
	}
	inv, err := inventory.NewStore(env.Kube).Get(ctx, owner)
	if err != nil || inv.Exists() {
		t.Errorf("inventory after uninstall: exists %v, %v", inv.Exists(), err)
	}
}

// An uninstall that keeps the CRDs leaves a released inventory; an
// install after it is an install again and runs the install hooks.
func TestInstallAfterReleasedUninstallRunsHooks(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	s := gizmoStrategy(ns, ns+".hooks.installstrategy.test")
	s.Objects = append(s.Objects, asHook(configMapObject(ns, "install"), "pre-install", "", ""))
	s.Sort()
	owner := inventory.Owner{Namespace: ns, Name: "released"}
	var log hookLog
	opts := engine.Options{Owner: owner, StageDeadline: time.Minute, OnEvent: log.on}
	for i := range 2 {
		if _, err := engine.Run(ctx, env.Config, s, opts); err != nil {
			t.Fatal(err)
		}
		if got := log.take(); !slices.Contains(got, "hook pre-install apply ConfigMap/install") {
			t.Errorf("install %d: %v, want the pre-install hook", i+1, got)
		}
		if _, err := engine.Uninstall(ctx, env.Config, engine.UninstallOptions{Owner: owner, KeepCRDs: true, Wait: true}); err != nil {
			t.Fatal(err)
		}
		inv, err := inventory.NewStore(env.Kube).Get(ctx, owner)
		if err != nil || !inv.Released {
			t.Fatalf("inventory after uninstall %d: released %v, %v", i+1, inv.Released, err)
		}
	}
}
