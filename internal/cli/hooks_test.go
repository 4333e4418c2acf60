package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/internal/productdata"
	"github.com/installstrategy/installstrategy/internal/testenv"
)

// TestClusterPluginRunsHelmHooks: pkg/render's hooks chart (a pre-install,
// pre-upgrade Job of weight -5, a pre-delete ConfigMap, a test Pod),
// encoded with --from-helm, runs its hooks through the plugin: apply runs
// the pre-install Job, the upgrade apply runs it as pre-upgrade, rollback
// runs the rollback phases (none here: the Job does not run again, and
// the rollback's plan shows no upgrade phase), plan shows the phases, and
// uninstall runs the pre-delete ConfigMap before it deletes the release,
// which leaves the hook (not the release's) in place.
func TestClusterPluginRunsHelmHooks(t *testing.T) {
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	ns := env.Namespace(ctx, t)
	pi := &productInstall{Product: productdata.Product{Name: "hooks"}, ns: ns, name: ns, encoded: map[string]string{}}
	for _, v := range []string{"1.0.0", "1.1.0"} {
		code, out, errOut := run(t, nil, "encode", "--from-helm", filepath.Join(renderTestdata, "hooks"), "-n", ns, "--kube-version", "v1.36.3", "--strategy-version", v, "--set", "greeting="+v)
		if code != 0 {
			t.Fatalf("encode: exit %d: %s", code, errOut)
		}
		if !strings.Contains(errOut, "ConfigMap/hooks-goodbye (pre-delete") || !strings.Contains(errOut, "kept") {
			t.Errorf("hook report:\n%s", errOut)
		}
		pi.Versions = append(pi.Versions, v)
		pi.encoded[v] = writeFile(t, "hooks-"+v+".yaml", out)
	}
	hookLine := func(out, phase string) bool {
		return strings.Contains(out, "Job.batch/"+ns+"/hooks-setup ("+phase+")")
	}
	out := pi.apply(t, "1.0.0")
	if !hookLine(out, "hook pre-install") {
		t.Errorf("apply ran no pre-install hook:\n%s", out)
	}
	out = pi.apply(t, "1.0.0")
	if strings.Contains(out, "(hook ") {
		t.Errorf("re-apply ran hooks again:\n%s", out)
	}
	out = pi.step(t, "plan", 1, "plan", "--strategy", pi.encoded["1.1.0"]) // exit 1: changes
	if !strings.Contains(out, "hook pre-upgrade") || !strings.Contains(out, "Job.batch/"+ns+"/hooks-setup") {
		t.Errorf("plan of the upgrade shows no pre-upgrade hook:\n%s", out)
	}
	out = pi.apply(t, "1.1.0")
	if !hookLine(out, "hook pre-upgrade") {
		t.Errorf("upgrade ran no pre-upgrade hook:\n%s", out)
	}
	out = pi.step(t, "rollback", 0, "rollback", pi.name, "--yes", "--wait", "--timeout", "2m")
	if strings.Contains(out, "(hook ") || strings.Contains(out, "hook pre-upgrade") {
		t.Errorf("rollback planned or ran upgrade hooks:\n%s", out)
	}
	out = pi.step(t, "uninstall", 0, "uninstall", pi.name, "--wait")
	pre, del := strings.Index(out, "hook pre-delete: create ConfigMap/"+ns+"/hooks-goodbye"), strings.Index(out, "delete ConfigMap/"+ns+"/hooks-config")
	if pre < 0 || del < pre {
		t.Errorf("uninstall did not run the pre-delete hook before the deletion:\n%s", out)
	}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "hooks-goodbye", metav1.GetOptions{}); err != nil {
		t.Errorf("pre-delete hook ConfigMap: %v", err)
	}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "hooks-config", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("release ConfigMap after uninstall: %v", err)
	}
}
