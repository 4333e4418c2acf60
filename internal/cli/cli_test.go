package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/installstrategy/installstrategy/internal/gctune"
	"github.com/installstrategy/installstrategy/internal/kubevirtdata"
	"github.com/installstrategy/installstrategy/internal/testtier"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// run executes the plugin with stdin and returns its exit code and output.
func run(t *testing.T, stdin []byte, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(args, Streams{In: bytes.NewReader(stdin), Out: &out, ErrOut: &errOut})
	return code, out.String(), errOut.String()
}

// testdataDir is absolute, so tests that change directory find it too.
var testdataDir, _ = filepath.Abs("testdata")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join(testdataDir, name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("output differs from %s (run go test -update after checking):\n%s", path, firstLineDiff(got, string(want)))
	}
}

func firstLineDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d:\n got: %s\nwant: %s", i+1, gl, wl)
		}
	}
	return ""
}

func TestInspectGolden(t *testing.T) {
	cm := kubevirtdata.Read(t, "v1.9.0", "configmap.yaml")
	for _, format := range []string{"table", "json"} {
		t.Run(format, func(t *testing.T) {
			code, out, errOut := run(t, cm, "inspect", "-", "-o", format)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			golden(t, "inspect-v1.9.0-"+format, out)
		})
	}
}

// TestInspectPrinters: -o name and -o jsonpath= are cli-runtime's printers
// (golden), and -f FILE is the argument under kubectl's spelling.
func TestInspectPrinters(t *testing.T) {
	path := kubevirtdata.Path(t, "v1.9.0", "configmap.yaml")
	for _, c := range []struct{ golden, output string }{
		{"inspect-v1.9.0-name", "name"},
		{"inspect-v1.9.0-jsonpath", `jsonpath={.identity.version} {.sizes.encoded} {range .kinds[*]}{.kind}={.count} {end}{"\n"}`},
		{"inspect-v1.9.0-template", `go-template={{.identity.identifier}}:{{range .objects}}{{if .images}} {{.name}}{{end}}{{end}}{{"\n"}}`},
	} {
		code, out, errOut := run(t, nil, "inspect", path, "-o", c.output)
		if code != 0 {
			t.Fatalf("-o %s: exit %d: %s", c.output, code, errOut)
		}
		golden(t, c.golden, out)
		code, viaF, errOut := run(t, nil, "inspect", "-f", path, "-o", c.output)
		if code != 0 || viaF != out {
			t.Fatalf("-f: exit %d, same output as the argument: %v; %s", code, viaF == out, errOut)
		}
	}
}

// TestDecodeObjects: decode -o prints the strategy's objects through the
// printers: a v1 List of 245 objects, and their names.
func TestDecodeObjects(t *testing.T) {
	path := kubevirtdata.Path(t, "v1.9.0", "configmap.yaml")
	code, out, errOut := run(t, nil, "decode", "-f", path, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var list struct {
		Kind  string           `json:"kind"`
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	if list.Kind != "List" || len(list.Items) != 245 {
		t.Fatalf("decode -o json: kind %q, %d items", list.Kind, len(list.Items))
	}
	code, out, _ = run(t, nil, "decode", path, "-o", "name")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 245 || !slices.Contains(lines, "deployment.apps/virt-api") {
		t.Fatalf("decode -o name: exit %d, %d lines: %v", code, len(lines), lines[:min(3, len(lines))])
	}
}

func TestDecodeIsExact(t *testing.T) {
	for _, v := range kubevirtdata.Versions {
		code, out, errOut := run(t, nil, "decode", kubevirtdata.Path(t, v, "configmap.yaml"))
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		if out != string(kubevirtdata.Read(t, v, "manifests.yaml")) {
			t.Fatalf("%s: decode output differs from KubeVirt's decoded text", v)
		}
		if strings.Count(errOut, "warning:") != 6 {
			t.Errorf("%s: want the 6 repair warnings on stderr, got:\n%s", v, errOut)
		}
	}
}

func TestDecodeOutputDirThenEncode(t *testing.T) {
	testtier.Heavy(t) // two real KubeVirt releases through decode and encode
	dir := filepath.Join(t.TempDir(), "objects")
	code, _, errOut := run(t, nil, "decode", kubevirtdata.Path(t, "v1.9.0", "configmap.yaml"), "--output-dir", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	manifests := 0
	for _, e := range entries {
		if isManifestFile(e.Name()) {
			manifests++
		}
	}
	if manifests != 245 || len(entries) != 246 {
		t.Fatalf("files = %d (%d manifests), want 245 (one per object) and the index", len(entries), manifests)
	}
	if _, err := os.Stat(filepath.Join(dir, "deployment_kubevirt_virt-api.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "customresourcedefinition__virtualmachines.kubevirt.io.yaml")); err != nil {
		t.Fatal(err)
	}
	// The folder encodes back to a strategy with the same objects.
	code, cm, errOut := run(t, nil, "encode", dir, "--version", "v1.9.0", "-n", "kubevirt", "--identifier", "x")
	if code != 0 {
		t.Fatalf("encode exit %d: %s", code, errOut)
	}
	code, out, errOut := run(t, []byte(cm), "diff", "--summary", "-", kubevirtdata.Path(t, "v1.9.0", "configmap.yaml"))
	if code != 0 || !strings.Contains(out, "added 0, removed 0, changed 0, unchanged 245") {
		t.Fatalf("exit %d (identities differ but the objects are the same: want 0): %s %s", code, out, errOut)
	}
}

func TestDiffReleases(t *testing.T) {
	testtier.Heavy(t) // diffs two real KubeVirt releases
	code, out, errOut := run(t, nil, "diff", "--summary", kubevirtdata.Path(t, "v1.8.4", "configmap.yaml"), kubevirtdata.Path(t, "v1.9.0", "configmap.yaml"))
	if code != 1 {
		t.Fatalf("exit %d, want 1 (different): %s", code, errOut)
	}
	golden(t, "diff-v1.8.4-v1.9.0-summary", out)
	if !strings.Contains(out, "added 37, removed 0") {
		t.Errorf("want the 37 objects of virt-template added: %s", out[:200])
	}
	code, _, _ = run(t, nil, "diff", kubevirtdata.Path(t, "v1.9.0", "configmap.yaml"), kubevirtdata.Path(t, "v1.9.0", "manifests.yaml"))
	if code != 0 {
		t.Fatalf("a ConfigMap and its own decoded text: exit %d, want 0", code)
	}
	code, _, errOut = run(t, nil, "diff", "missing-a.yaml", kubevirtdata.Path(t, "v1.9.0", "manifests.yaml"))
	if code != 2 || !strings.Contains(errOut, "missing-a.yaml") {
		t.Fatalf("missing file: exit %d %q, want 2 naming the file", code, errOut)
	}
}

func TestDiffShowsFieldChange(t *testing.T) {
	pa, pb := oneTwo(t)
	code, out, _ := run(t, nil, "diff", pa, pb)
	if code != 1 || !strings.Contains(out, "-  k: one\n+  k: two\n") || !strings.Contains(out, "~ ConfigMap n/c: .data.k one → two\n") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func TestVerify(t *testing.T) {
	code, out, _ := run(t, kubevirtdata.Read(t, "v1.9.0", "configmap.yaml"), "verify", "-")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	golden(t, "verify-v1.9.0", out)
	code, _, errOut := run(t, kubevirtdata.Read(t, "v1.9.0", "configmap.yaml"), "verify", "-", "--strict")
	if code != 1 || !strings.Contains(errOut, "warnings") {
		t.Fatalf("--strict with repairs: exit %d %s", code, errOut)
	}
	// A native ConfigMap verifies clean, digest included.
	_, cm, _ := run(t, []byte(smallManifest), "encode", "-", "--version", "v1", "--identifier", "id1")
	code, out, _ = run(t, []byte(cm), "verify", "-", "--strict")
	if code != 0 || !strings.Contains(out, "OK    digest: sha256:") {
		t.Fatalf("native: exit %d\n%s", code, out)
	}
}

const smallManifest = "---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: sa\n  namespace: ns\n"

// TestBadInputs: every bad input exits non-zero with an error that names the
// step and the place, and decode --output-dir writes nothing.
func TestBadInputs(t *testing.T) {
	cases := []struct {
		name  string
		input string
		want  string
	}{
		{"not a configmap nor manifests", "---\napiVersion: v1\nkind: ServiceAccount\n", "document 1 (line 2, byte offset 4): ServiceAccount has no metadata"},
		{"missing manifests key", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: n, labels: {kubevirt.io/install-strategy: \"\"}}\ndata: {other: y}\n", `configmap n/x: configmap: data has no "manifests" key`},
		{"invalid base64", cmYAML("H4sI!!!!", true), "base64: invalid base64 at byte offset 4 of data.manifests"},
		{"not gzip", cmYAML("aGVsbG8gd29ybGQ=", true), "gzip: not gzip data"},
		{"truncated gzip", cmYAML("H4sIAAAAAAAA/+z9", true), "gzip: truncated gzip stream"},
		{"bad yaml", "---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: a\n---\nkind: [\n", "document 2 (line 7, byte offset 64): not valid YAML"},
		{"no kind", "---\napiVersion: v1\nmetadata:\n  name: a\n", "document 1 (line 2, byte offset 4): no kind"},
		{"duplicate key", "---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: a\n  name: b\n", "line 6: key \"name\" is given twice"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			code, out, errOut := run(t, []byte(c.input), "decode", "-", "--output-dir", dir)
			if code == 0 || !strings.Contains(errOut, c.want) {
				t.Fatalf("exit %d, stderr %q; want non-zero and %q", code, errOut, c.want)
			}
			if out != "" {
				t.Errorf("stdout not empty: %q", out)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("output folder was created despite the error")
			}
		})
	}
	code, _, errOut := run(t, []byte(cmYAML("H4sI", false)), "decode", "-", "--max-decoded-size", "nonsense")
	if code == 0 || !strings.Contains(errOut, "--max-decoded-size") {
		t.Fatalf("bad flag: %d %s", code, errOut)
	}
}

func cmYAML(manifests string, encoded bool) string {
	ann := ""
	if encoded {
		ann = "  annotations:\n    kubevirt.io/install-strategy-cm-encoding: gzip+base64\n"
	}
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: s\n  namespace: ns\n" + ann + "data:\n  manifests: " + manifests + "\n"
}

func TestGzipBombRefused(t *testing.T) {
	testtier.Heavy(t) // 64 MiB through encode and decode
	// 64 MiB of zeros compresses to about 64 KiB.
	var text bytes.Buffer
	text.WriteString("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n  k: \"")
	text.Write(bytes.Repeat([]byte("0"), 65<<20))
	text.WriteString("\"\n")
	code, cm, errOut := run(t, text.Bytes(), "encode", "-", "--version", "v1", "--keep-text", "--max-decoded-size", "128Mi")
	if code != 0 {
		t.Fatalf("encode: %d %s", code, errOut)
	}
	code, _, errOut = run(t, []byte(cm), "decode", "-")
	if code == 0 || !strings.Contains(errOut, "limit: decoded text exceeds the limit of 67108864 bytes") {
		t.Fatalf("exit %d %q", code, errOut)
	}
	code, _, errOut = run(t, []byte(cm), "decode", "-", "--max-decoded-size", "128Mi")
	if code != 0 {
		t.Fatalf("raised limit: exit %d %s", code, errOut)
	}
}

func TestHelpHasExamples(t *testing.T) {
	root := NewRootCommand(Streams{})
	for _, c := range root.Commands() {
		if c.Name() == "help" || c.Name() == "version" {
			continue
		}
		if c.Example == "" {
			t.Errorf("%s has no example", c.Name())
		}
		if len(c.Long) < 80 {
			t.Errorf("%s has no long help", c.Name())
		}
	}
}

func TestIDMatchesKubeVirt(t *testing.T) {
	for _, v := range kubevirtdata.Versions {
		code, out, errOut := run(t, nil, "id", "--config", kubevirtdata.Path(t, v, "config.json"), "--algorithm", "kubevirt")
		if code != 0 || strings.TrimSpace(out) != kubevirtdata.ID(t, v) {
			t.Fatalf("%s: exit %d, got %q want %q (%s)", v, code, out, kubevirtdata.ID(t, v), errOut)
		}
		code, out, _ = run(t, nil, "id", "--config", kubevirtdata.Path(t, v, "config.json"), "--check")
		if code != 0 || !strings.Contains(out, "kubevirt algorithm") {
			t.Fatalf("%s --check: exit %d %q", v, code, out)
		}
	}
	code, out, _ := run(t, []byte(`{"namespace":"ns","registry":"r","kubeVirtVersion":"v1"}`), "id", "--config", "-")
	if code != 0 || len(strings.TrimSpace(out)) < 40 {
		t.Fatalf("native: exit %d %q", code, out)
	}
	code, _, errOut := run(t, []byte(`{"namespace":"ns","bogus":1}`), "id", "--config", "-")
	if code == 0 || !strings.Contains(errOut, "bogus") {
		t.Fatalf("unknown key: exit %d %q", code, errOut)
	}
	code, _, errOut = run(t, []byte(`{"id":"0000","namespace":"ns"}`), "id", "--config", "-", "--check")
	if code != 1 {
		t.Fatalf("mismatching id: exit %d %q", code, errOut)
	}
}

// The plugin collects at gctune's default unless GOGC is set, as the
// operator does: its peak memory on KubeVirt is measured at it.
func TestMainSetsTheGCDefault(t *testing.T) {
	t.Setenv("GOGC", "")
	restore := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(restore) })
	if code, _, errOut := run(t, nil, "version"); code != 0 {
		t.Fatalf("version: exit %d: %s", code, errOut)
	}
	if got := debug.SetGCPercent(100); got != gctune.PluginPercent {
		t.Errorf("after the plugin ran, GOGC is %d, want %d", got, gctune.PluginPercent)
	}
}
