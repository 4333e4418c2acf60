package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/installstrategy/installstrategy/internal/kubevirtdata"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// TestClusterAdoptVirtOperatorKubeVirt is issue #27 through the plugin: a
// KubeVirt v1.9.0 as virt-operator writes it (testenv.CreateAsVirtOperator,
// from the very strategy ConfigMap the plugin is given) is taken over with
// `apply --adopt --wait` with no conflict and rolled over, every pod of
// every Deployment still the same pod (virt-handler's are replaced: the
// apply says why), and `plan` then exits 0.
func TestClusterAdoptVirtOperatorKubeVirt(t *testing.T) {
	testenv.Lock(t, testenv.KubeVirtLock)
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	owner := inventory.Owner{Namespace: "kubevirt", Name: "kubevirt-adopt-test"}
	kubevirtPrerequisites(ctx, t, env, owner)
	l, err := codec.LoadConfigMap("v1.9.0", readConfigMap(t, "v1.9.0"), codec.DecodeOptions{}, strategy.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env.CreateAsVirtOperator(ctx, t, l.Strategy)
	// virt-api's webhooks (failurePolicy Fail) answer with the certificate
	// virt-operator put in its Secret: the takeover keeps it, and the API
	// server must trust its CA through the bundle the takeover writes.
	serveVirtAPI(ctx, t, env)
	before := env.PodUIDs(ctx, t, "kubevirt")

	args := func(a ...string) []string {
		return append(a, "--kubeconfig", kubeconfigPath(), "-n", "kubevirt", "--name", owner.Name)
	}
	v190 := kubevirtdata.Path(t, "v1.9.0", "configmap.yaml")
	code, out, errOut := run(t, nil, args("apply", v190, "--adopt", "--wait", "--timeout", "5m")...)
	if code != 0 {
		t.Fatalf("apply --adopt: exit %d\n%s\n%s", code, tail(out), errOut)
	}
	if c := summaryCounts(t, out); c["conflicts"] != 0 || c["skipped"] != 3 || !strings.Contains(out, "rolled over: true") {
		t.Errorf("apply --adopt: %v\n%s", c, tail(out))
	}
	env.ExpectPodsKept(ctx, t, "kubevirt", before, "DaemonSet/virt-handler")
	if !strings.Contains(out, "pod template written, replacing the pods: the live one does not hold the strategy's .spec.template.spec.") {
		t.Errorf("apply --adopt does not say why virt-handler's pods are replaced:\n%s", tail(out))
	}
	if code, out, errOut := run(t, nil, args("plan", "--strategy", v190)...); code != 0 {
		t.Errorf("plan after the takeover: exit %d, want 0\n%s\n%s", code, tail(out), errOut)
	}
}
