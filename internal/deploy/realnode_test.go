package deploy_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/images"
	"github.com/installstrategy/installstrategy/internal/localcluster"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
)

// realImage is the operator image the test builds with internal/images
// (as `make images` does) and imports into the real node.
const realImage = "localhost/installstrategy-operator:deploy-test"

// TestDeployOnRealNode builds the operator image without Docker, deploys
// it with `deploy --local-cluster` onto the local cluster's real node and
// checks that the operator really runs there: its pod Running and Ready
// (real probes, read-only root filesystem, restricted security, in-cluster
// configuration with its ServiceAccount's token); it installs the sample
// product, upgrades it through a dump Job whose container (the same image
// with --dump-install-strategy, on the real node) writes the strategy
// itself, and uninstalls it; then undeploy removes it.
func TestDeployOnRealNode(t *testing.T) {
	env := testenv.New(t)
	rn := env.RealNode(t)
	testenv.Lock(t, testenv.SampleProductLock)
	ctx := t.Context()

	start := time.Now()
	built, err := images.Build(ctx, images.Options{Root: "../..", Image: realImage, OutDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := localcluster.ImportImages(ctx, rn.Containerd, built[0].Tarball); err != nil {
		t.Fatal(err)
	}
	t.Logf("image %s built and imported in %s", realImage, time.Since(start).Round(100*time.Millisecond))

	undeployOnFailure(ctx, t)
	stateDir := filepath.Dir(os.Getenv(testenv.KubeconfigEnv))
	out, err := runDeploy(ctx, t, "deploy", "--image", realImage, "--local-cluster", stateDir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "on the local cluster's real node "+rn.Name) {
		t.Fatalf("deploy did not target the real node %s", rn.Name)
	}
	pod := operatorPod(ctx, t, env)
	if pod.Spec.NodeName != rn.Name || !testenv.PodReady(pod) {
		t.Fatalf("operator pod %s: want Running and Ready on the real node %s", testenv.DescribePod(pod), rn.Name)
	}
	c := pod.Spec.Containers[0]
	if sc := c.SecurityContext; c.Image != realImage || sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || c.ReadinessProbe == nil {
		t.Errorf("operator container %s: want image %s, a read-only root filesystem and a readiness probe", c.Name, realImage)
	}

	cl := installationClient(t, env)
	ns := env.Namespace(ctx, t)
	in := createSample(ctx, t, env, cl, ns)
	waitInstallation(ctx, t, cl, in, "v1.0.0", nil)

	testenv.Edit(ctx, t, cl, in.DeepCopy(), func(cur *v1alpha1.Installation) {
		cur.Spec.Version = "v1.1.0"
		cur.Spec.Strategy = &v1alpha1.StrategySource{Image: realImage}
	})
	// The dump pod, seen while the upgrade waits (the operator deletes its
	// Job once the strategy is stored).
	var dumpPod *corev1.Pod
	waitInstallation(ctx, t, cl, in, "v1.1.0", func(ctx context.Context) {
		pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: metakeys.DumpJobLabel})
		if err != nil {
			return
		}
		for i := range pods.Items {
			if p := &pods.Items[i]; p.Spec.NodeName != "" {
				dumpPod = p.DeepCopy()
			}
		}
	})
	if dumpPod == nil {
		t.Fatal("no dump Job pod was seen during the upgrade")
	}
	if dumpPod.Spec.NodeName != rn.Name || dumpPod.Spec.Containers[0].Image != realImage || dumpPod.Labels[testenv.BehaviourLabel] != "" {
		t.Errorf("dump pod %s on %s with image %s and labels %v: want the real node, %s, and no test behaviour",
			dumpPod.Name, dumpPod.Spec.NodeName, dumpPod.Spec.Containers[0].Image, dumpPod.Labels, realImage)
	}

	if err := cl.Delete(ctx, in); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(ctx, t, "sample uninstalled and gone", func(ctx context.Context) (bool, string, error) {
		err := cl.Get(ctx, client.ObjectKeyFromObject(in), &v1alpha1.Installation{})
		return apierrors.IsNotFound(err), "still there", client.IgnoreNotFound(err)
	})
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "sample-api"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("deployment sample-api after the uninstall: %v", err)
	}

	// Everything the operator did, it did as its ServiceAccount, in the
	// pod: its log (read through the real kubelet) has no refusal.
	logs, err := env.Kube.CoreV1().Pods(operatorNamespace).GetLogs(pod.Name, &corev1.PodLogOptions{}).Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(logs)
	_ = logs.Close()
	log := &operatorLog{}
	_, _ = log.Write(data)
	log.failOnForbidden(t)
	if !strings.Contains(string(data), "rollout finished") {
		t.Errorf("the operator pod's log has no finished rollout:\n%s", data)
	}
	// The image holds the chart renderer beside the operator, where the
	// operator finds it (read-only root, user 65532).
	if want := "charts of Helm sources are rendered by " + images.HelmRendererBinary; !strings.Contains(string(data), want) {
		t.Errorf("the operator pod's log lacks %q:\n%s", want, data)
	}

	if _, err := runDeploy(ctx, t, "undeploy"); err != nil {
		t.Fatal(err)
	}
}

// operatorPod returns the deployed operator's one pod.
func operatorPod(ctx context.Context, t *testing.T, env *testenv.Env) *corev1.Pod {
	t.Helper()
	var d appsv1.Deployment
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: operatorName}, &d); err != nil {
		t.Fatal(err)
	}
	pods, err := env.Kube.CoreV1().Pods(operatorNamespace).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(d.Spec.Selector)})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		t.Fatalf("%d operator pods, want 1", len(pods.Items))
	}
	return &pods.Items[0]
}

// waitInstallation waits until in is Deployed at version, calling each
// (when set) on every poll.
func waitInstallation(ctx context.Context, t *testing.T, cl client.Client, in *v1alpha1.Installation, version string, each func(context.Context)) {
	t.Helper()
	testenv.WaitFor(ctx, t, "sample Deployed at "+version+" by the operator pod", func(ctx context.Context) (bool, string, error) {
		if each != nil {
			each(ctx)
		}
		cur := &v1alpha1.Installation{}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(in), cur); err != nil {
			return false, "", err
		}
		return cur.IsDeployed() && cur.Status.ObservedVersion == version, describeInstallation(cur), nil
	})
}
