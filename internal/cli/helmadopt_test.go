package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/internal/productdata"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// runHelmCLI runs the Helm v4 CLI of hack/tools/helm against the test
// cluster, with its configuration and caches in a folder of the test.
func runHelmCLI(t *testing.T, home string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(goTool(t, "helm"), append(args, "--kubeconfig", kubeconfigPath())...)
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestClusterAdoptHelmRelease: a release `helm install` made (metallb
// 0.14.9, unedited) is taken over by apply --adopt-helm-release with no
// pod restarted and no workload spec changed (same pod UIDs, specs and
// ReplicaSets); plan --adopt-helm-release shows it first. Afterwards every
// object is the installation's (labels, inventory, no field owned by
// Helm, no Helm annotation), the release Secrets are gone and kept in our
// Secret, Helm lists no release, the history names the release, the
// chart's next release upgrades it without a conflict, and uninstall
// removes everything.
func TestClusterAdoptHelmRelease(t *testing.T) {
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	ns := env.Namespace(ctx, t)
	home := t.TempDir()
	code, out, errOut := run(t, nil, "apply", "--adopt-helm-release", "absent", "-n", ns, "--kubeconfig", kubeconfigPath())
	if code != 1 || !strings.Contains(errOut, "helm release "+ns+"/absent: no release secrets") {
		t.Errorf("a release that is not there: exit %d\n%s%s", code, out, errOut)
	}
	chart := filepath.Join(renderTestdata, "charts", "metallb-v0.14.9")
	if out, err := runHelmCLI(t, home, "install", "lb", chart, "-n", ns); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = runHelmCLI(t, home, "uninstall", "lb", "-n", ns) })
	env.WaitDeploymentRolledOut(ctx, t, ns, "lb-metallb-controller")
	env.WaitDaemonSetRolledOut(ctx, t, ns, "lb-metallb-speaker")
	manifest, err := runHelmCLI(t, home, "get", "manifest", "lb", "-n", ns)
	if err != nil {
		t.Fatalf("helm get manifest: %v\n%s", err, manifest)
	}
	release, _, err := strategy.Parse([]byte(manifest), strategy.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods := func() map[string]string {
		list, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, p := range list.Items {
			out[p.Name] = string(p.UID)
		}
		return out
	}
	// specs are the workloads' specs and the Deployment's ReplicaSets: a
	// change of either means a rollout. (A Deployment's generation moves
	// with its annotations too, so it is not the measure.)
	specs := func() map[strategy.ObjectRef]string {
		out := map[strategy.ObjectRef]string{}
		d, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, "lb-metallb-controller", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ds, err := env.Kube.AppsV1().DaemonSets(ns).Get(ctx, "lb-metallb-speaker", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rs, err := env.Kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dj, _ := json.Marshal(d.Spec)
		dsj, _ := json.Marshal(ds.Spec)
		out[strategy.ObjectRef{Kind: "Deployment", Name: d.Name}] = string(dj)
		out[strategy.ObjectRef{Kind: "DaemonSet", Name: ds.Name}] = fmt.Sprintf("generation %d %s", ds.Generation, dsj)
		for _, r := range rs.Items {
			out[strategy.ObjectRef{Kind: "ReplicaSet", Name: r.Name}] = fmt.Sprintf("generation %d", r.Generation)
		}
		return out
	}
	podsBefore, specsBefore := pods(), specs()

	code, out, errOut = run(t, nil, "plan", "--adopt-helm-release", "lb", "-n", ns, "--kubeconfig", kubeconfigPath())
	if code != 1 {
		t.Fatalf("plan --adopt-helm-release: exit %d, want 1 (objects to take over)\n%s%s", code, tail(out), errOut)
	}
	for _, w := range []string{"then retire helm release " + ns + "/lb revision 1 (chart metallb 0.14.9)", "sh.helm.release.v1.lb.v1", "secret/installstrategy-helm-release-lb"} {
		if !strings.Contains(out, w) {
			t.Errorf("plan does not say %q:\n%s", w, tail(out))
		}
	}
	if _, err := env.Kube.CoreV1().Secrets(ns).Get(ctx, "sh.helm.release.v1.lb.v1", metav1.GetOptions{}); err != nil {
		t.Fatalf("plan touched the release: %v", err)
	}

	adopted := &productInstall{Product: productdata.Product{Name: "adopted helm release"}, ns: ns, name: ns}
	t.Cleanup(func() { adopted.remove(t) }) // its CRDs and cluster roles would stay in later tests' way
	code, out, errOut = run(t, nil, "apply", "--adopt-helm-release", "lb", "-n", ns, "--kubeconfig", kubeconfigPath())
	if code != 0 {
		t.Fatalf("apply --adopt-helm-release: exit %d\n%s%s", code, tail(out), errOut)
	}
	if !strings.Contains(out, "retired helm release "+ns+"/lb revision 1") {
		t.Errorf("apply does not report the retirement:\n%s", tail(out))
	}

	// Nothing restarted, no workload's spec written.
	sameVersions(t, "the adoption: pods", toAny(podsBefore), toAny(pods()))
	sameVersions(t, "the adoption: workloads", specsBefore, specs())
	// Every object of the release is the installation's.
	owner := inventory.Owner{Namespace: ns, Name: ns, Kind: inventory.KindPlugin}
	objs := inventoryObjects(ctx, t, env, owner, func(u *unstructured.Unstructured) string {
		var helmFields []string
		for _, f := range u.GetManagedFields() {
			if strings.HasPrefix(f.Manager, "helm") {
				helmFields = append(helmFields, f.Manager)
			}
		}
		a := u.GetAnnotations()
		return strings.Join(helmFields, ",") + "|" + a[metakeys.HelmReleaseNameAnnotation] + a[metakeys.HelmReleaseNamespaceAnnotation]
	})
	for _, o := range release.Objects {
		ref := strategy.RefOf(o)
		if ref.Namespace == "" && o.GetKind() != "CustomResourceDefinition" && !strings.HasPrefix(o.GetKind(), "Cluster") && o.GetKind() != "ValidatingWebhookConfiguration" {
			ref.Namespace = ns
		}
		v, ok := objs[ref]
		switch {
		case !ok:
			t.Errorf("%s of the release is not in the inventory", ref)
		case v != "|":
			t.Errorf("%s still Helm's: field managers %q, annotations %q", ref, strings.Split(v, "|")[0], strings.Split(v, "|")[1])
		}
	}
	// Helm no longer knows the release; our copy is kept.
	if _, err := env.Kube.CoreV1().Secrets(ns).Get(ctx, "sh.helm.release.v1.lb.v1", metav1.GetOptions{}); err == nil {
		t.Error("release secret sh.helm.release.v1.lb.v1 is still there")
	}
	backup, err := env.Kube.CoreV1().Secrets(ns).Get(ctx, "installstrategy-helm-release-lb", metav1.GetOptions{})
	if err != nil || len(backup.Data["sh.helm.release.v1.lb.v1"]) == 0 || backup.Type != metakeys.HelmReleaseBackupSecretType {
		t.Errorf("backup secret: %v", err)
	}
	if out, err := runHelmCLI(t, home, "list", "-n", ns, "-q"); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("helm list after the adoption: %v %q", err, out)
	}
	if out, err := runHelmCLI(t, home, "upgrade", "lb", chart, "-n", ns); err == nil {
		t.Errorf("helm upgrade of the retired release succeeded:\n%s", out)
	}
	_, out, _ = run(t, nil, "history", ns, "-n", ns, "--kubeconfig", kubeconfigPath())
	if !strings.Contains(out, "helm release "+ns+"/lb revision 1 (chart metallb 0.14.9)") {
		t.Errorf("history does not name the release:\n%s", out)
	}

	// The next release of the chart upgrades the adopted objects: nothing
	// of Helm's is in the way (no conflict), and the plan is clean after.
	code, out, errOut = run(t, nil, "encode", "--from-helm", filepath.Join(renderTestdata, "charts", "metallb-v0.15.3"), "--release-name", "lb", "-n", ns, "--kube-version", "v1.36.3")
	if code != 0 {
		t.Fatalf("encode --from-helm: exit %d: %s", code, errOut)
	}
	next := writeFile(t, "metallb-0.15.3.yaml", out)
	code, out, errOut = run(t, nil, "apply", next, "-n", ns, "--wait", "--timeout", "3m", "--kubeconfig", kubeconfigPath())
	if sum := summaryCounts(t, out); code != 0 || sum["conflicts"] != 0 || sum["created"] != 2 {
		t.Fatalf("upgrade after the adoption: exit %d, %v (want the 2 CRDs 0.15.3 adds created, no conflict)\n%s%s", code, sum, tail(out), errOut)
	}
	for _, args := range [][]string{{"plan", next}, {"diff", "--live", next}} {
		if code, out, errOut := run(t, nil, append(args, "-n", ns, "--kubeconfig", kubeconfigPath())...); code != 0 {
			t.Errorf("%v after the upgrade: exit %d\n%s%s", args, code, tail(out), errOut)
		}
	}
	uninstallProduct(ctx, t, env, adopted)
}

func toAny(m map[string]string) map[strategy.ObjectRef]string {
	out := map[strategy.ObjectRef]string{}
	for k, v := range m {
		out[strategy.ObjectRef{Kind: "Pod", Name: k}] = v
	}
	return out
}
