package cli

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/apply/applytest"
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

// smallProduct returns the cluster, a context bounded to 3 minutes and a
// namespace for smallStrategy, whose ClusterRole goes with the test.
func smallProduct(t *testing.T) (*testenv.Env, context.Context, string) {
	t.Helper()
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	t.Cleanup(cancel)
	ns := env.Namespace(ctx, t)
	t.Cleanup(func() {
		_ = env.Kube.RbacV1().ClusterRoles().Delete(context.Background(), "small-"+ns, metav1.DeleteOptions{})
	})
	return env, ctx, ns
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
	env, ctx, ns := smallProduct(t)
	v1 := writeFile(t, "v1.yaml", smallStrategy(ns, "v1"))
	v2 := writeFile(t, "v2.yaml", smallStrategy(ns, "v2"))
	args := func(a ...string) []string { return append(a, clusterArgs(ns)...) }
	// Plain texts record no identity: give it, so the path is chosen right.
	v1args := []string{"--version", "v1", "--registry", "example.com"}
	v2args := []string{"--version", "v2", "--registry", "example.com"}

	// Dry runs write nothing, the inventory included.
	before := configMapVersions(ctx, t, env, ns)
	code, out, errOut := run(t, nil, args(append([]string{"apply", "-f", v1, "--dry-run=server"}, v1args...)...)...)
	if code != 0 || !strings.Contains(out, "deployment.apps/small-controller -n "+ns+" created (server dry run)\n") {
		t.Fatalf("apply --dry-run=server: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = run(t, nil, args(append([]string{"apply", v1, "--dry-run=client", "-o", "name"}, v1args...)...)...)
	if code != 0 || !strings.Contains(out, "deployment.apps/small-controller\n") {
		t.Fatalf("apply --dry-run=client -o name: exit %d\n%s\n%s", code, out, errOut)
	}
	if after := configMapVersions(ctx, t, env, ns); !maps.Equal(before, after) {
		t.Fatalf("a dry run wrote ConfigMaps: before %v, after %v", before, after)
	}
	if _, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, "small-controller", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a dry run created the Deployment: %v", err)
	}

	code, out, errOut = run(t, nil, args(append([]string{"apply", v1, "--wait", "--timeout", "2m"}, v1args...)...)...)
	if code != 0 || !strings.Contains(out, "summary: 5 created") || !strings.Contains(out, "rolled over: true") {
		t.Fatalf("apply v1: exit %d\n%s\n%s", code, out, errOut)
	}
	// The rollout's live lines (plain: not a terminal): the Deployment
	// ends ready, and each line is printed once.
	if ready := "  ready   Deployment.apps/" + ns + "/small-controller\n"; strings.Count(out, ready) != 1 {
		t.Errorf("apply --wait: want the line %q once:\n%s", ready, out)
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
	code, out, _ = run(t, nil, args(append([]string{"plan", "-f", v2, "-o", "name"}, v2args...)...)...)
	if code != 1 || !strings.Contains(out, "configmap/added\n") || !strings.Contains(out, "configmap/dropped\n") {
		t.Fatalf("plan v2 -o name: exit %d, want 1 with the added and the pruned ConfigMap\n%s", code, out)
	}
	code, out, _ = run(t, nil, args(append([]string{"plan", "-f", v2, "-o", "name", "--kind", "deployment", "--object", "small-*"}, v2args...)...)...)
	if code != 1 || out != "deployment.apps/small-controller\n" {
		t.Fatalf("plan v2 --kind deployment -o name: exit %d, want 1 with the Deployment only\n%s", code, out)
	}
	before = configMapVersions(ctx, t, env, ns)
	code, out, errOut = run(t, nil, args(append([]string{"apply", v2, "--dry-run=server"}, v2args...)...)...)
	if code != 0 || !strings.Contains(out, "configmap/added -n "+ns+" created (server dry run)\n") || !strings.Contains(out, "configmap/dropped -n "+ns+" pruned (server dry run)\n") {
		t.Fatalf("apply v2 --dry-run=server: exit %d\n%s\n%s", code, out, errOut)
	}
	if after := configMapVersions(ctx, t, env, ns); !maps.Equal(before, after) {
		t.Fatalf("a dry run of v2 wrote ConfigMaps (the inventory, added, dropped): before %v, after %v", before, after)
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

// TestClusterApplyPlacement: apply --placement and --pull-secret place the
// strategy's pods as an Installation's spec would, plan then has nothing to
// do with the same flags and an update without them; a bad placement file
// is refused before anything is written.
func TestClusterApplyPlacement(t *testing.T) {
	env, ctx, ns := smallProduct(t)
	v1 := writeFile(t, "v1.yaml", smallStrategy(ns, "v1"))
	// kwok nodes carry type=kwok; workers have no control-plane taint.
	place := writeFile(t, "placement.yaml", `infra:
  nodeSelector: {type: kwok}
  tolerations:
  - {key: example.com/dedicated, operator: Exists, effect: NoSchedule}
`)
	args := func(a ...string) []string {
		return append(append(a, "--version", "v1", "--registry", "example.com"), clusterArgs(ns)...)
	}
	placed := []string{"--placement", place, "--pull-secret", "regcred", "--pull-secret", "mirror"}

	bad := writeFile(t, "bad.yaml", "infra:\n  nodeSelectr: {type: kwok}\n")
	code, _, errOut := run(t, nil, args("apply", v1, "--placement", bad)...)
	if code == 0 || !strings.Contains(errOut, "--placement "+bad) || !strings.Contains(errOut, "nodeSelectr") {
		t.Fatalf("apply with a misspelt placement: exit %d\n%s", code, errOut)
	}
	if _, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, "small-controller", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a refused placement wrote the Deployment: %v", err)
	}

	code, out, errOut := run(t, nil, args(append([]string{"apply", v1, "--wait", "--timeout", "2m"}, placed...)...)...)
	if code != 0 || !strings.Contains(out, "rolled over: true") {
		t.Fatalf("apply with placement: exit %d\n%s\n%s", code, out, errOut)
	}
	d, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, "small-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := d.Spec.Template.Spec
	var secrets []string
	for _, s := range pod.ImagePullSecrets {
		secrets = append(secrets, s.Name)
	}
	if pod.NodeSelector["type"] != "kwok" || len(pod.Tolerations) != 1 || pod.Tolerations[0].Key != "example.com/dedicated" || strings.Join(secrets, ",") != "regcred,mirror" {
		t.Errorf("pod template not placed: nodeSelector %v tolerations %v pull secrets %v", pod.NodeSelector, pod.Tolerations, secrets)
	}

	if code, out, _ := run(t, nil, args(append([]string{"plan", "--strategy", v1}, placed...)...)...); code != 0 {
		t.Errorf("plan with the same placement: exit %d, want 0\n%s", code, out)
	}
	code, out, _ = run(t, nil, args("plan", "--strategy", v1)...)
	updated := regexp.MustCompile(`(?m)^workloads/controller +update +Deployment\.apps/` + ns + `/small-controller +strategy changed\n +identity annotations: applied hash only \(a field set before is no longer set\)$`)
	if code != 1 || !updated.MatchString(out) {
		t.Errorf("plan without the placement: exit %d, want 1 with the Deployment updated\n%s", code, out)
	}
}

// configMapVersions maps the ConfigMaps of a namespace (the inventory among
// them) to their resourceVersions.
func configMapVersions(ctx context.Context, t *testing.T, env *testenv.Env, ns string) map[string]string {
	t.Helper()
	list, err := env.Kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, cm := range list.Items {
		out[cm.Name] = cm.ResourceVersion
	}
	return out
}

// An apply reads no object of the strategy one by one: the observed
// version comes from a metadata list per resource and namespace, and the
// live objects from a probe list (apply.Probe). The next apply finds the
// version it wrote (the update path) the same way. Discovery and the
// history are read no more than needed.
func TestClusterApplyReadsNoObjectOneByOne(t *testing.T) {
	_, _, ns := smallProduct(t)
	strategyOf := func(version string) string {
		var b strings.Builder
		for i := range 30 {
			fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%d\n  namespace: %s\ndata:\n  version: %s\n", i, ns, version)
		}
		return b.String()
	}
	var rec *applytest.Recorder
	wrap := func(cfg *rest.Config) *rest.Config {
		cfg, rec = applytest.Record(cfg)
		return cfg
	}
	apply := func(version string) string {
		t.Helper()
		file := writeFile(t, version+".yaml", strategyOf(version))
		var out, errOut bytes.Buffer
		args := append([]string{"apply", file, "--version", version, "--registry", "example.com"}, clusterArgs(ns)...)
		if code := MainWrapped(args, Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, wrap); code != 0 {
			t.Fatalf("apply %s: exit %d\n%s\n%s", version, code, out.String(), errOut.String())
		}
		single, discovery, history := 0, 0, 0
		for _, r := range rec.Reads() {
			switch {
			case strings.Contains(r.Path, "/configmaps/cm-"):
				single++
			case r.Path == "/api" || r.Path == "/apis":
				discovery++
			case strings.Contains(r.Path, "/configmaps/installstrategy-history-"):
				history++
			}
		}
		if single != 0 {
			t.Errorf("apply %s read %d of its ConfigMaps one by one; reads: %v", version, single, rec.Reads())
		}
		// The command's clients are built once: discovery at its first
		// mapping and again when the run starts (kinds served since), not
		// once per part of the command.
		if discovery > 4 {
			t.Errorf("apply %s asked discovery (GET /api, /apis) %d times, want at most 2 rounds; reads: %v", version, discovery, rec.Reads())
		}
		if history != 1 {
			t.Errorf("apply %s read its history %d times, want once", version, history)
		}
		return out.String()
	}
	if out := apply("v1"); !strings.Contains(out, "summary: 30 created") {
		t.Fatalf("apply v1:\n%s", out)
	}
	if out := apply("v2"); !strings.Contains(out, "summary: 0 created, 30 updated") {
		t.Fatalf("apply v2:\n%s", out)
	}
	// The second apply took the update path: it observed v1.
	code, out, errOut := run(t, nil, append([]string{"plan", "--strategy", writeFile(t, "v3.yaml", strategyOf("v3")), "--version", "v3", "--registry", "example.com"}, clusterArgs(ns)...)...)
	if code != 1 || !strings.Contains(out, "observed v2: update path") {
		t.Fatalf("plan v3: exit %d\n%s\n%s", code, out, errOut)
	}
}
