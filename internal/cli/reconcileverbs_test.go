package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/installstrategy/installstrategy/internal/testenv"
)

// smallStrategy is a product of namespaced objects and one ClusterRole named
// after the namespace, so tests running at once never share an object.
// v2 changes the controller's image, adds ConfigMap "added" and drops
// ConfigMap "dropped".
func smallStrategy(ns, version string) string {
	cm := func(name string) string {
		return fmt.Sprintf("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\ndata:\n  version: %s\n", name, ns, version)
	}
	text := fmt.Sprintf(`---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: small
  namespace: %[1]s
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: small-%[1]s
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get]
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: small-controller
  namespace: %[1]s
  annotations:
    installstrategy.io/role: controller
spec:
  replicas: 2
  selector:
    matchLabels: {app: small-controller}
  template:
    metadata:
      labels: {app: small-controller}
    spec:
      serviceAccountName: small
      containers:
      - name: controller
        image: example.com/small-controller:%[2]s
`, ns, version)
	if version == "v1" {
		return text + cm("config") + cm("dropped")
	}
	return text + cm("config") + cm("added")
}

var hexRE = regexp.MustCompile(`\b[0-9a-f]{32}\b`)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestClusterApplyPlanDiffLive: apply installs and rolls out; plan then has
// nothing to do; drift shows in diff --live; plan of v2 lists the create,
// updates and prune; apply of v2 prunes.
func TestClusterApplyPlanDiffLive(t *testing.T) {
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := env.Namespace(ctx, t)
	t.Cleanup(func() {
		_ = env.Kube.RbacV1().ClusterRoles().Delete(context.Background(), "small-"+ns, metav1.DeleteOptions{})
	})
	v1 := writeFile(t, "v1.yaml", smallStrategy(ns, "v1"))
	v2 := writeFile(t, "v2.yaml", smallStrategy(ns, "v2"))
	args := func(a ...string) []string { return append(a, clusterArgs(ns)...) }
	// Plain texts record no identity: give it, so the path is chosen right.
	v1args := []string{"--version", "v1", "--registry", "example.com"}
	v2args := []string{"--version", "v2", "--registry", "example.com"}

	code, out, errOut := run(t, nil, args(append([]string{"apply", v1, "--wait", "--timeout", "2m"}, v1args...)...)...)
	if code != 0 || !strings.Contains(out, "summary: 5 created") || !strings.Contains(out, "rolled over: true") {
		t.Fatalf("apply v1: exit %d\n%s\n%s", code, out, errOut)
	}
	d, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, "small-controller", metav1.GetOptions{})
	if err != nil || d.Status.ReadyReplicas != 2 {
		t.Fatalf("controller after apply --wait: %v ready %d", err, d.Status.ReadyReplicas)
	}

	code, out, errOut = run(t, nil, args(append([]string{"plan", "--strategy", v1}, v1args...)...)...)
	if code != 0 {
		t.Fatalf("plan after apply: exit %d, want 0 (nothing to do)\n%s\n%s", code, out, errOut)
	}
	code, out, _ = run(t, nil, args(append([]string{"diff", "--live", v1}, v1args...)...)...)
	if code != 0 || !strings.Contains(out, "the cluster matches the strategy") {
		t.Fatalf("diff --live after apply: exit %d\n%s", code, out)
	}

	// Drift: someone edits the image.
	patch := []byte(`[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"example.com/other:v9"}]`)
	if _, err := env.Kube.AppsV1().Deployments(ns).Patch(ctx, "small-controller", types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	code, out, _ = run(t, nil, args(append([]string{"diff", "--live", v1}, v1args...)...)...)
	want := "drifted  Deployment.apps/" + ns + "/small-controller\n           .spec.template.spec.containers[0].image: live \"example.com/other:v9\", strategy \"example.com/small-controller:v1\"\n"
	if code != 1 || out != want {
		t.Fatalf("diff --live after the edit: exit %d\n%s\nwant exactly:\n%s", code, out, want)
	}

	code, out, _ = run(t, nil, args(append([]string{"plan", "--strategy", v2}, v2args...)...)...)
	if code != 1 {
		t.Fatalf("plan v2 (table): exit %d, want 1\n%s", code, out)
	}
	// Hashes depend on the (random) namespace name.
	golden(t, "plan-small-v1-to-v2", hexRE.ReplaceAllString(strings.ReplaceAll(out, ns, "NAMESPACE"), "HASH"))
	code, out, _ = run(t, nil, args(append([]string{"plan", "--strategy", v2, "-o", "json"}, v2args...)...)...)
	if code != 1 {
		t.Fatalf("plan v2: exit %d, want 1\n%s", code, out)
	}
	for _, w := range []string{`"name": "added"`, `"action": "create"`, `"name": "dropped"`, `"action": "delete"`} {
		if !strings.Contains(out, w) {
			t.Errorf("plan v2 lacks %s:\n%s", w, out)
		}
	}
	code, out, errOut = run(t, nil, args(append([]string{"apply", v2, "--wait", "--timeout", "2m"}, v2args...)...)...)
	if code != 0 || !strings.Contains(out, "pruned ConfigMap/"+ns+"/dropped") {
		t.Fatalf("apply v2: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "dropped", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("dropped ConfigMap still there: %v", err)
	}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "added", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = run(t, nil, args(append([]string{"plan", "--strategy", v2}, v2args...)...)...)
	if code != 0 {
		t.Fatalf("plan after apply v2: exit %d %s", code, errOut)
	}
	code, _, errOut = run(t, nil, args("plan", "--strategy", filepath.Join(t.TempDir(), "missing.yaml"))...)
	if code != 2 {
		t.Fatalf("plan of a missing file: exit %d, want 2: %s", code, errOut)
	}
}
