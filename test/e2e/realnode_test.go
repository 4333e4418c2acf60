package e2e

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/hack/localcluster/cluster"
	"github.com/installstrategy/installstrategy/internal/images"
	"github.com/installstrategy/installstrategy/internal/testenv"
)

// TestRealCanaryCrashLoopStopsUpgrade runs the sample product's handler
// DaemonSet for real on the local cluster's real node (its image built by
// internal/images from hack/sample-component, as `make images` does) and
// upgrades it to a version whose handler crashes (SAMPLE_CRASH=true, set
// by a customize patch): the canary pod really exits 1 and restarts on the
// real node, the rollout stops Degraded with CanaryFailed (phase Failed,
// observed v1.0.0), and the api Deployment still runs v1.0.0.
func TestRealCanaryCrashLoopStopsUpgrade(t *testing.T) {
	e := setup(t)
	rn := e.env.RealNode(t)
	ctx := t.Context()
	built, err := images.Build(ctx, images.Options{Root: "../..", OutDir: t.TempDir(),
		SampleRegistry: "registry.example/sample", SampleVersions: []string{"v1.0.0", "v1.1.0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.ImportImages(ctx, rn.Containerd, built[0].Tarball); err != nil {
		t.Fatal(err)
	}
	spec := sampleSpec("v1.0.0")
	spec.Workloads = &v1alpha1.NodePlacement{
		NodeSelector: map[string]string{cluster.RealNodeLabel: "true"},
		Tolerations:  []corev1.Toleration{{Key: cluster.RealNodeTaint, Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
	}
	e.create(ctx, t, "sample", spec)
	e.waitDeployed(ctx, t, "sample", "v1.0.0")
	handler := func() *corev1.Pod {
		t.Helper()
		pods, err := e.env.Kube.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=sample-handler"})
		if err != nil {
			t.Fatal(err)
		}
		for i := range pods.Items {
			if pods.Items[i].DeletionTimestamp == nil {
				return &pods.Items[i]
			}
		}
		return nil
	}
	if p := handler(); p == nil || p.Spec.NodeName != rn.Name || !testenv.PodReady(p) {
		t.Fatalf("sample-handler v1.0.0: want one Ready pod on the real node %s, got %v", rn.Name, p)
	}

	e.update(ctx, t, "sample", func(in *v1alpha1.Installation) {
		in.Spec.Version = "v1.1.0"
		in.Spec.CustomizeComponents = &v1alpha1.CustomizeComponents{Patches: []v1alpha1.CustomizePatch{{
			ResourceKind: "DaemonSet", ResourceName: "sample-handler", Type: v1alpha1.StrategicMergePatchType,
			Patch: `{"spec":{"template":{"spec":{"containers":[{"name":"sample-handler","env":[{"name":"SAMPLE_CRASH","value":"true"}]}]}}}}`,
		}}}
	})
	in := e.waitDegraded(ctx, t, "sample", v1alpha1.ReasonCanaryFailed)
	if in.Status.Phase != v1alpha1.PhaseFailed || in.Status.ObservedVersion != "v1.0.0" || in.Status.TargetVersion != "v1.1.0" {
		t.Errorf("after the failed canary: %s", describe(in))
	}
	p := handler()
	if p == nil || p.Spec.NodeName != rn.Name || !strings.HasSuffix(p.Spec.Containers[0].Image, ":v1.1.0") {
		t.Fatalf("the canary pod: want sample-handler v1.1.0 on the real node, got %v", p)
	}
	crashed := false
	for _, c := range p.Status.ContainerStatuses {
		if term := c.LastTerminationState.Terminated; term != nil && term.ExitCode == 1 && c.RestartCount >= 1 {
			crashed = true
		}
	}
	if !crashed {
		t.Errorf("the canary pod did not really crash: %s", testenv.DescribePod(p))
	}
	var d appsv1.Deployment
	e.exists(ctx, t, &d, "sample-api")
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "registry.example/sample/sample-api:v1.0.0" {
		t.Errorf("sample-api runs %s, want v1.0.0 (api is updated last)", img)
	}
}
