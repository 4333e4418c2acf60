package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/internal/testenv"
)

// The plugin's plan and apply check a strategy's declared requirements and
// dry-run it on the server before any write: plan lists what is unmet and
// exits 1; apply refuses with the same lines, or (--server-preflight
// always, a fresh install) with the objects the API server refuses, and
// writes nothing; an unknown mode is a usage error.
func TestPlanAndApplyPreflights(t *testing.T) {
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	ns := env.Namespace(ctx, t)
	write := func(name, text string) string {
		p := filepath.Join(t.TempDir(), name+".yaml")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cm := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: first, namespace: %s}\ndata: {v: one}\n", ns)
	unmet := write("unmet", cm+"---\napiVersion: installstrategy.io/v1alpha1\nkind: Requirements\nmetadata: {name: requirements}\n"+
		"spec:\n  apis: [nothing.installstrategy.test/v1]\n  nodes: [{matchLabels: {installstrategy.test/never: \"yes\"}}]\n")
	refused := write("refused", cm+fmt.Sprintf("---\napiVersion: v1\nkind: Service\nmetadata: {name: portless, namespace: %s}\nspec: {selector: {app: x}}\n", ns))
	args := func(a ...string) []string {
		return append(a, "--kubeconfig", kubeconfigPath(), "-n", ns, "--name", "preflight", "--version", "v1.0.0")
	}
	code, out, errOut := run(t, nil, args("plan", "--strategy", unmet)...)
	if code != 1 || !strings.Contains(errOut, "apis: nothing.installstrategy.test/v1 is not served") || !strings.Contains(errOut, "nodes: no node carries installstrategy.test/never=yes") {
		t.Errorf("plan: exit %d, want 1 and both unmet requirements\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = run(t, nil, args("apply", unmet)...)
	if code == 0 || !strings.Contains(errOut, "requirements of the strategy not met; nothing was written") || !strings.Contains(errOut, "nothing.installstrategy.test/v1 is not served") {
		t.Errorf("apply: exit %d, want the refusal\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = run(t, nil, args("apply", refused, "--server-preflight", "always")...)
	if code == 0 || !strings.Contains(errOut, "server-side preflight") || !strings.Contains(errOut, "apply Service/"+ns+"/portless: ") {
		t.Errorf("apply: exit %d, want the server-side refusal naming the Service\n%s\n%s", code, out, errOut)
	}
	if code, _, errOut := run(t, nil, args("apply", refused, "--server-preflight", "sometimes")...); code != 2 || !strings.Contains(errOut, "--server-preflight") {
		t.Errorf("an unknown mode: exit %d, want 2\n%s", code, errOut)
	}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "first", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a refused apply wrote the ConfigMap: %v", err)
	}
}
