package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// mistakes are the ways people call the plugin wrongly, and inputs that
// are wrong. Usage errors exit 2 everywhere; other errors exit 1, except
// diff and plan, where 1 means "different" and every error is 2.
var mistakes = []struct {
	stdin string
	args  string
}{
	{"", "bogus"},
	{"", "decod strategy.yaml"},
	{"", "decode"},
	{"", "decode strategy.yaml manifests.yaml"},
	{"", "decode strategy.yaml --bogus"},
	{"", "decode strategy.yaml --force"},
	{"", "decode strategy.yaml --max-decoded-size nonsense"},
	{"", "inspect strategy.yaml -o xml"},
	{"", "inspect"},
	{"", "verify strategy.yaml -o xml"},
	{"", "verify strategy.yaml extra.yaml"},
	{"", "encode manifests.yaml"},
	{"", "encode manifests.yaml --version v1 --format bogus"},
	{"", "encode manifests.yaml --version v1 -o table"},
	{"", "encode --from-helm chart --from-kustomize kustomization"},
	{"", "encode manifests.yaml --from-helm chart"},
	{"", "encode manifests.yaml --version v1 --set a=b"},
	{"", "encode --from-kustomize kustomization"},
	{"", "encode --from-helm chart --set a.b"},
	{"", "encode --from-helm chart --kube-version one.two"},
	{"", "id"},
	{"", "id --config config.yaml --algorithm md5"},
	{"", "id config.yaml"},
	{"", "diff"},
	{"", "diff two-cms.yaml"},
	{"", "diff strategy.yaml manifests.yaml -o xml"},
	{"", "diff a b c"},
	{"", "diff --live"},
	{"", "plan"},
	{"", "plan strategy.yaml --strategy strategy.yaml"},
	{"", "plan a.yaml b.yaml"},
	{"", "plan strategy.yaml -o xml"},
	{"", "apply"},
	{"", "apply strategy.yaml --timeout soon"},
	{"", "list -o xml"},
	{"", "list extra"},
	{"", "get"},
	{"", "get name --output-dir x --force --version v1"},
	{"", "publish manifests.yaml"},
	{"", "publish manifests.yaml --version v1 --format bogus"},
	{"", "status -o xml"},
	{"", "version extra"},
	{"", "inspect strategy.yaml -f strategy.yaml"},
	{"", "inspect strategy.yaml -o jsonpath={.bad"},
	{"", "decode strategy.yaml -o name --output-dir x"},
	{"", "apply strategy.yaml --dry-run=maybe"},
	{"", "apply strategy.yaml -o yaml"},
	{"", "plan -f strategy.yaml --strategy strategy.yaml"},
	{"", "diff strategy.yaml manifests.yaml --color sometimes"},
	{"", "history"},
	{"", "rollback"},
	{"", "rollback demo --to-revision -1"},
	{"", "list --kube-api-qps 0 --kubeconfig unreachable.kubeconfig"},
	{"", "apply manifests.yaml --kube-api-burst 0 --kubeconfig unreachable.kubeconfig"},
	{"", "status --kube-api-qps fast"},
	{"", "apply --adopt-helm-release lb --dry-run=server"},
	{"", "pull"},
	{"", "pull strategy.yaml"},
	{"", "pull oci://sample:v1"},
	{"", "pull oci://127.0.0.1:1/acme/sample"},
	{"", "pull oci://127.0.0.1:1/Acme/sample:v1"},
	{"", "pull oci://127.0.0.1:1/acme/sample:v1 -o table"},
	{"", "pull oci://127.0.0.1:1/acme/sample:v1 -o text --format kubevirt"},
	{"", "copy oci://127.0.0.1:1/acme/sample:v1"},
	{"", "copy oci://127.0.0.1:1/acme/sample:v1 mirror.yaml"},
	{"", "push manifests.yaml"},
	{"", "publish manifests.yaml extra.yaml"},
	{"", "publish manifests.yaml oci://127.0.0.1:1/acme/sample:v1"},
	{"", "publish manifests.yaml --version v1 --product sample"},
	{"", "publish manifests.yaml oci://127.0.0.1:1/acme/sample:v1 --version v1 --format kubevirt"},
	{"", "verify strategy.yaml --product kubevirt"},
	{"", "verify oci://127.0.0.1:1/acme/sample:v1 --version v1"},
	{"", "decode oci://127.0.0.1:1/acme/sample:v1 --name x"},
	// Inputs that are wrong: runtime errors.
	{"", "decode missing.yaml"},
	{"", "decode secret.yaml"},
	{"", "decode plain-cm.yaml"},
	{"", "decode chunk.yaml"},
	{"", "decode head.yaml"},
	{"", "decode two-cms.yaml"},
	{"", "inspect secret.yaml"},
	{"", "verify secret.yaml"},
	{"", "verify chunk.yaml"},
	{"", "diff secret.yaml manifests.yaml"},
	{"", "diff two-cms.yaml strategy.yaml"},
	{"", "encode strategy.yaml --version v1.9.0"},
	{"", "encode --from-helm missing-chart"},
	{"", "encode --from-helm chart --values missing-values.yaml"},
	{"", "encode --from-helm chart --values bad-values.yaml"},
	{"", "encode --from-kustomize kustomization --version v1"},
	{"", "encode --from-kustomize missing-dir --version v1"},
	{"{}", "id --config -"},
	{"namespace: [", "id --config -"},
	{"", "publish manifests.yaml --version v1 --kubeconfig unreachable.kubeconfig"},
	// An unreachable registry: one line naming the reference and the step.
	{"", "inspect oci://127.0.0.1:1/acme/sample:v1"},
	{"", "pull oci://127.0.0.1:1/acme/sample:v1"},
	{"", "verify oci://127.0.0.1:1/acme/sample:v1"},
	{"", "diff oci://127.0.0.1:1/acme/sample:v1 strategy.yaml"},
	{"", "publish manifests.yaml oci://127.0.0.1:1/acme/sample:v1 --version v1"},
	{"", "copy oci://127.0.0.1:1/acme/sample:v1 oci://127.0.0.1:1/mirror/sample"},
	// An unreachable cluster: one line naming the server, nothing from klog.
	{"", "list --kubeconfig unreachable.kubeconfig"},
	{"", "list -A --kubeconfig unreachable.kubeconfig"},
	{"", "get cm/x --kubeconfig unreachable.kubeconfig"},
	{"", "verify cm/x --kubeconfig unreachable.kubeconfig"},
	{"", "plan manifests.yaml --kubeconfig unreachable.kubeconfig"},
	{"", "apply -f manifests.yaml --dry-run=server --kubeconfig unreachable.kubeconfig"},
	{"", "apply manifests.yaml --kubeconfig unreachable.kubeconfig"},
	{"", "diff --live manifests.yaml --kubeconfig unreachable.kubeconfig"},
	{"", "status --kubeconfig unreachable.kubeconfig"},
	{"", "history demo --kubeconfig unreachable.kubeconfig"},
	{"", "rollback demo --kubeconfig unreachable.kubeconfig"},
	{"", "apply --adopt-helm-release lb --kubeconfig unreachable.kubeconfig"},
	{"", "plan --adopt-helm-release lb --kubeconfig unreachable.kubeconfig"},
}

// TestMistakes: each mistake gives its exit code and a one-line message
// (testdata/mistakes.golden holds the code and the first line of stderr),
// prints nothing on standard output and writes nothing.
func TestMistakes(t *testing.T) {
	dir := t.TempDir()
	inputFiles(t, dir)
	t.Chdir(dir)
	before := listing(t, dir)
	var b strings.Builder
	for _, m := range mistakes {
		code, out, errOut := run(t, []byte(m.stdin), strings.Fields(m.args)...)
		first, rest, _ := strings.Cut(errOut, "\n")
		fmt.Fprintf(&b, "%s\n  exit %d: %s\n", m.args, code, first)
		if code == 0 {
			t.Errorf("%s: exit 0", m.args)
		}
		if out != "" && !strings.HasPrefix(m.args, "verify ") {
			t.Errorf("%s: wrote to stdout: %q", m.args, tail(out))
		}
		if strings.TrimSpace(rest) != "" && !strings.HasPrefix(m.args, "verify ") {
			t.Errorf("%s: more than one line on stderr:\n%s", m.args, errOut)
		}
	}
	if after := listing(t, dir); after != before {
		t.Errorf("the mistakes wrote files:\n%s", after)
	}
	golden(t, "mistakes", strings.ReplaceAll(b.String(), dir+string(filepath.Separator), ""))
	if _, err := os.Stat(filepath.Join(dir, "x")); !os.IsNotExist(err) {
		t.Errorf("get --output-dir x created x")
	}
}

// TestCompletion: cobra's completion command (docs/CLI.md, "Shell
// completion") prints a script, and completes the plugin's verbs.
func TestCompletion(t *testing.T) {
	code, out, errOut := run(t, nil, "completion", "bash")
	if code != 0 || !strings.Contains(out, "__start_kubectl-installstrategy") {
		t.Fatalf("completion bash: exit %d %s", code, errOut)
	}
	code, out, _ = run(t, nil, "__complete", "dec")
	if code != 0 || !strings.HasPrefix(out, "decode\t") {
		t.Fatalf("__complete dec: exit %d %q", code, out)
	}
}

// TestClientLimits: --kube-api-qps and --kube-api-burst reach the client's
// configuration; a negative rate means no client-side limit.
func TestClientLimits(t *testing.T) {
	for _, c := range []struct {
		qps   float64
		burst int
		want  string
	}{{50, 300, "50/300"}, {200, 400, "200/400"}, {-1, 0, "-1/0"}, {0, 10, "error"}, {5, 0, "error"}} {
		cfg := &rest.Config{}
		var got string
		if err := (&options{qps: c.qps, burst: c.burst}).clientLimits(cfg); err != nil {
			got = "error"
		} else {
			got = fmt.Sprintf("%v/%d", cfg.QPS, cfg.Burst)
		}
		if got != c.want {
			t.Errorf("--kube-api-qps %v --kube-api-burst %d: %s, want %s", c.qps, c.burst, got, c.want)
		}
	}
	// The defaults are kapp's: a 5,000-object product is paced by the API
	// server, not by the client (2.4x faster than Helm 4 then; at 50 QPS
	// it took 94.5 s against Helm's 33 s, docs/PERFORMANCE.md).
	root := NewRootCommand(Streams{})
	for flag, want := range map[string]string{"kube-api-qps": "1000", "kube-api-burst": "1000"} {
		if f := root.PersistentFlags().Lookup(flag); f == nil || f.DefValue != want {
			t.Errorf("--%s default %v, want %s", flag, f, want)
		}
	}
}
