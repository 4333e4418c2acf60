package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/installstrategy/installstrategy/internal/kubevirtdata"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// clusterArgs are the flags that point the plugin at the test cluster.
func clusterArgs(ns string) []string {
	return []string{"--kubeconfig", os.Getenv(testenv.KubeconfigEnv), "-n", ns}
}

// createKubeVirtStrategy creates the real v1.9.0 strategy ConfigMap the way
// KubeVirt's operator does (generateName, its labels and annotations).
func createKubeVirtStrategy(ctx context.Context, t *testing.T, env *testenv.Env, ns string) string {
	t.Helper()
	cms, err := codec.ReadConfigMaps("v1.9.0", kubevirtdata.Read(t, "v1.9.0", "configmap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cm := cms[0]
	cm.Namespace = ns
	created, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created.Name
}

func TestClusterListGetInspect(t *testing.T) {
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ns := env.Namespace(ctx, t)
	name := createKubeVirtStrategy(ctx, t, env, ns)

	code, out, errOut := run(t, nil, append([]string{"list", "-o", "json"}, clusterArgs(ns)...)...)
	if code != 0 {
		t.Fatalf("list: exit %d: %s", code, errOut)
	}
	rows := listRows(t, out)
	if len(rows) != 1 {
		t.Fatalf("list: %d rows, want 1:\n%s", len(rows), out)
	}
	r := rows[0]
	if r.Name != name || r.Identity.Version != "v1.9.0" || r.Identity.Registry != "quay.io/kubevirt" ||
		r.Identity.Identifier != kubevirtdata.ID(t, "v1.9.0") || r.Format != codec.FormatKubeVirt ||
		r.EncodedBytes != 561668 || r.Digest != "none" || r.Chunks != 0 {
		t.Fatalf("list row: %+v", r)
	}
	if r.LimitUsedPercent < 53 || r.LimitUsedPercent > 54 {
		t.Errorf("limit used: %.1f%%", r.LimitUsedPercent)
	}
	// -o name and jsonpath= (golden): configmap/NAME, which every
	// strategy-reading verb takes.
	code, out, errOut = run(t, nil, append([]string{"list", "-o", "name"}, clusterArgs(ns)...)...)
	if code != 0 {
		t.Fatalf("list -o name: exit %d: %s", code, errOut)
	}
	golden(t, "list-name", strings.ReplaceAll(out, name, "NAME"))
	code, _, errOut = run(t, nil, append([]string{"inspect", strings.TrimSpace(out), "-o", "name"}, clusterArgs(ns)...)...)
	if code != 0 {
		t.Fatalf("inspect of list -o name: exit %d: %s", code, errOut)
	}
	code, out, errOut = run(t, nil, append([]string{"list", "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.identity.version} {.format} {.encodedBytes} {.digest}{"\n"}{end}`}, clusterArgs(ns)...)...)
	if code != 0 {
		t.Fatalf("list -o jsonpath: exit %d: %s", code, errOut)
	}
	golden(t, "list-jsonpath", strings.ReplaceAll(out, name, "NAME"))

	want := string(kubevirtdata.Read(t, "v1.9.0", "manifests.yaml"))
	for _, args := range [][]string{
		{"get", "--version", "v1.9.0", "--registry", "quay.io/kubevirt"},
		{"get", "--identifier", kubevirtdata.ID(t, "v1.9.0")},
		{"get", name},
		{"decode", "cm/" + name},
	} {
		code, out, errOut := run(t, nil, append(args, clusterArgs(ns)...)...)
		if code != 0 || out != want {
			t.Fatalf("%v: exit %d, output equal to KubeVirt's text: %v; %s", args, code, out == want, errOut)
		}
	}
	code, out, _ = run(t, nil, append([]string{"inspect", "cm/" + name}, clusterArgs(ns)...)...)
	if code != 0 || !strings.Contains(out, "Objects:       245") {
		t.Fatalf("inspect cm/: exit %d\n%s", code, out[:min(len(out), 600)])
	}
	code, _, errOut = run(t, nil, append([]string{"get", "--version", "v9.9.9"}, clusterArgs(ns)...)...)
	if code == 0 || !strings.Contains(errOut, "no matching strategy") {
		t.Fatalf("missing version: exit %d %q", code, errOut)
	}
	// diff a file against the cluster copy: same objects.
	code, _, errOut = run(t, nil, append([]string{"diff", kubevirtdata.Path(t, "v1.9.0", "manifests.yaml"), "cm/" + name}, clusterArgs(ns)...)...)
	if code != 0 {
		t.Fatalf("diff file vs cluster: exit %d %s", code, errOut)
	}
}

// TestClusterPublishChunked publishes a strategy too big for one ConfigMap
// and reads it back through list --verify and get.
func TestClusterPublishChunked(t *testing.T) {
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ns := env.Namespace(ctx, t)

	// 2 MiB of random (incompressible) data in ConfigMaps of the strategy.
	var text bytes.Buffer
	for i := 0; i < 4; i++ {
		buf := make([]byte, 384<<10)
		if _, err := rand.Read(buf); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&text, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: blob-%d\n  namespace: %s\ndata:\n  blob: %s\n", i, ns, base64.StdEncoding.EncodeToString(buf))
	}
	path := t.TempDir() + "/big.yaml"
	if err := os.WriteFile(path, text.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, nil, append([]string{"publish", path, "--version", "v2.0.0", "--identifier", "big-1"}, clusterArgs(ns)...)...)
	if code != 0 || !strings.Contains(out, "chunks") {
		t.Fatalf("publish: exit %d %q %s", code, out, errOut)
	}
	code, out, errOut = run(t, nil, append([]string{"list", "--verify", "-o", "json"}, clusterArgs(ns)...)...)
	if code != 0 {
		t.Fatalf("list --verify: exit %d %s", code, errOut)
	}
	rows := listRows(t, out)
	if len(rows) != 1 || rows[0].Chunks < 3 || rows[0].Digest != "verified" || rows[0].LimitUsedPercent < 250 {
		t.Fatalf("list: %s", out)
	}
	code, got, errOut := run(t, nil, append([]string{"get", "--identifier", "big-1"}, clusterArgs(ns)...)...)
	if code != 0 {
		t.Fatalf("get: exit %d %s", code, errOut)
	}
	s, _, err := strategy.Parse(text.Bytes(), strategy.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	canonical, _ := s.Serialize()
	if got != string(canonical) {
		t.Fatalf("get returned %d bytes, not the canonical form (%d bytes) of what was published", len(got), len(canonical))
	}
}

// TestClusterListMarksUsers: the strategy an Installation targets is marked.
func TestClusterListMarksUsers(t *testing.T) {
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ns := env.Namespace(ctx, t)
	env.InstallCRDFile(ctx, t, "../../config/crd/bases/installstrategy.io_installations.yaml")
	name := createKubeVirtStrategy(ctx, t, env, ns)

	gvr := schema.GroupVersionResource{Group: "installstrategy.io", Version: "v1alpha1", Resource: "installations"}
	inst := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "installstrategy.io/v1alpha1", "kind": "Installation",
		"metadata": map[string]any{"name": "demo", "namespace": ns},
		"spec":     map[string]any{"version": "v1.9.0", "registry": "quay.io/kubevirt"},
	}}
	created, err := env.Dynamic.Resource(gvr).Namespace(ns).Create(ctx, inst, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(created.Object, kubevirtdata.ID(t, "v1.9.0"), "status", "targetIdentifier")
	if _, err := env.Dynamic.Resource(gvr).Namespace(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, nil, append([]string{"list"}, clusterArgs(ns)...)...)
	if code != 0 || !strings.Contains(out, name) || !strings.Contains(out, "installation/demo (target)") {
		t.Fatalf("list: exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestClusterStrategyReferences: what `kubectl get cm -o yaml` prints of a
// namespace holding a chunked strategy is refused with the command that
// reads it; cm/NAME reads it the same way in every verb (verify, get, plan
// as its argument); list -A names no empty namespace.
func TestClusterStrategyReferences(t *testing.T) {
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ns := env.Namespace(ctx, t)
	var text bytes.Buffer
	for i := 0; i < 3; i++ {
		buf := make([]byte, 384<<10)
		if _, err := rand.Read(buf); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&text, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: blob-%d\n  namespace: %s\ndata:\n  blob: %s\n", i, ns, base64.StdEncoding.EncodeToString(buf))
	}
	path := t.TempDir() + "/big.yaml"
	if err := os.WriteFile(path, text.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := run(t, nil, append([]string{"publish", path, "--version", "v2.0.0", "--identifier", "big-1"}, clusterArgs(ns)...)...); code != 0 || !strings.Contains(out, "chunks") {
		t.Fatalf("publish: exit %d %q %s", code, out, errOut)
	}
	cms, err := env.Kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var head, chunk string
	items := make([]any, 0, len(cms.Items))
	for _, cm := range cms.Items {
		if _, ok := cm.Labels[metakeys.StrategyLabel]; ok {
			head = cm.Name
		}
		if _, ok := cm.Labels[metakeys.ChunkLabel]; ok && chunk == "" {
			chunk = cm.Name
			one, err := sigsyaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": cm.ObjectMeta, "data": cm.Data})
			if err != nil {
				t.Fatal(err)
			}
			code, _, errOut := run(t, one, "decode", "-")
			if code != 1 || !strings.Contains(errOut, "a chunk (index") || !strings.Contains(errOut, "kubectl installstrategy list -n "+ns) {
				t.Fatalf("decode of one chunk: exit %d %s", code, errOut)
			}
		}
		items = append(items, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": cm.ObjectMeta, "data": cm.Data})
	}
	all, err := sigsyaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		t.Fatal(err)
	}
	// The whole namespace, head and chunks: reassembled offline, checked
	// as the store checks it, kube-root-ca.crt named as skipped.
	code, offline, errOut := run(t, all, "decode", "-")
	if code != 0 || !strings.Contains(errOut, "skipped ConfigMap "+ns+"/kube-root-ca.crt") || strings.Contains(errOut, chunk) {
		t.Fatalf("decode of the namespace's ConfigMaps: exit %d\n%s", code, errOut)
	}
	if code, out, errOut := run(t, all, "verify", "-"); code != 0 || !strings.Contains(out, "OK    digest: sha256:") || strings.Contains(out, chunk) {
		t.Fatalf("verify of the namespace's ConfigMaps: exit %d\n%s%s", code, out, errOut)
	}
	// The head without one of its chunks, or with an edited chunk.
	var partial, edited []any
	for _, it := range items {
		md := it.(map[string]any)["metadata"].(metav1.ObjectMeta)
		if md.Name == chunk {
			c := it.(map[string]any)
			data := maps.Clone(c["data"].(map[string]string))
			// A chunk is base64 from the middle of a gzip stream: its
			// first character is any of 64 (an "A" already made this
			// edit a no-op, and the test fail, 1 time in 64).
			first := "A"
			if strings.HasPrefix(data["part"], first) {
				first = "B"
			}
			data["part"] = first + data["part"][1:]
			edited = append(edited, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": data})
			continue
		}
		partial = append(partial, it)
		edited = append(edited, it)
	}
	for name, list := range map[string][]any{"without chunk": partial, "edited chunk": edited} {
		b, err := sigsyaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": list})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"without chunk": " of 3 (" + chunk + "): not among the ConfigMaps given", "edited chunk": "edited: part hashes to"}[name]
		if code, out, errOut := run(t, b, "decode", "-"); code != 1 || out != "" || !strings.Contains(errOut, want) {
			t.Fatalf("%s: exit %d, want %q in\n%s", name, code, want, errOut)
		}
	}
	// A head alone names the command that reads it from the cluster.
	for _, it := range items {
		if md := it.(map[string]any)["metadata"].(metav1.ObjectMeta); md.Name == head {
			b, _ := sigsyaml.Marshal(it)
			if code, _, errOut := run(t, b, "decode", "-"); code != 1 || !strings.Contains(errOut, "kubectl installstrategy get cm/"+head+" -n "+ns) {
				t.Fatalf("a head alone: exit %d %s", code, errOut)
			}
		}
	}

	code, out, errOut := run(t, nil, append([]string{"verify", "cm/" + head}, clusterArgs(ns)...)...)
	if code != 0 || !strings.Contains(out, "chunks, each matching the head's record") || !strings.Contains(out, "OK    parse: 3 objects") {
		t.Fatalf("verify cm/: exit %d\n%s%s", code, out, errOut)
	}
	code, got, errOut := run(t, nil, append([]string{"get", "cm/" + head}, clusterArgs(ns)...)...)
	if code != 0 || !strings.Contains(got, "name: blob-2") || got != offline {
		t.Fatalf("get cm/: exit %d (same as the offline reassembly: %v) %s", code, got == offline, errOut)
	}
	// plan takes the strategy as its argument: the three ConfigMaps would
	// be created (exit 1, "would change").
	code, out, errOut = run(t, nil, append([]string{"plan", "cm/" + head, "--name", "refs-" + ns}, clusterArgs(ns)...)...)
	if code != 1 || strings.Count(out, "blob-") < 3 {
		t.Fatalf("plan cm/: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = run(t, nil, append([]string{"list", "-A"}, clusterArgs(ns)...)...)
	if code != 0 || !strings.Contains(out, ns) || !strings.Contains(out, head) {
		t.Fatalf("list -A: exit %d\n%s%s", code, out, errOut)
	}
	// A user who may not list ConfigMaps: the message names the scope.
	code, _, errOut = run(t, nil, append([]string{"list", "-A", "--as", "nobody"}, clusterArgs(ns)...)...)
	if code != 1 || !strings.Contains(errOut, "list configmaps in every namespace with label") || !strings.Contains(errOut, "forbidden") {
		t.Fatalf("list -A as nobody: exit %d %s", code, errOut)
	}
	code, _, errOut = run(t, nil, append([]string{"list", "--as", "nobody"}, clusterArgs(ns)...)...)
	if code != 1 || !strings.Contains(errOut, "list configmaps in namespace "+ns+" with label") {
		t.Fatalf("list as nobody: exit %d %s", code, errOut)
	}
}

// listRows reads list -o json: a v1 List of the rows.
func listRows(t *testing.T, out string) []ListRow {
	t.Helper()
	var list struct {
		Kind  string    `json:"kind"`
		Items []ListRow `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	if list.Kind != "List" {
		t.Fatalf("list -o json: kind %q, want List", list.Kind)
	}
	return list.Items
}
