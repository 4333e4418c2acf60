package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/installstrategy/installstrategy/internal/kubevirtdata"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/generate"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
)

// clusterVerbs are run in this order: apply installs the sample product
// that plan, diff --live and status then look at.
var clusterVerbs = []string{"list", "get", "publish", "apply", "plan", "diff", "status"}

// exampleNeedsVirtAPI: applying the whole KubeVirt strategy needs a virt-api
// that answers KubeVirt's admission webhooks; TestClusterApplyKubeVirtReleases
// plays that part and covers it. Every verb keeps other examples that run.
func exampleNeedsVirtAPI(line string) bool {
	return strings.Contains(line, "apply kv.yaml")
}

// exampleWalksAnUpgradePath: an upgrade-path walk needs a chain of signed
// versions in a registry or a chart repository of several versions, or an
// installation's revisions, each declaring the versions it follows;
// TestApplyWalksUpgradePathFromRegistry, TestApplyWalksUpgradePathFromStored,
// TestApplyWalksUpgradePathFromHelmRepository and
// TestApplyWalksUpgradePathFromRevisions build those and run the same
// commands (the same flags) against them.
func exampleWalksAnUpgradePath(line string) bool {
	return strings.Contains(line, "--walk-upgrade-path")
}

// TestClusterExamplesRunAsWritten runs the cluster verbs' --help examples
// as written against a cluster set up as they assume: KubeVirt's v1.9.0
// strategy ConfigMap kubevirt-install-strategy-abcde and a KubeVirt CR in
// namespace kubevirt, the sample product's strategies as files, an
// Installation "demo" in namespace sample, the registries they name
// (exampleRegistry).
func TestClusterExamplesRunAsWritten(t *testing.T) {
	env := testenv.New(t)
	testenv.Lock(t, testenv.SampleProductLock)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	crdPath, err := filepath.Abs("../../config/crd/bases/installstrategy.io_installations.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Testdata is found from the working folder, which changes below.
	t.Setenv("INSTALLSTRATEGY_KUBEVIRT_TESTDATA", kubevirtdata.Dir(t))
	dir := t.TempDir()
	t.Chdir(dir)
	kubeconfig := kubeconfigPath()

	for _, ns := range []string{"kubevirt", "sample"} {
		if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	cm := readConfigMap(t, "v1.9.0")
	cm.Name, cm.GenerateName, cm.Namespace = "kubevirt-install-strategy-abcde", "", "kubevirt"
	if _, err := env.Kube.CoreV1().ConfigMaps("kubevirt").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		// The ConfigMaps the examples stored, and the sample product.
		for _, l := range []string{metakeys.StrategyLabel, metakeys.KubeVirtStrategyLabel} {
			_ = env.Kube.CoreV1().ConfigMaps("kubevirt").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: l})
		}
		if _, err := engine.Uninstall(ctx, env.Config, engine.UninstallOptions{Owner: inventory.Owner{Namespace: "sample", Name: "sample"}, Wait: true}); err != nil {
			t.Errorf("uninstall the sample product: %v", err)
		}
		_ = env.Kube.CoreV1().Namespaces().Delete(ctx, "sample", metav1.DeleteOptions{})
	})
	for _, v := range []string{"v1.0.0", "v1.1.0"} {
		cfg := &identity.Config{Namespace: "sample", Registry: "registry.example/sample", Version: v}
		s, err := generate.Sample(cfg, generate.Options{})
		if err != nil {
			t.Fatal(err)
		}
		cm, err := codec.Encode(s, codec.EncodeOptions{Namespace: "sample"})
		if err != nil {
			t.Fatal(err)
		}
		y, _ := codec.MarshalYAML(cm)
		if err := os.WriteFile(filepath.Join(dir, "sample-"+v+".yaml"), y, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range map[string][]byte{
		"kubevirt-v1.8.4.configmap.yaml": kubevirtdata.Read(t, "v1.8.4", "configmap.yaml"),
		"kubevirt-v1.9.0.configmap.yaml": kubevirtdata.Read(t, "v1.9.0", "configmap.yaml"),
		"new.yaml":                       kubevirtdata.Read(t, "v1.9.0", "manifests.yaml"),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	registry := exampleRegistry(t, dir)
	env.InstallCRDFile(ctx, t, crdPath)
	createDeployedInstallation(ctx, t, env, "sample", "demo")
	createKubeVirtCR(ctx, t, env, "kubevirt")

	root := NewRootCommand(Streams{})
	for _, verb := range clusterVerbs {
		cmd, _, err := root.Find([]string{verb})
		if err != nil || cmd.Name() != verb {
			t.Fatalf("no %s command", verb)
		}
		ran := 0
		for _, line := range exampleLines(cmd.Example) {
			for _, part := range strings.Split(line, "&&") {
				part = strings.TrimSpace(part)
				args, ok := strings.CutPrefix(part, "kubectl installstrategy ")
				if !ok || exampleNeedsVirtAPI(part) || exampleWalksAnUpgradePath(part) {
					continue
				}
				args, redirect, _ := strings.Cut(args, ">")
				code, out, errOut := run(t, nil, append(strings.Fields(registry(args)), "--kubeconfig", kubeconfig)...)
				ran++
				if code != 0 && !((verb == "diff" || verb == "plan") && code == 1) {
					t.Errorf("example %q: exit %d\n%s%s", part, code, tail(out), errOut)
				}
				if f := strings.TrimSpace(redirect); f != "" {
					if err := os.WriteFile(filepath.Join(dir, f), []byte(out), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		if ran == 0 {
			t.Errorf("%s: no example ran", verb)
		}
	}

	// The apply example installed the sample product v1.0.0 in "sample":
	// edit one Deployment, and diff --live reports exactly that drift.
	code, out, errOut := run(t, nil, "diff", "--live", "sample-v1.0.0.yaml", "-n", "sample", "--kubeconfig", kubeconfig)
	if code != 0 {
		t.Fatalf("diff --live of the installed sample: exit %d\n%s%s", code, out, errOut)
	}
	patch := []byte(`[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"registry.example/other:v9"}]`)
	if _, err := env.Kube.AppsV1().Deployments("sample").Patch(ctx, "sample-controller", types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	code, out, _ = run(t, nil, "diff", "--live", "sample-v1.0.0.yaml", "-n", "sample", "--kubeconfig", kubeconfig)
	want := "drifted  Deployment.apps/sample/sample-controller\n           .spec.template.spec.containers[0].image: live \"registry.example/other:v9\", strategy \"registry.example/sample/sample-controller:v1.0.0\"\n"
	if code != 1 || out != want {
		t.Fatalf("diff --live after editing sample-controller: exit %d\n%s\nwant exactly:\n%s", code, out, want)
	}

	// uninstall's example removes what apply installed (the installation
	// "sample": the sample product has no Namespace object, so apply named
	// it after -n) and leaves the namespace, which someone else made.
	cmd, _, _ := root.Find([]string{"uninstall"})
	for _, line := range exampleLines(cmd.Example) {
		args, _ := strings.CutPrefix(line, "kubectl installstrategy ")
		code, out, errOut := run(t, nil, append(strings.Fields(args), "--kubeconfig", kubeconfig)...)
		if code != 0 {
			t.Fatalf("example %q: exit %d\n%s%s", line, code, out, errOut)
		}
	}
	if _, err := env.Kube.AppsV1().Deployments("sample").Get(ctx, "sample-controller", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("sample-controller after uninstall: %v", err)
	}
	if _, err := env.Kube.CoreV1().ConfigMaps("sample").Get(ctx, inventory.ConfigMapName(inventory.Owner{Namespace: "sample", Name: "sample"}), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("inventory after uninstall: %v", err)
	}
	if _, err := env.Kube.CoreV1().Namespaces().Get(ctx, "sample", metav1.GetOptions{}); err != nil {
		t.Errorf("namespace sample, made by someone else, after uninstall: %v", err)
	}
}

func createDeployedInstallation(ctx context.Context, t *testing.T, env *testenv.Env, ns, name string) {
	t.Helper()
	res := env.Dynamic.Resource(installationsGVR).Namespace(ns)
	created, err := res.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "installstrategy.io/v1alpha1", "kind": "Installation",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"version": "v1.0.0"},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Format(time.RFC3339)
	created.Object["status"] = map[string]any{"phase": "Deployed", "observedVersion": "v1.0.0", "targetVersion": "v1.0.0",
		"conditions": []any{
			map[string]any{"type": "Available", "status": "True", "reason": "AllComponentsReady", "message": "ready", "lastTransitionTime": now},
			map[string]any{"type": "Progressing", "status": "False", "reason": "AllComponentsReady", "message": "ready", "lastTransitionTime": now},
		}}
	if _, err := res.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createKubeVirtCRD creates a minimal KubeVirt CRD: virt-operator's own
// manifests have it, not the install strategy. (Like KubeVirt's, it has no
// status subresource.)
func createKubeVirtCRD(ctx context.Context, t *testing.T, env *testenv.Env) {
	t.Helper()
	env.EnsureKubeVirtCRD(ctx, t)
}

// createKubeVirtCR creates the KubeVirt CRD and a Deployed KubeVirt CR.
func createKubeVirtCR(ctx context.Context, t *testing.T, env *testenv.Env, ns string) {
	t.Helper()
	createKubeVirtCRD(ctx, t, env)
	res := env.Dynamic.Resource(kubevirtsGVR).Namespace(ns)
	testenv.WaitFor(ctx, t, "the KubeVirt CR is created", func(ctx context.Context) (bool, string, error) {
		cr, err := res.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt", "metadata": map[string]any{"name": "kubevirt"}, "spec": map[string]any{}}}, metav1.CreateOptions{})
		if err == nil {
			cr.Object["status"] = map[string]any{"phase": "Deployed", "targetKubeVirtVersion": "v1.9.0"}
			_, err = res.UpdateStatus(ctx, cr, metav1.UpdateOptions{})
		}
		switch {
		case apierrors.IsNotFound(err):
			return false, err.Error(), nil // Established comes a moment before the resource is served
		case apierrors.IsAlreadyExists(err):
			return true, "", nil
		}
		return err == nil, "", err
	})
	t.Cleanup(func() { _ = res.Delete(context.Background(), "kubevirt", metav1.DeleteOptions{}) })
}
