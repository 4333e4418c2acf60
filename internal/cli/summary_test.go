package cli

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/installstrategy/installstrategy/internal/kubevirtdata"
	"github.com/installstrategy/installstrategy/pkg/health"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

func parseText(t *testing.T, text string) *strategy.Strategy {
	t.Helper()
	s, _, err := strategy.Parse([]byte(text), strategy.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const summaryBefore = `---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: reader
rules:
- apiGroups: [""]
  resources: [pods]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: reader
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: reader}
subjects:
- {kind: ServiceAccount, name: app, namespace: n}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
  namespace: n
spec:
  replicas: 1
  selector: {matchLabels: {app: app}}
  template:
    metadata:
      labels: {app: app}
    spec:
      containers:
      - name: app
        image: example.com/app:v1
        args: [--fast]
`

// summaryAfter widens the role (list pods, get secrets), adds a subject,
// adds a CRD version and changes the schema of the old one, and changes
// the Deployment's image and args (a restart) and its replicas (none).
var summaryAfter = strings.NewReplacer(
	"  verbs: [get]\n", "  verbs: [get, list]\n- apiGroups: [\"\"]\n  resources: [secrets]\n  verbs: [get]\n",
	"- {kind: ServiceAccount, name: app, namespace: n}\n", "- {kind: ServiceAccount, name: app, namespace: n}\n- {kind: Group, name: everyone}\n",
	"    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n",
	"    storage: false\n    schema:\n      openAPIV3Schema:\n        type: object\n        x-kubernetes-preserve-unknown-fields: true\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n",
	"app:v1", "app:v2",
	"[--fast]", "[--slow]",
	"replicas: 1", "replicas: 3",
).Replace(summaryBefore)

// TestSummaryHighlights: what matters leads (table of the highlights a
// reader needs: restart and why, image, RBAC widening, CRD versions).
func TestSummaryHighlights(t *testing.T) {
	a, b := parseText(t, summaryBefore), parseText(t, summaryAfter)
	c, err := diffStrategies(a, b, "a", "b", false)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	printSummary(&out, c.Summary, palette{})
	for _, want := range []string{
		"Workloads that restart (1):\n  Deployment n/app: image, containers[app].args\n",
		"Images (1):\n  ~ Deployment n/app [app]: example.com/app:v1 → v2\n",
		"CRD schema changes (1):\n  ~ CustomResourceDefinition widgets.example.com: version v1 added; v1alpha1 storage true → false; v1alpha1 schema: 1 fields\n",
		"  ~ ClusterRole reader: + list on pods; + get on secrets\n",
		"  ~ ClusterRoleBinding reader: now ClusterRole reader to Group everyone, ServiceAccount n/app (was ClusterRole reader to ServiceAccount n/app)\n",
		"  ~ Deployment n/app: .spec.replicas 1 → 3; pod template: image, containers[app].args\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
	// Narrowing is no widening.
	c, err = diffStrategies(b, a, "b", "a", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range c.Summary.RBAC {
		if r.Ref.Kind == "ClusterRole" {
			t.Errorf("narrowed role listed as widening: %+v", r)
		}
	}
}

// TestDiffFilters: --kind and --object narrow the comparison.
func TestDiffFilters(t *testing.T) {
	a, b := kubevirtdata.Path(t, "v1.8.4", "configmap.yaml"), kubevirtdata.Path(t, "v1.9.0", "configmap.yaml")
	for _, c := range []struct {
		args  []string
		first string
	}{
		{[]string{"--kind", "Deployment"}, "added 2, removed 0, changed 4, unchanged 0"},
		{[]string{"--kind", "daemonset.apps,Deployment", "--object", "virt-h*,virt-api"}, "added 0, removed 0, changed 2, unchanged 0"},
		{[]string{"--object", "kubevirt/virt-api"}, "added 0, removed 0, changed 1, unchanged 1"},
	} {
		code, out, errOut := run(t, nil, append([]string{"diff", a, b, "--summary"}, c.args...)...)
		lines := strings.Split(out, "\n")
		if code != 1 || len(lines) < 2 || lines[1] != c.first {
			t.Errorf("%v: exit %d, want 1 and %q:\n%s%s", c.args, code, c.first, out, errOut)
		}
	}
}

// TestDiffExternal: $KUBECTL_EXTERNAL_DIFF is run on two folders of the
// objects, and its exit status is diff's.
func TestDiffExternal(t *testing.T) {
	if _, err := exec.LookPath("diff"); err != nil {
		t.Fatal("diff(1) is needed: ", err)
	}
	pa, pb := oneTwo(t)
	t.Setenv("KUBECTL_EXTERNAL_DIFF", "diff -u -N")
	code, out, errOut := run(t, nil, "diff", pa, pb)
	if code != 1 || !strings.Contains(out, "-  k: one\n+  k: two\n") || !strings.Contains(out, "/v1.ConfigMap.n.c") || !strings.Contains(out, "FROM-") {
		t.Fatalf("external diff: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ := run(t, nil, "diff", pa, pa); code != 0 || out != "" {
		t.Fatalf("external diff of the same: exit %d %q", code, out)
	}
	t.Setenv("KUBECTL_EXTERNAL_DIFF", "diff --label=$(id)")
	if code, _, errOut := run(t, nil, "diff", pa, pb); code != 2 || !strings.Contains(errOut, "only letters, digits") {
		t.Fatalf("external diff with a shell argument: exit %d %s", code, errOut)
	}
}

// TestColor: --color always colours, never and auto off a terminal do
// not; $NO_COLOR is honoured by auto only.
func TestColor(t *testing.T) {
	pa, pb := oneTwo(t)
	for _, c := range []struct {
		color, noColor string
		want           bool
	}{{"always", "", true}, {"always", "1", true}, {"never", "", false}, {"auto", "", false}, {"auto", "1", false}} {
		t.Setenv("NO_COLOR", c.noColor)
		code, out, _ := run(t, nil, "diff", pa, pb, "--color", c.color)
		if code != 1 || strings.Contains(out, "\x1b[31m-  k: one\x1b[0m") != c.want || strings.Contains(out, "\x1b[") != c.want {
			t.Errorf("--color %s, NO_COLOR=%q: exit %d, coloured %v, want %v", c.color, c.noColor, code, strings.Contains(out, "\x1b["), c.want)
		}
	}
	if p := (palette{on: true}); !strings.HasPrefix(p.colorDiff("+a\n-b\n"), "\x1b[32m+a") {
		t.Error("colorDiff does not colour an added line")
	}
}

// oneTwo writes two strategies of one ConfigMap whose value k is one, then
// two.
func oneTwo(t *testing.T) (string, string) {
	t.Helper()
	a := "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: n\ndata:\n  k: one\n"
	return writeFile(t, "a.yaml", a), writeFile(t, "b.yaml", strings.Replace(a, "one", "two", 1))
}

// TestRolloutView: on a terminal the block is redrawn in place; otherwise
// a line is printed only when an object's state changes.
func TestRolloutView(t *testing.T) {
	ref := strategy.ObjectRef{Group: "apps", Kind: "Deployment", Namespace: "n", Name: "app"}
	rounds := [][]health.Status{
		{{Ref: ref, Reason: "1/2 updated"}},
		{{Ref: ref, Reason: "1/2 updated"}},
		{{Ref: ref, Ready: true}},
	}
	var plain strings.Builder
	v := newRolloutView(&plain, false, palette{})
	for _, r := range rounds {
		v.progress(r)
	}
	if want := "  waiting Deployment.apps/n/app: 1/2 updated\n  ready   Deployment.apps/n/app\n"; plain.String() != want {
		t.Errorf("plain:\n%q\nwant\n%q", plain.String(), want)
	}
	var tty strings.Builder
	v = newRolloutView(&tty, true, palette{})
	for _, r := range rounds {
		v.progress(r)
	}
	v.printed()
	v.progress(rounds[0])
	if got := strings.Count(tty.String(), "\x1b[1A"); got != 2 {
		t.Errorf("tty: %d redraws, want 2 (then a new block after printed):\n%q", got, tty.String())
	}
}
