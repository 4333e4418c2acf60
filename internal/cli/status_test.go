package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/internal/kubevirtdata"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
)

// TestClusterStatusWatch plays the operator's part by writing status, and
// checks that status --watch follows the rollout to the end (not a TTY).
func TestClusterStatusWatch(t *testing.T) {
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ns := env.Namespace(ctx, t)
	env.InstallCRDFile(ctx, t, "../../config/crd/bases/installstrategy.io_installations.yaml")
	res := env.Dynamic.Resource(installationsGVR).Namespace(ns)
	inst := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "installstrategy.io/v1alpha1", "kind": "Installation",
		"metadata": map[string]any{"name": "demo", "namespace": ns},
		"spec":     map[string]any{"version": "v1.1.0"},
	}}
	if _, err := res.Create(ctx, inst, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setStatus := func(status map[string]any) {
		t.Helper()
		cur, err := res.Get(ctx, "demo", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Object["status"] = status
		if _, err := res.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	now := metav1.Now().UTC().Format(time.RFC3339)
	cond := func(typ, status, reason string) map[string]any {
		return map[string]any{"type": typ, "status": status, "reason": reason, "message": reason, "lastTransitionTime": now}
	}
	comp := func(updated int64) []any {
		return []any{map[string]any{"name": "sample-handler", "kind": "DaemonSet", "role": "handler", "desired": int64(3), "updated": updated, "ready": updated, "rolledOver": updated == 3}}
	}
	setStatus(map[string]any{"phase": "Deploying", "targetVersion": "v1.1.0", "observedVersion": "v1.0.0",
		"conditions": []any{cond("Available", "True", "AllComponentsReady"), cond("Progressing", "True", "UpdateInProgress"), cond("Degraded", "False", "UpdateInProgress")},
		"components": comp(1)})

	out := &testenv.SyncBuffer{}
	done := make(chan int)
	go func() {
		done <- Main(append([]string{"status", "demo", "--watch", "--timeout", "60s"}, clusterArgs(ns)...), Streams{In: strings.NewReader(""), Out: out, ErrOut: out})
	}()
	testenv.WaitFor(ctx, t, "status --watch prints the first state", func(ctx context.Context) (bool, string, error) {
		return strings.Contains(out.String(), "1/3 updated"), out.String(), nil
	})
	setStatus(map[string]any{"phase": "Deploying", "targetVersion": "v1.1.0", "observedVersion": "v1.0.0",
		"conditions": []any{cond("Available", "True", "AllComponentsReady"), cond("Progressing", "True", "UpdateInProgress"), cond("Degraded", "False", "UpdateInProgress")},
		"components": comp(2)})
	testenv.WaitFor(ctx, t, "status --watch prints the second state", func(ctx context.Context) (bool, string, error) {
		return strings.Contains(out.String(), "2/3 updated"), out.String(), nil
	})
	setStatus(map[string]any{"phase": "Deployed", "targetVersion": "v1.1.0", "observedVersion": "v1.1.0",
		"conditions": []any{cond("Available", "True", "AllComponentsReady"), cond("Progressing", "False", "AllComponentsReady"), cond("Degraded", "False", "AllComponentsReady")},
		"components": comp(3)})
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("watch exit %d:\n%s", code, out.String())
		}
	case <-ctx.Done():
		t.Fatalf("watch did not end:\n%s", out.String())
	}
	got := out.String()
	for _, want := range []string{"phase Deploying", "DaemonSet sample-handler (handler): 1/3 updated, 1/3 ready", "2/3 updated", "phase Deployed", "✓ DaemonSet sample-handler (handler): 3/3 updated, 3/3 ready", "observed: v1.1.0"} {
		if !strings.Contains(got, want) {
			t.Errorf("watch output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "[#") {
		t.Error("bars printed on a non-terminal")
	}
	// Degraded ends a watch with exit 1 and the reason.
	setStatus(map[string]any{"phase": "Deploying", "conditions": []any{cond("Degraded", "True", "CanaryFailed")}})
	code, _, errOut := run(t, nil, append([]string{"status", "--watch", "--timeout", "30s"}, clusterArgs(ns)...)...)
	if code != 1 || !strings.Contains(errOut, "degraded: CanaryFailed") {
		t.Fatalf("degraded watch: exit %d %q", code, errOut)
	}
}

// TestClusterStatusKubeVirt reads a KubeVirt CR (its real CRD from the
// v1.9.0 strategy) and its pods' install-strategy annotations.
func TestClusterStatusKubeVirt(t *testing.T) {
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ns := env.Namespace(ctx, t)
	createKubeVirtCRD(ctx, t, env)
	res := env.Dynamic.Resource(kubevirtsGVR).Namespace(ns)
	// Established comes a moment before the API server serves the resource.
	var kv *unstructured.Unstructured
	testenv.WaitFor(ctx, t, "the KubeVirt CR is created", func(ctx context.Context) (bool, string, error) {
		var err error
		kv, err = res.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt", "metadata": map[string]any{"name": "kubevirt"}, "spec": map[string]any{}}}, metav1.CreateOptions{})
		if apierrors.IsNotFound(err) {
			return false, err.Error(), nil
		}
		return err == nil, "", err
	})
	id := kubevirtdata.ID(t, "v1.9.0")
	kv.Object["status"] = map[string]any{"phase": "Deploying", "targetKubeVirtVersion": "v1.9.0", "targetKubeVirtRegistry": "quay.io/kubevirt", "targetDeploymentID": id,
		"observedKubeVirtVersion": "v1.8.4", "conditions": []any{map[string]any{"type": "Progressing", "status": "True", "reason": "UpdateInProgress", "message": "updating"}}}
	// KubeVirt's CRD has the status subresource (testenv.EnsureKubeVirtCRD).
	if _, err := res.UpdateStatus(ctx, kv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i, target := range []bool{true, false} {
		ann := map[string]string{metakeys.KubeVirtVersionAnnotation: "v1.8.4", metakeys.KubeVirtRegistryAnnotation: "quay.io/kubevirt", metakeys.KubeVirtIdentifierAnnotation: "old"}
		if target {
			ann = map[string]string{metakeys.KubeVirtVersionAnnotation: "v1.9.0", metakeys.KubeVirtRegistryAnnotation: "quay.io/kubevirt", metakeys.KubeVirtIdentifierAnnotation: id}
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "virt-api-" + string(rune('a'+i)), Namespace: ns, Labels: map[string]string{"kubevirt.io": "virt-api"}, Annotations: ann},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "quay.io/kubevirt/virt-api:v1.9.0"}}}}
		if _, err := env.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.WaitFor(ctx, t, "status shows both virt-api pods ready", func(ctx context.Context) (bool, string, error) {
		code, out, errOut := run(t, nil, append([]string{"status"}, clusterArgs(ns)...)...)
		return code == 0 && strings.Contains(out, "Pod virt-api: 1/2 updated, 2/2 ready"), out + errOut, nil
	})
	code, out, _ := run(t, nil, append([]string{"status", "kubevirt/kubevirt"}, clusterArgs(ns)...)...)
	if code != 0 || !strings.Contains(out, "KubeVirt "+ns+"/kubevirt: phase Deploying") || !strings.Contains(out, "target:   v1.9.0 quay.io/kubevirt "+id) {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	// The printers see the custom resource's kind.
	code, out, _ = run(t, nil, append([]string{"status", "kubevirt/kubevirt", "-o", "name"}, clusterArgs(ns)...)...)
	if code != 0 || out != "kubevirt.kubevirt.io/kubevirt\n" {
		t.Fatalf("-o name: exit %d %q", code, out)
	}
	code, out, _ = run(t, nil, append([]string{"status", "kubevirt/kubevirt", "-o", "jsonpath={.metadata.namespace} {.phase} {range .components[*]}{.name}={.ready} {end}"}, clusterArgs(ns)...)...)
	if code != 0 || !strings.HasPrefix(out, ns+" Deploying ") || !strings.Contains(out, "virt-api=2 ") {
		t.Fatalf("-o jsonpath: exit %d %q", code, out)
	}
}
