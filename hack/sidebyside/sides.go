package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

const (
	sideVirtOperator = "virt-operator"
	sideOurs         = "installstrategy"
	sideExample      = "example" // examples/kubevirt-operator

	scenarioInstall = "install"
	scenarioUpgrade = "upgrade"

	crName       = "kubevirt" // both custom resources: kubevirt/kubevirt
	kubevirtReg  = "quay.io/kubevirt"
	ourNamespace = "installstrategy-system" // our operator's Lease and signing key

	voMetricsPort      = 18186
	oursMetricsPort    = 18080
	oursProbePort      = 18081
	exampleMetricsPort = 18082
)

// side is one operator and how it is asked for a KubeVirt version.
type side interface {
	name() string
	// prepare makes what this side needs beside the shared set-up.
	prepare(ctx context.Context, k *kube) error
	process(tag, kubeconfig, logPath string) processSpec
	resource() schema.GroupVersionResource
	// create makes the custom resource that asks for the stored strategy.
	create(ctx context.Context, k *kube, tag string, st storedStrategy) error
	// done says whether the custom resource reports tag fully deployed,
	// and what it reports.
	done(u *unstructured.Unstructured, tag string) (bool, string)
	// beforeStore runs while no operator runs, before the strategy of
	// the upgrade's target is stored; afterStore right after.
	beforeStore(ctx context.Context, k *kube, tag string) error
	afterStore(ctx context.Context, k *kube, tag string, st storedStrategy) error
	// bridgesWebhook: the side's own admission webhook needs the TCP bridge.
	bridgesWebhook() bool
	// playsDump: the harness stores no strategy ConfigMap for this side;
	// it does the work of the side's dump Jobs instead (dumpStandIn).
	playsDump() bool
}

func newSide(c *config, name string) side {
	switch name {
	case sideVirtOperator:
		return &virtOperator{c: c}
	case sideExample:
		return &example{virtOperator{c: c}}
	}
	return &ours{c: c}
}

// conditionStatus is the status of one condition in .status.conditions.
func conditionStatus(u *unstructured.Unstructured, typ string) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}

func describeConditions(u *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var parts []string
	for _, c := range conds {
		m, _ := c.(map[string]any)
		parts = append(parts, fmt.Sprintf("%v=%v %v", m["type"], m["status"], m["reason"]))
	}
	return strings.Join(parts, ", ")
}

// virtOperator is KubeVirt's own operator, out of cluster: cluster-admin
// kubeconfig (no ServiceAccount outside a pod), namespace kubevirt (its
// default without a ServiceAccount namespace file), metrics and probes on
// loopback, its webhook server on :8444 (fixed) behind the bridge.
type virtOperator struct{ c *config }

func (*virtOperator) name() string         { return sideVirtOperator }
func (*virtOperator) bridgesWebhook() bool { return true }
func (*virtOperator) playsDump() bool      { return false }

func (*virtOperator) prepare(context.Context, *kube) error { return nil }

func (v *virtOperator) process(tag, kubeconfig, logPath string) processSpec {
	return processSpec{
		name: "virt-operator " + tag, path: v.c.voBinary(tag), logPath: logPath,
		args: []string{"--kubeconfig", kubeconfig, "--listen", "127.0.0.1", "--port", fmt.Sprint(voMetricsPort)},
		// Its own image names the version it installs (only
		// status.operatorVersion reads the binary's stamp).
		env:       []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "VIRT_OPERATOR_IMAGE=" + kubevirtReg + "/virt-operator:" + tag},
		readyLine: "Started leading", metricsURL: fmt.Sprintf("https://127.0.0.1:%d/metrics", voMetricsPort),
		requestMetric: "kubevirt_rest_client_requests_total", requestLabel: "verb", errorMarker: `"level":"error"`,
	}
}

func (*virtOperator) resource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "kubevirts"}
}

// create makes KubeVirt kubevirt/kubevirt with an empty spec: the
// configuration the stored ConfigMaps were generated for, so virt-operator
// loads them instead of running a dump Job.
func (v *virtOperator) create(ctx context.Context, k *kube, _ string, _ storedStrategy) error {
	return createCR(ctx, k, v.resource(), "KubeVirt", map[string]any{})
}

// createCR creates kubevirt/kubevirt of a kind.
func createCR(ctx context.Context, k *kube, gvr schema.GroupVersionResource, kind string, spec map[string]any) error {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(), "kind": kind,
		"metadata": map[string]any{"name": crName, "namespace": kubevirtNamespace},
		"spec":     spec,
	}}
	_, err := k.dyn.Resource(gvr).Namespace(kubevirtNamespace).Create(ctx, u, metav1.CreateOptions{})
	return err
}

func (*virtOperator) done(u *unstructured.Unstructured, tag string) (bool, string) {
	observed, _, _ := unstructured.NestedString(u.Object, "status", "observedKubeVirtVersion")
	phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	return conditionStatus(u, "Available") == "True" && observed == tag,
		fmt.Sprintf("phase %q, observedKubeVirtVersion %q, %s", phase, observed, describeConditions(u))
}

// beforeStore applies the target's KubeVirt CRD, as its release manifest
// would (the strategy does not hold it). The strategy ConfigMap comes only
// after the old operator stopped: a running virt-operator deletes strategy
// ConfigMaps of other versions.
func (v *virtOperator) beforeStore(ctx context.Context, k *kube, tag string) error {
	return k.applyFile(ctx, v.c.generated(tag, "kv-resource.yaml"))
}

func (*virtOperator) afterStore(context.Context, *kube, string, storedStrategy) error { return nil }

// ours is the installstrategy operator (./cmd/installstrategy-operator),
// out of cluster with the same cluster-admin kubeconfig, flags as in
// config/manager (leader election, metrics, probes; every namespace
// watched), its Lease and key in installstrategy-system.
type ours struct{ c *config }

func (*ours) name() string         { return sideOurs }
func (*ours) bridgesWebhook() bool { return false }
func (*ours) playsDump() bool      { return false }

// prepare installs the Installation CRD and the operator's namespace, as
// make deploy would.
func (o *ours) prepare(ctx context.Context, k *kube) error {
	if err := k.namespace(ctx, ourNamespace, nil); err != nil {
		return err
	}
	return k.applyFile(ctx, filepath.Join("config", "crd", "bases", "installstrategy.io_installations.yaml"))
}

func (o *ours) process(_, kubeconfig, logPath string) processSpec {
	return processSpec{
		name: "installstrategy-operator", path: o.c.operatorBin, logPath: logPath,
		args: append([]string{"--kubeconfig", kubeconfig, "--leader-elect", "--leader-election-namespace", ourNamespace,
			"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", oursMetricsPort), "--metrics-secure=false",
			"--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", oursProbePort)},
			o.c.extraFlags...),
		env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")},
		// Logged once the caches are synced and the lease is held.
		readyLine: "Starting workers", metricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", oursMetricsPort),
		requestMetric: "rest_client_requests_total", requestLabel: "method", errorMarker: `"error"=`,
	}
}

func (*ours) resource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "installstrategy.io", Version: "v1alpha1", Resource: "installations"}
}

// create makes Installation kubevirt/kubevirt naming the stored KubeVirt
// ConfigMap, pinned by the digest of its text (a KubeVirt-form ConfigMap
// carries no signature; docs/SECURITY.md).
func (o *ours) create(ctx context.Context, k *kube, tag string, st storedStrategy) error {
	return createCR(ctx, k, o.resource(), "Installation", map[string]any{
		"version": tag, "registry": kubevirtReg,
		"strategy": map[string]any{"configMap": map[string]any{"name": st.name, "digest": st.digest}},
	})
}

func (*ours) done(u *unstructured.Unstructured, tag string) (bool, string) {
	phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	observed, _, _ := unstructured.NestedString(u.Object, "status", "observedVersion")
	gen, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	return phase == "Deployed" && conditionStatus(u, "Available") == "True" && observed == tag && gen == u.GetGeneration(),
		fmt.Sprintf("phase %q, observedVersion %q, observedGeneration %d of %d, %s", phase, observed, gen, u.GetGeneration(), describeConditions(u))
}

func (*ours) beforeStore(context.Context, *kube, string) error { return nil }

// afterStore points the Installation at the target's ConfigMap while no
// operator runs, so that, as for virt-operator, the new process finds the
// new target when it starts.
func (o *ours) afterStore(ctx context.Context, k *kube, tag string, st storedStrategy) error {
	patch := fmt.Sprintf(`{"spec":{"version":%q,"strategy":{"configMap":{"name":%q,"digest":%q}}}}`, tag, st.name, st.digest)
	_, err := k.dyn.Resource(o.resource()).Namespace(kubevirtNamespace).Patch(ctx, crName, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// example is examples/kubevirt-operator, the SDK (pkg/operator) driving
// KubeVirt's own KubeVirt CR: the same custom resource, CRDs, done
// condition and upgrade steps as virtOperator. Its flags are as shipped
// but for metrics on loopback, --version (the version of a KubeVirt whose
// spec names none: virt-operator's own version, so spec {} asks each
// binary for its release) and --dump-pod-label (see dumpLabels): its
// strategy comes from a dump Job, whose work the harness does
// (dumpStandIn). No webhook server of its own: KubeVirt's
// virt-operator-validator, which the strategy installs, has no backend
// (the harness neither updates nor deletes the CR after creating it).
// Its signing key lives in kubevirt-installstrategy, which it makes.
type example struct{ virtOperator }

func (*example) name() string         { return sideExample }
func (*example) bridgesWebhook() bool { return false }
func (*example) playsDump() bool      { return true }

func (e *example) process(tag, kubeconfig, logPath string) processSpec {
	args := []string{"--kubeconfig", kubeconfig, "--version", tag,
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", exampleMetricsPort)}
	for k, v := range dumpLabels {
		args = append(args, "--dump-pod-label", k+"="+v)
	}
	return processSpec{
		name: "kubevirt-operator (example) " + tag, path: e.c.exampleBin, logPath: logPath,
		args: args,
		env:  []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")},
		// Logged once the caches are synced (no leader election).
		readyLine: "Starting workers", metricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", exampleMetricsPort),
		requestMetric: "rest_client_requests_total", requestLabel: "method", errorMarker: `"error"=`,
	}
}
