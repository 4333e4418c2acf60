//go:build realdump

// This test is not in make test: it needs KubeVirt's own virt-operator
// binaries built from its release tags (about 30 minutes each on 2 cores).
// Run it with make test-real-dump.

package e2e

import (
	"context"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/installstrategy/installstrategy/examples/kubevirt-operator/kubevirt"
	"github.com/installstrategy/installstrategy/internal/images"
	"github.com/installstrategy/installstrategy/internal/localcluster"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/loader"
	"github.com/installstrategy/installstrategy/pkg/operator"
)

// VirtOperatorBinariesEnv names a folder of KubeVirt's virt-operator
// binaries built from its release tags (virt-operator-v1.8.4,
// virt-operator-v1.9.0: ../shared/tools/virtoperator/build.sh).
const VirtOperatorBinariesEnv = "VIRT_OPERATOR_BINARIES"

// TestKubeVirtUpgradeByImageTagOnRealNode is issue 40's upgrade by
// imageTag with the real thing: KubeVirt's own virt-operator, built from
// its release tags and packed as quay.io/kubevirt/virt-operator:TAG the way
// the project packs its images (internal/images), runs as the dump Job's
// container on the real node (--dump-install-strategy, KubeVirt's own
// code writing its KubeVirt-form ConfigMap). The example operator (as
// main.go configures it: ForeignDumps, VIRT_OPERATOR_IMAGE, the dump
// account's cluster rules) adopts what that Job wrote, bound to its run:
// KubeVirt CR → Available at v1.8.4 → imageTag v1.9.0 → the real v1.9.0
// dump → Available at v1.9.0, the CR editable throughout with
// virt-operator's webhooks kept failurePolicy Fail.
func TestKubeVirtUpgradeByImageTagOnRealNode(t *testing.T) {
	testenv.Lock(t, testenv.KubeVirtLock)
	env := testenv.New(t)
	rn := env.RealNode(t)
	dir := os.Getenv(VirtOperatorBinariesEnv)
	if dir == "" {
		msg := VirtOperatorBinariesEnv + " is not set: build KubeVirt's virt-operator v1.8.4 and v1.9.0 with ../shared/tools/virtoperator/build.sh and set it to their folder"
		if testenv.InCI() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	versions := []string{"v1.8.4", "v1.9.0"}
	built, err := images.VirtOperators(images.Options{OutDir: t.TempDir()}, dir, kubevirt.DefaultRegistry)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, b := range built {
		have[b.Ref] = true
		if err := localcluster.ImportImages(ctx, rn.Containerd, b.Tarball); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range versions {
		if !have[kubevirt.DefaultRegistry+"/virt-operator:"+v] {
			t.Fatalf("no virt-operator %s in %s (built: %v)", v, dir, have)
		}
	}

	// Every dump pod as last seen before it is deleted.
	var mu sync.Mutex
	dumpPods := map[string]*corev1.Pod{}
	w, err := env.Kube.CoreV1().Pods("kubevirt").Watch(ctx, metav1.ListOptions{LabelSelector: metakeys.DumpJobLabel})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	go func() {
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Deleted {
				mu.Lock()
				dumpPods[p.Name] = p
				mu.Unlock()
			}
		}
	}()

	// KubeVirt's operator manifest (manifests/generated/
	// kubevirt-priority-class.yaml) creates the PriorityClass its
	// components use; the strategy virt-operator dumps does not contain it.
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt-cluster-critical"}, Value: 1000000000,
		Description: "This priority class should be used for KubeVirt core components only."}
	if _, err := env.Kube.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Kube.SchedulingV1().PriorityClasses().Delete(context.WithoutCancel(ctx), pc.Name, metav1.DeleteOptions{})
	})
	k := startKubeVirtOperator(ctx, t, env, operator.Defaults{}, nil, func(o *operator.Options) {
		o.DumpPodLabels = nil
		o.ForeignDumps, o.DumpImageEnv, o.DumpClusterRules = true, kubevirt.DumpImageEnv, kubevirt.DumpClusterRules
		// The pod reaches the API server through the real node's bridge.
		o.DumpPodEnv = []corev1.EnvVar{{Name: "KUBERNETES_SERVICE_HOST", Value: rn.APIHost}, {Name: "KUBERNETES_SERVICE_PORT", Value: strconv.Itoa(rn.APIPort)}}
		o.DumpPodPlacement = &identity.NodePlacement{
			NodeSelector: map[string]string{metakeys.RealNodeLabel: "true"},
			Tolerations:  []corev1.Toleration{{Key: metakeys.RealNodeTaint, Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		}
	})
	t.Cleanup(func() {
		bg := context.WithoutCancel(ctx)
		name := loader.DefaultServiceAccount + "-kubevirt"
		_ = env.Kube.RbacV1().ClusterRoleBindings().Delete(bg, name, metav1.DeleteOptions{})
		_ = env.Kube.RbacV1().ClusterRoles().Delete(bg, name, metav1.DeleteOptions{})
	})
	k.create(ctx, t, map[string]any{"imageTag": versions[0]})
	for i, version := range versions {
		if i > 0 {
			k.setImageTag(ctx, t, version)
		}
		start := time.Now()
		st := k.waitVersion(ctx, t, version)
		t.Logf("%s Available %s after the imageTag", version, time.Since(start).Round(100*time.Millisecond))
		checkKubeVirtStatus(t, version, st)

		// virt-operator's own dump of the version ran on the real node;
		// the operator stored what it wrote signed, under the same
		// identifier (the unsigned original is garbage once the signed
		// copy is in use).
		image := kubevirt.DefaultRegistry + "/virt-operator:" + version
		var ran *corev1.Pod
		mu.Lock()
		for _, p := range dumpPods {
			if p.Spec.Containers[0].Image == image && p.Status.Phase == corev1.PodSucceeded {
				ran = p
			}
		}
		mu.Unlock()
		if ran == nil {
			t.Fatalf("%s: no succeeded dump pod of %s was seen", version, image)
		}
		term := ran.Status.ContainerStatuses[0].State.Terminated
		if ran.Spec.NodeName != rn.Name || term == nil || term.ExitCode != 0 || term.ContainerID == "" {
			t.Errorf("%s: dump pod %s: want a real container run to exit 0 on %s", version, testenv.DescribePod(ran), rn.Name)
		}
		id, _ := st["targetDeploymentID"].(string)
		stored := 0
		all, err := env.Kube.CoreV1().ConfigMaps("kubevirt").List(ctx, metav1.ListOptions{LabelSelector: metakeys.StrategyLabel})
		if err != nil {
			t.Fatal(err)
		}
		for _, cm := range all.Items {
			if info := codec.DescribeConfigMap(&cm); info.Identity.Identifier == id && info.Signature != "" {
				stored++
			}
		}
		d, err := env.Kube.AppsV1().Deployments("kubevirt").Get(ctx, "virt-api", metav1.GetOptions{})
		if err != nil || !strings.HasSuffix(d.Spec.Template.Spec.Containers[0].Image, ":"+version) {
			t.Errorf("%s: virt-api from the dumped strategy: %v, %v", version, d, err)
		}
		if stored != 1 {
			t.Errorf("%s: %d signed strategies for %s; want the one adopted from virt-operator's dump", version, stored, id)
		}
	}
}
