package cli

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/internal/testenv"
)

// TestClusterHelmLookupKeepsGeneratedSecret: Grafana's chart (unedited,
// kube-prometheus-stack's Grafana) generates its admin password unless
// lookup finds its live Secret. Encoded with --installation, the install
// renders as helm install (revision 1) and the upgrade to the next chart
// release as helm upgrade (revision 2) with lookup seeing the
// installation's live Secret: the password in the cluster is unchanged.
// Encoded without it (helm template, and every encode before), the
// upgrade's password is another.
func TestClusterHelmLookupKeepsGeneratedSecret(t *testing.T) {
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	ns := env.Namespace(ctx, t)
	const name = "grafana"
	chart := func(v string) string { return filepath.Join(renderTestdata, "charts", "grafana-"+v+".tgz") }
	encode := func(v string, extra ...string) (string, string) {
		t.Helper()
		args := append([]string{"encode", "--from-helm", chart(v), "-n", ns, "--release-name", "grafana", "--kube-version", "v1.36.3"}, extra...)
		code, out, errOut := run(t, nil, args...)
		if code != 0 {
			t.Fatalf("encode %s: exit %d: %s", v, code, errOut)
		}
		return writeFile(t, "grafana-"+v+".yaml", out), errOut
	}
	apply := func(file string) {
		t.Helper()
		if code, _, errOut := run(t, nil, "apply", file, "-n", ns, "--name", name); code != 0 {
			t.Fatalf("apply %s: exit %d: %s", file, code, errOut)
		}
	}
	password := func() string {
		t.Helper()
		s, err := env.Kube.CoreV1().Secrets(ns).Get(ctx, "grafana", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Data["admin-password"]) == 0 {
			t.Fatalf("secret grafana has no admin-password: %v", s.Data)
		}
		return string(s.Data["admin-password"])
	}

	first, errOut := encode("10.5.14", "--installation", name)
	if !strings.Contains(errOut, "rendered as an install of "+ns+"/"+name+" (revision 1); lookup sees its 0 objects") {
		t.Fatalf("encode of the install says:\n%s", errOut)
	}
	apply(first)
	installed := password()

	// Without --installation the upgrade draws a new password: what every
	// upgrade did before.
	blind, _ := encode("10.5.15")
	blindText, _ := encodedText(t, readFile(t, blind))
	if strings.Contains(blindText, b64(installed)) {
		t.Fatalf("an encode without --installation kept the live password: the test shows nothing")
	}

	next, errOut := encode("10.5.15", "--installation", name)
	if !strings.Contains(errOut, "rendered as an upgrade of "+ns+"/"+name+" (revision 2)") {
		t.Fatalf("encode of the upgrade says:\n%s", errOut)
	}
	nextText, _ := encodedText(t, readFile(t, next))
	if !strings.Contains(nextText, b64(installed)) {
		t.Fatalf("the upgrade's strategy does not hold the live password")
	}
	apply(next)
	if got := password(); got != installed {
		t.Fatalf("admin-password after the upgrade %q, want the installed %q", got, installed)
	}

	// lookup sees nothing of another installation: encoded for a name
	// that has no objects, the chart draws a new password although the
	// namespace holds grafana's Secret.
	other, errOut := encode("10.5.15", "--installation", "someone-else")
	if !strings.Contains(errOut, "rendered as an install of "+ns+"/someone-else (revision 1); lookup sees its 0 objects") {
		t.Fatalf("encode for another installation says:\n%s", errOut)
	}
	if otherText, _ := encodedText(t, readFile(t, other)); strings.Contains(otherText, b64(installed)) {
		t.Fatalf("lookup of another installation saw grafana's Secret")
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
