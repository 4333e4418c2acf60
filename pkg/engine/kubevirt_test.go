package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/apply/applytest"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// The KubeVirt strategies install into the fixed namespace "kubevirt" and
// create cluster-scoped objects, so their tests run one at a time (across
// test binaries: a lock file), under a managed-by value of their own, and
// uninstall at the end.

var kubevirtOwner = inventory.Owner{Namespace: "kubevirt", Name: "kubevirt-test"}

// kubevirtStrategy is KubeVirt's strategy as shipped (its webhooks
// failurePolicy Fail): a test installing it serves virt-api's webhooks
// with serveVirtAPI.
func kubevirtStrategy(t testing.TB, version string) *strategy.Strategy {
	t.Helper()
	return testenv.KubeVirtStrategyAsShipped(t, version)
}

// serveVirtAPI stands in for virt-api's pods (kwok runs none) behind the
// webhooks that admit the strategy's cluster instancetypes and
// preferences, with the certificate in virt-api's Secret.
func serveVirtAPI(tb testing.TB, env *testenv.Env) {
	tb.Helper()
	env.ServeWebhookStandIn(tb.Context(), tb, "kubevirt", "virt-api", "kubevirt-virt-api-certs")
}

type kubevirtEnv struct {
	env *testenv.Env
	rec *applytest.Recorder
	run func(s *strategy.Strategy, observed strategy.Identity, opts engine.Options) (*engine.Result, error)
}

func newKubeVirtEnv(t *testing.T) *kubevirtEnv {
	t.Helper()
	testenv.Lock(t, testenv.KubeVirtLock)
	env := testenv.New(t)
	cfg, rec := applytest.Record(env.Config)
	t.Cleanup(func() {
		ctx := context.WithoutCancel(t.Context())
		if _, err := engine.Uninstall(ctx, env.Config, engine.UninstallOptions{Owner: kubevirtOwner, Wait: true}); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		// The namespace controller refuses to finish a deletion while
		// discovery still lists the APIServices just removed ("stale
		// GroupVersion discovery") and backs off for minutes: delete the
		// namespace once discovery has caught up.
		env.WaitDiscoveryComplete(ctx, t)
		if err := env.Kube.CoreV1().Namespaces().Delete(ctx, "kubevirt", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleanup: %v", err)
		}
		testenv.WaitFor(ctx, t, "namespace kubevirt gone", func(ctx context.Context) (bool, string, error) {
			ns, err := env.Kube.CoreV1().Namespaces().Get(ctx, "kubevirt", metav1.GetOptions{})
			if err != nil {
				return strings.Contains(err.Error(), "not found"), err.Error(), nil
			}
			return false, string(ns.Status.Phase), nil
		})
	})
	serveVirtAPI(t, env)
	return &kubevirtEnv{env: env, rec: rec, run: func(s *strategy.Strategy, observed strategy.Identity, opts engine.Options) (*engine.Result, error) {
		opts.Observed = observed
		opts.Owner = kubevirtOwner
		opts.Roles = kinds.KubeVirtRoles()
		opts.Interval = 300 * time.Millisecond
		opts.StageDeadline = 2 * time.Minute
		return engine.Run(t.Context(), cfg, s, opts)
	}}
}

func TestKubeVirtInstallsOnVanillaCluster(t *testing.T) {
	ke := newKubeVirtEnv(t)
	ctx := t.Context()
	s := kubevirtStrategy(t, "v1.9.0")
	res, err := ke.run(s, strategy.Identity{}, engine.Options{})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if !res.RolledOver {
		t.Error("not rolled over")
	}
	ws := ke.rec.Writes()
	if first, it := firstWrite(ws, "/customresourcedefinitions"), firstWrite(ws, "/virtualmachineclusterinstancetypes"); first < 0 || it < first {
		t.Errorf("first CRD write #%d, first instancetype write #%d", first, it)
	}
	byKind := map[string]map[apply.Action]int{}
	for _, r := range res.Applied {
		if byKind[r.Ref.Kind] == nil {
			byKind[r.Ref.Kind] = map[apply.Action]int{}
		}
		byKind[r.Ref.Kind][r.Action]++
		switch r.Ref.Kind {
		case "SecurityContextConstraints", "Route":
			if r.Action != apply.ActionSkip || !strings.Contains(r.Reason, "not served") {
				t.Errorf("%s: %s %q, want skip (not served)", r.Ref, r.Action, r.Reason)
			}
		case "Deployment":
			wantFallback := r.Ref.Name == "virt-api" || r.Ref.Name == "virt-exportproxy"
			if r.Fallback != wantFallback {
				t.Errorf("%s: fallback %v, want %v (%s)", r.Ref, r.Fallback, wantFallback, r.Reason)
			}
		}
	}
	if n := byKind["VirtualMachineClusterInstancetype"][apply.ActionCreate]; n != 65 {
		t.Errorf("%d cluster instancetypes created, want 65", n)
	}
	if n := byKind["VirtualMachineClusterPreference"][apply.ActionCreate]; n != 54 {
		t.Errorf("%d cluster preferences created, want 54", n)
	}
	t.Logf("actions by kind: %v", byKind)

	secrets, err := ke.env.Kube.CoreV1().Secrets("kubevirt").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	withCert := 0
	for _, sec := range secrets.Items {
		if sec.Type == "kubernetes.io/tls" && len(sec.Data["tls.crt"]) > 0 && sec.Annotations[metakeys.AppliedHashAnnotation] != "" {
			withCert++
		}
	}
	if withCert != 17 {
		t.Errorf("%d TLS Secrets of the strategy have a certificate, want 17", withCert)
	}
	webhooks, err := ke.env.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "virt-api-validator", metav1.GetOptions{})
	if err != nil || len(webhooks.Webhooks[0].ClientConfig.CABundle) == 0 {
		t.Errorf("virt-api-validator has no CA bundle: %v", err)
	}

	// A resync of the whole strategy writes nothing. (Without rollout waits:
	// they only read, and kwok nodes that miss a heartbeat under load get
	// their pods marked unready for good.)
	ke.rec.Reset()
	res, err = ke.run(s, s.Identity, engine.Options{NoWait: true})
	if err != nil {
		t.Fatalf("resync: %v", err)
	}
	if w := ke.rec.Writes(); len(w) != 0 {
		for _, r := range res.Applied {
			if r.Action != apply.ActionUnchanged && r.Action != apply.ActionSkip {
				t.Logf("%s: %s %s %v", r.Ref, r.Action, r.Reason, r.Changes)
			}
		}
		t.Errorf("no-op resync wrote %d times, first %v", len(w), w[0])
	}
}

func TestKubeVirtUpgradeAddsAndRollbackPrunesVirtTemplate(t *testing.T) {
	ke := newKubeVirtEnv(t)
	old, cur := kubevirtStrategy(t, "v1.8.4"), kubevirtStrategy(t, "v1.9.0")
	added := map[strategy.ObjectRef]bool{}
	oldIndex := old.Index()
	for ref := range cur.Index() {
		if _, ok := oldIndex[ref]; !ok {
			added[ref] = true
		}
	}
	if len(added) != 37 {
		t.Fatalf("v1.9.0 adds %d objects, want 37", len(added))
	}

	if _, err := ke.run(old, strategy.Identity{}, engine.Options{NoWait: true}); err != nil {
		t.Fatalf("install v1.8.4: %v", err)
	}
	res, err := ke.run(cur, old.Identity, engine.Options{NoWait: true})
	if err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	created := map[strategy.ObjectRef]bool{}
	for _, r := range res.Applied {
		if r.Action == apply.ActionCreate {
			created[r.Ref] = true
		}
	}
	if len(created) != len(added) {
		t.Errorf("upgrade created %d objects, want the %d added ones", len(created), len(added))
	}
	for ref := range added {
		if !created[ref] {
			t.Errorf("upgrade did not create %s", ref)
		}
	}
	if len(res.Pruned) != 0 {
		t.Errorf("upgrade pruned %v", res.Pruned)
	}

	// Back to v1.8.4: everything added is pruned, but CRDs only with the flag.
	res, err = ke.run(old, cur.Identity, engine.Options{NoWait: true})
	if err != nil {
		t.Fatalf("rollback: %v", err)
	}
	crds := 0
	for ref := range added {
		if ref.Kind == "CustomResourceDefinition" {
			crds++
		}
	}
	if crds != 3 || len(res.Pruned) != len(added)-crds || len(res.Kept) != crds {
		t.Errorf("rollback pruned %d and kept %d, want %d and %d", len(res.Pruned), len(res.Kept), len(added)-crds, crds)
	}
	for _, ref := range append(append([]strategy.ObjectRef{}, res.Pruned...), res.Kept...) {
		if !added[ref] {
			t.Errorf("rollback pruned or kept %s, not added by v1.9.0", ref)
		}
	}
	res, err = ke.run(old, old.Identity, engine.Options{NoWait: true, PruneCRDs: true})
	if err != nil {
		t.Fatalf("prune CRDs: %v", err)
	}
	if len(res.Pruned) != crds {
		t.Errorf("with PruneCRDs pruned %v, want the %d CRDs", res.Pruned, crds)
	}
	for _, ref := range res.Pruned {
		if ref.Kind != "CustomResourceDefinition" || !added[ref] {
			t.Errorf("pruned %s", ref)
		}
	}
}
