package cli

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// secretStrategy is a product of a Secret (data and stringData) and a
// ConfigMap in ns.
func secretStrategy(ns, password, token string) string {
	return fmt.Sprintf(`---
apiVersion: v1
kind: Secret
metadata:
  name: credentials
  namespace: %[1]s
type: Opaque
data:
  password: %[2]s
stringData:
  token: %[3]s
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: %[1]s
data:
  mode: fast
`, ns, base64.StdEncoding.EncodeToString([]byte(password)), token)
}

// secretValues are every form in which a test's secret values could leak.
func assertNoSecret(t *testing.T, what, out string, values ...string) {
	t.Helper()
	for _, v := range values {
		for _, form := range []string{v, base64.StdEncoding.EncodeToString([]byte(v))} {
			if strings.Contains(out, form) {
				t.Errorf("%s shows a secret value (%q):\n%s", what, form, out)
			}
		}
	}
}

// A Secret changed in the cluster: plan (table and json) and diff --live
// say which key differs and its sizes, never a value (golden output).
func TestClusterPlanAndDiffLiveMaskSecrets(t *testing.T) {
	env, ctx, ns := smallProduct(t)
	v1 := writeFile(t, "v1.yaml", secretStrategy(ns, "hunter2", "tok-1234"))
	args := func(a ...string) []string {
		return append(append(a, "--version", "v1", "--registry", "example.com"), clusterArgs(ns)...)
	}
	if code, out, errOut := run(t, nil, args("apply", v1, "--wait", "--timeout", "1m")...); code != 0 {
		t.Fatalf("apply: exit %d\n%s\n%s", code, out, errOut)
	}
	// Someone changes the live Secret's password.
	patch := fmt.Sprintf(`{"data":{"password":%q}}`, base64.StdEncoding.EncodeToString([]byte("swordfish-live")))
	if _, err := env.Kube.CoreV1().Secrets(ns).Patch(ctx, "credentials", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	values := []string{"hunter2", "swordfish-live", "tok-1234"}

	code, out, errOut := run(t, nil, args("diff", "--live", v1)...)
	if code != 1 {
		t.Fatalf("diff --live: exit %d\n%s\n%s", code, out, errOut)
	}
	assertNoSecret(t, "diff --live", out, values...)
	golden(t, "difflive-secret", strings.ReplaceAll(out, ns, "NAMESPACE"))

	code, out, errOut = run(t, nil, args("plan", "--strategy", v1)...)
	if code != 1 {
		t.Fatalf("plan: exit %d\n%s\n%s", code, out, errOut)
	}
	assertNoSecret(t, "plan", out, values...)
	golden(t, "plan-secret", hexRE.ReplaceAllString(strings.ReplaceAll(out, ns, "NAMESPACE"), "HASH"))
	for _, o := range []string{"json", "yaml"} {
		code, out, _ = run(t, nil, args("plan", "--strategy", v1, "-o", o)...)
		if code != 1 || !strings.Contains(out, "(secret, 7 bytes)") {
			t.Errorf("plan -o %s: exit %d, no masked value:\n%s", o, code, out)
		}
		assertNoSecret(t, "plan -o "+o, out, values...)
	}
}

// The diff of two strategies masks a changed Secret's values unless
// --show-secrets; other objects are diffed as they are.
func TestDiffMasksStrategySecrets(t *testing.T) {
	a := writeFile(t, "a.yaml", secretStrategy("ns", "hunter2", "tok-1"))
	b := writeFile(t, "b.yaml", strings.Replace(secretStrategy("ns", "correct-horse", "tok-1"), "mode: fast", "mode: slow", 1))
	code, out, _ := run(t, nil, "diff", a, b)
	if code != 1 {
		t.Fatalf("diff: exit %d\n%s", code, out)
	}
	assertNoSecret(t, "diff", out, "hunter2", "correct-horse", "tok-1")
	for _, want := range []string{"-  password: '*** (before, 7 bytes)'", "+  password: '*** (after, 13 bytes)'", "-  mode: fast", "+  mode: slow"} {
		if !strings.Contains(out, want) {
			t.Errorf("diff lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = run(t, nil, "diff", a, b, "--show-secrets")
	if code != 1 || !strings.Contains(out, base64.StdEncoding.EncodeToString([]byte("correct-horse"))) {
		t.Errorf("diff --show-secrets: exit %d, no value:\n%s", code, out)
	}
}
