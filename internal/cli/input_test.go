package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/installstrategy/installstrategy/internal/kubevirtdata"
	"github.com/installstrategy/installstrategy/internal/testtier"
	"github.com/installstrategy/installstrategy/pkg/codec"
)

// liveMeta is what kubectl get -o yaml prints in every object's metadata.
const liveMeta = "    uid: 0d6f3c2a-5b7e-4e57-9d5c-2f1a7b6c9e01\n    resourceVersion: \"4711\"\n    creationTimestamp: \"2026-11-30T10:00:00Z\"\n"

// kubeRootCA is the ConfigMap every namespace holds, as kubectl prints it.
const kubeRootCA = "- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: kube-root-ca.crt\n    namespace: kubevirt\n" + liveMeta +
	"  data:\n    ca.crt: |\n      -----BEGIN CERTIFICATE-----\n      MIIB\n      -----END CERTIFICATE-----\n"

// strategyItem returns v1.9.0's strategy ConfigMap named name, as an item
// of a List.
func strategyItem(t *testing.T, name string) string {
	t.Helper()
	cms, err := codec.ReadConfigMaps("v1.9.0", kubevirtdata.Read(t, "v1.9.0", "configmap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cm := cms[0]
	cm.Name, cm.GenerateName = name, ""
	y, err := codec.MarshalYAML(cm)
	if err != nil {
		t.Fatal(err)
	}
	return "- " + strings.ReplaceAll(strings.TrimSuffix(string(y), "\n"), "\n", "\n  ") + "\n"
}

func list(items ...string) string {
	return "apiVersion: v1\nkind: List\nitems:\n" + strings.Join(items, "")
}

// inputFiles writes the inputs people give by mistake into dir and returns
// their paths by name.
func inputFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	secret := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: virt-api-certs\n  namespace: kubevirt\n" + strings.ReplaceAll(liveMeta, "    ", "  ") +
		"type: kubernetes.io/tls\ndata:\n  tls.crt: \"\"\n"
	plainCM := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kube-root-ca.crt\n  namespace: kubevirt\n" + strings.ReplaceAll(liveMeta, "    ", "  ") +
		"data:\n  ca.crt: |\n    -----BEGIN CERTIFICATE-----\n    MIIB\n    -----END CERTIFICATE-----\n"
	chunk := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: installstrategy-chunk-x7k2p\n  namespace: kubevirt\n" +
		"  labels:\n    app.kubernetes.io/managed-by: installstrategy\n    installstrategy.io/strategy-chunk: \"\"\n" +
		"  annotations:\n    installstrategy.io/chunk-index: \"1\"\n    installstrategy.io/chunk-of: sha256:00\n" + strings.ReplaceAll(liveMeta, "    ", "  ") +
		"data:\n  part: H4sIAAAA\n"
	head := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: installstrategy-big\n  namespace: kubevirt\n" +
		"  labels:\n    installstrategy.io/strategy: \"\"\n" +
		"  annotations:\n    installstrategy.io/digest: sha256:00\n    installstrategy.io/chunks: '[{\"name\":\"installstrategy-chunk-x7k2p\",\"size\":8,\"digest\":\"sha256:00\"}]'\n"
	files := map[string]string{
		"secret.yaml":                      secret,
		"plain-cm.yaml":                    plainCM,
		"chunk.yaml":                       chunk,
		"head.yaml":                        head,
		"cm-list.yaml":                     list(kubeRootCA, strategyItem(t, "kubevirt-install-strategy-abcde")),
		"two-cms.yaml":                     list(strategyItem(t, "kubevirt-install-strategy-aaaaa"), kubeRootCA, strategyItem(t, "kubevirt-install-strategy-bbbbb")),
		"strategy.yaml":                    string(kubevirtdata.Read(t, "v1.9.0", "configmap.yaml")),
		"manifests.yaml":                   smallManifest,
		"config.yaml":                      "namespace: kubevirt\nregistry: quay.io/kubevirt\nkubeVirtVersion: v1.9.0\n",
		"empty-config.json":                "{}\n",
		"chart/Chart.yaml":                 "apiVersion: v2\nname: demo\nversion: 0.3.0\n",
		"chart/values.yaml":                "greeting: hello\n",
		"chart/templates/cm.yaml":          "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  greeting: {{ .Values.greeting | quote }}\n",
		"bad-values.yaml":                  "greeting: [unclosed\n",
		"kustomization/kustomization.yaml": "resources:\n  - missing.yaml\n",
		"unreachable.kubeconfig": "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\n" +
			"users:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n    namespace: kubevirt\ncurrent-context: x\n",
	}
	paths := map[string]string{}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		paths[name] = p
	}
	return paths
}

// TestInputsThatAreNotStrategies: each input that is not (only) a strategy
// gets a clear answer, the same from every verb that reads strategies.
func TestInputsThatAreNotStrategies(t *testing.T) {
	in := inputFiles(t, t.TempDir())
	notStrategy := []struct {
		file string
		want []string
	}{
		{"secret.yaml", []string{"not a strategy: document 1 (line 1): Secret kubevirt/virt-api-certs: a v1 Secret, not a strategy ConfigMap", "kubectl get cm -n NAMESPACE -l kubevirt.io/install-strategy -o yaml"}},
		{"plain-cm.yaml", []string{"ConfigMap kubevirt/kube-root-ca.crt: an ordinary ConfigMap, not a strategy (no data.manifests; its keys: ca.crt)"}},
		{"chunk.yaml", []string{"ConfigMap kubevirt/installstrategy-chunk-x7k2p: a chunk (index 1) of a strategy stored in chunks", "kubectl installstrategy list -n kubevirt", "kubectl installstrategy get cm/HEAD -n kubevirt"}},
		{"head.yaml", []string{"head of a strategy stored in chunks", "kubectl installstrategy get cm/installstrategy-big -n kubevirt"}},
	}
	for _, c := range notStrategy {
		for _, verb := range []string{"decode", "inspect", "verify", "diff"} {
			t.Run(c.file+"/"+verb, func(t *testing.T) {
				args := []string{verb, in[c.file]}
				if verb == "diff" {
					args = append(args, in["manifests.yaml"])
				}
				code, out, errOut := run(t, nil, args...)
				if code == 0 {
					t.Fatalf("exit 0; stdout %q", out)
				}
				text := errOut
				if verb == "verify" {
					text = out // the failed check, then the summary on stderr
				} else if out != "" {
					t.Errorf("stdout not empty: %q", tail(out))
				}
				for _, w := range c.want {
					if !strings.Contains(text, w) {
						t.Errorf("want %q in:\n%s", w, text)
					}
				}
			})
		}
	}

	// kubectl get cm -o yaml of a namespace: the strategy is used, the
	// other ConfigMap named as skipped.
	code, out, errOut := run(t, nil, "decode", in["cm-list.yaml"])
	if code != 0 || out != string(kubevirtdata.Read(t, "v1.9.0", "manifests.yaml")) {
		t.Fatalf("decode of a List with kube-root-ca.crt: exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "skipped ConfigMap kubevirt/kube-root-ca.crt ("+in["cm-list.yaml"]+" document 1): an ordinary ConfigMap") {
		t.Errorf("want kube-root-ca.crt named as skipped:\n%s", errOut)
	}
	code, out, _ = run(t, nil, "verify", in["cm-list.yaml"])
	if code != 0 || !strings.Contains(out, "SKIP  ConfigMap kubevirt/kube-root-ca.crt: an ordinary ConfigMap") || !strings.Contains(out, "OK    parse: 245 objects") {
		t.Fatalf("verify: exit %d\n%s", code, out)
	}

	// Several strategies: --name picks one, and naming the other
	// ConfigMap says what it is.
	code, _, errOut = run(t, nil, "decode", in["two-cms.yaml"])
	if code != 1 || !strings.Contains(errOut, "holds 2 strategy ConfigMaps (kubevirt-install-strategy-aaaaa, kubevirt-install-strategy-bbbbb); pick one with --name NAME") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if code, _, errOut = run(t, nil, "inspect", in["two-cms.yaml"], "--name", "kubevirt-install-strategy-bbbbb"); code != 0 {
		t.Fatalf("inspect --name: exit %d: %s", code, errOut)
	}
	if code, _, errOut = run(t, nil, "decode", in["two-cms.yaml"], "--name", "kube-root-ca.crt"); code != 1 || !strings.Contains(errOut, "ConfigMap kubevirt/kube-root-ca.crt: an ordinary ConfigMap, not a strategy") {
		t.Fatalf("--name of a skipped object: exit %d: %s", code, errOut)
	}
	code, _, errOut = run(t, nil, "diff", in["two-cms.yaml"], in["strategy.yaml"])
	if code != 2 || !strings.Contains(errOut, "pick one with --from-name NAME") {
		t.Fatalf("diff: exit %d: %s", code, errOut)
	}
	code, out, errOut = run(t, nil, "diff", in["two-cms.yaml"], "--from-name", "kubevirt-install-strategy-aaaaa", "--to-name", "kubevirt-install-strategy-bbbbb", "--summary")
	if code != 0 || !strings.Contains(out, "added 0, removed 0, changed 0, unchanged 245") {
		t.Fatalf("diff within one file: exit %d: %s%s", code, out, errOut)
	}

	// encode of a strategy ConfigMap.
	code, out, errOut = run(t, nil, "encode", in["strategy.yaml"], "--version", "v1.9.0")
	if code != 1 || out != "" || !strings.Contains(errOut, "is already a strategy; decode it first") {
		t.Fatalf("encode of a strategy: exit %d %q %s", code, out, errOut)
	}
	// id: YAML accepted, {} refused.
	code, outYAML, errOut := run(t, nil, "id", "--config", in["config.yaml"], "--algorithm", "kubevirt")
	if code != 0 {
		t.Fatalf("id of YAML: exit %d %s", code, errOut)
	}
	code, outJSON, _ := run(t, []byte(`{"namespace":"kubevirt","registry":"quay.io/kubevirt","kubeVirtVersion":"v1.9.0"}`), "id", "--config", "-", "--algorithm", "kubevirt")
	if code != 0 || outYAML != outJSON || len(strings.TrimSpace(outJSON)) != 40 {
		t.Fatalf("YAML and JSON of one config: %q vs %q", outYAML, outJSON)
	}
	code, out, errOut = run(t, []byte("{}"), "id", "--config", "-")
	if code != 1 || out != "" || !strings.Contains(errOut, "not a deployment config: it names no namespace") {
		t.Fatalf("id of {}: exit %d %q %s", code, out, errOut)
	}
}

// TestDecodeIntoUsedFolder: a second decode into the same folder leaves
// exactly the second strategy there, so encode DIR builds it and nothing
// else; files decode did not write are refused, or removed with --force.
func TestDecodeIntoUsedFolder(t *testing.T) {
	testtier.Heavy(t) // decodes two real KubeVirt releases into files
	dir := filepath.Join(t.TempDir(), "out")
	v184, v190 := kubevirtdata.Path(t, "v1.8.4", "configmap.yaml"), kubevirtdata.Path(t, "v1.9.0", "configmap.yaml")
	if code, _, errOut := run(t, nil, "decode", v190, "--output-dir", dir); code != 0 {
		t.Fatalf("first decode: %d %s", code, errOut)
	}
	// v1.8.4 lacks the 37 objects of virt-template that v1.9.0 added.
	code, _, errOut := run(t, nil, "decode", v184, "--output-dir", dir)
	if code != 0 || !strings.Contains(errOut, "wrote 208 files to "+dir+", removed 37 files of an earlier decode") {
		t.Fatalf("second decode: exit %d %s", code, errOut)
	}
	_, cm, errOut := run(t, nil, "encode", dir, "--version", "v1.8.4")
	code, out, _ := run(t, []byte(cm), "diff", "--summary", "-", v184)
	if code != 0 || !strings.Contains(out, "added 0, removed 0, changed 0, unchanged 208") {
		t.Fatalf("encode DIR after two decodes differs from v1.8.4: exit %d\n%s%s", code, tail(out), errOut)
	}

	// A file decode did not write: refused before anything is written.
	foreign := filepath.Join(dir, "my-extra.yaml")
	if err := os.WriteFile(foreign, []byte(smallManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	before := listing(t, dir)
	code, _, errOut = run(t, nil, "decode", v190, "--output-dir", dir)
	if code != 1 || !strings.Contains(errOut, "holds 1 manifest files that decode did not write (my-extra.yaml)") {
		t.Fatalf("foreign file: exit %d %s", code, errOut)
	}
	if after := listing(t, dir); after != before {
		t.Fatalf("a refused decode changed the folder")
	}
	code, _, errOut = run(t, nil, "decode", v190, "--output-dir", dir, "--force")
	if code != 0 || !strings.Contains(errOut, "wrote 245 files") {
		t.Fatalf("--force: exit %d %s", code, errOut)
	}
	if _, err := os.Stat(foreign); !os.IsNotExist(err) {
		t.Fatalf("--force kept %s", foreign)
	}
}

// listing names every file of dir with its size.
func listing(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		lines = append(lines, fmt.Sprintf("%s %s %d", p, info.ModTime(), info.Size()))
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// TestIDReleaseLines: id --algorithm kubevirt prints KubeVirt's own IDs of
// every release line from v1.5 (pkg/identity's vectors), and --check names
// the algorithm.
func TestIDReleaseLines(t *testing.T) {
	data, err := os.ReadFile("../../pkg/identity/testdata/kubevirt-release-ids.json")
	if err != nil {
		t.Fatal(err)
	}
	var vectors []struct {
		Release string         `json:"release"`
		Config  map[string]any `json:"config"`
		ID      string         `json:"id"`
	}
	if err := json.Unmarshal(data, &vectors); err != nil {
		t.Fatal(err)
	}
	for _, v := range vectors {
		cfg, _ := json.Marshal(v.Config)
		code, out, errOut := run(t, cfg, "id", "--config", "-", "--algorithm", "kubevirt")
		if code != 0 || strings.TrimSpace(out) != v.ID {
			t.Errorf("%s %s: exit %d, %q, want %s %s", v.Release, cfg, code, out, v.ID, errOut)
		}
		v.Config["id"] = v.ID
		cfg, _ = json.Marshal(v.Config)
		if code, out, _ := run(t, cfg, "id", "--config", "-", "--check"); code != 0 || !strings.Contains(out, "kubevirt algorithm") {
			t.Errorf("%s --check: exit %d %q", v.Release, code, out)
		}
	}
}
