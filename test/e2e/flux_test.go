package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/internal/testtier"
	"github.com/installstrategy/installstrategy/pkg/operator"
)

// fluxDirEnv names the folder of hack/flux.sh's build: Flux's
// source-controller and kustomize-controller, built from their source at
// the versions pinned in hack/flux, and their CRDs (crds/). make test sets
// it; without it the test asks hack/flux.sh where the build of the current
// pins is (it builds nothing).
const fluxDirEnv = "FLUX_DIR"

// The resources of the Flux objects the test drives.
var (
	ociRepositories = schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "ocirepositories"}
	kustomizations  = schema.GroupVersionResource{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Resource: "kustomizations"}
)

// fluxDir returns the folder of the Flux controllers; like testenv.New it
// fails under CI and skips otherwise when they are missing.
func fluxDir(t *testing.T) string {
	t.Helper()
	testtier.Heavy(t)
	dir := os.Getenv(fluxDirEnv)
	if dir == "" {
		out, err := exec.Command("../../hack/flux.sh", "dir").Output()
		if err != nil {
			t.Fatalf("hack/flux.sh dir: %v", err)
		}
		dir = strings.TrimSpace(string(out))
	}
	for _, f := range []string{".stamp", "source-controller", "kustomize-controller", "crds"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			msg := fmt.Sprintf("Flux controllers unavailable: %v\n"+
				"build them with `make flux-tools` (hack/flux.sh build; minutes the first time, cached after), or run `make test`", err)
			if testenv.InCI() {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
	return dir
}

// installFluxCRDs installs (or updates) the CRDs of the controllers'
// modules, as hack/flux.sh copied them.
func (e *e2e) installFluxCRDs(ctx context.Context, t *testing.T, dir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in %s/crds: %v", dir, err)
	}
	for _, f := range files {
		e.env.InstallCRDFile(ctx, t, f)
	}
}

// startFlux runs source-controller and kustomize-controller as processes
// against the local cluster, watching ns only, leader election off, their
// metrics, health and artifact endpoints on free loopback ports. They are
// killed when the test ends; a failed test logs the end of their logs.
func startFlux(t *testing.T, dir, ns string) (source, kustomize *operatorProcess) {
	t.Helper()
	run := func(name string, extra ...string) *operatorProcess {
		p := &operatorProcess{t: t, name: name, logPath: filepath.Join(t.TempDir(), name+".log"),
			metrics: "127.0.0.1:" + strconv.Itoa(freePort(t)),
			env:     []string{"KUBECONFIG=" + os.Getenv(testenv.KubeconfigEnv), "RUNTIME_NAMESPACE=" + ns}}
		p.args = append([]string{filepath.Join(dir, name),
			"--enable-leader-election=false",
			"--watch-all-namespaces=false",
			"--metrics-addr=" + p.metrics,
			"--health-addr=127.0.0.1:" + strconv.Itoa(freePort(t)),
		}, extra...)
		t.Cleanup(func() {
			p.kill()
			if t.Failed() {
				p.dumpLog(6000)
			}
		})
		p.start()
		return p
	}
	storage := "127.0.0.1:" + strconv.Itoa(freePort(t))
	source = run("source-controller", "--storage-path="+t.TempDir(), "--storage-addr="+storage, "--storage-adv-addr="+storage)
	kustomize = run("kustomize-controller")
	for _, c := range []string{"source-controller", "kustomize-controller"} {
		v, _ := os.ReadFile(filepath.Join(dir, c+".version"))
		t.Logf("%s %s running", c, strings.TrimSpace(string(v)))
	}
	return source, kustomize
}

// installationDoc is an Installation as a user writes it into a GitOps
// repository (no namespace: the Kustomization's targetNamespace sets it).
func installationDoc(t *testing.T, name string, spec v1alpha1.InstallationSpec) []byte {
	t.Helper()
	in := &v1alpha1.Installation{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Installation"},
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(in)
	if err != nil {
		t.Fatal(err)
	}
	delete(m, "status")
	unstructured.RemoveNestedField(m, "metadata", "creationTimestamp")
	b, err := sigsyaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pushFluxArtifact pushes files as `flux push artifact` does (one
// tar+gzip layer of Flux's content media type, Flux's config media type,
// an OCI manifest) to ref (HOST:PORT/path:tag), and returns the revision
// source-controller will report for it (tag@digest).
func pushFluxArtifact(ctx context.Context, t *testing.T, ref string, files map[string][]byte) string {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(files[n]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, static.NewLayer(buf.Bytes(), "application/vnd.cncf.flux.content.v1.tar+gzip"))
	if err != nil {
		t.Fatal(err)
	}
	img = mutate.ConfigMediaType(mutate.MediaType(img, types.OCIManifestSchema1), "application/vnd.cncf.flux.config.v1+json")
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img, remote.WithContext(ctx)); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return r.Identifier() + "@" + d.String()
}

// fluxObject is an unstructured object of a Flux kind in ns.
func fluxObject(gvr schema.GroupVersionResource, kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(), "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     spec,
	}}
}

// kustomizationState is what a Flux user reads of a Kustomization: its
// Ready condition and the revisions it attempted and applied.
type kustomizationState struct {
	ready, reason, message string
	attempted, applied     string
}

func (k kustomizationState) String() string {
	return fmt.Sprintf("Ready=%s/%s (%s), lastAttemptedRevision %q, lastAppliedRevision %q", k.ready, k.reason, k.message, k.attempted, k.applied)
}

func readKustomization(ctx context.Context, t *testing.T, r dynamic.ResourceInterface, name string) kustomizationState {
	t.Helper()
	u, err := r.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var k kustomizationState
	k.attempted, _, _ = unstructured.NestedString(u.Object, "status", "lastAttemptedRevision")
	k.applied, _, _ = unstructured.NestedString(u.Object, "status", "lastAppliedRevision")
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
			k.ready, _ = m["status"].(string)
			k.reason, _ = m["reason"].(string)
			k.message, _ = m["message"].(string)
		}
	}
	return k
}

// Real Flux controllers (source-controller and kustomize-controller, built
// from their source by hack/flux.sh) apply an Installation from an
// OCIRepository on a loopback registry with a Kustomization that waits
// (wait: true, kstatus on everything it applied). The Kustomization is
// Ready only once the product is rolled over, on the install and on an
// upgrade, and reports the product's failure when it fails: a Deployment
// that never becomes available (the progress deadline exceeded) and an
// upgrade to an unsigned strategy (refused) each make the Installation
// Stalled, and the Kustomization Ready=False HealthCheckFailed naming the
// Installation, at once rather than at its timeout.
func TestFluxKustomizationWaitsForTheInstallation(t *testing.T) {
	dir := fluxDir(t)
	e := setup(t, withOptions(func(o *operator.Options) { o.StageDeadline = 10 * time.Second }))
	ctx := t.Context()
	e.installFluxCRDs(ctx, t, dir)
	reg, c, release := e.ociSetup(ctx, t)
	// The product's strategies, in the same registry: v1.0.0 and v1.1.0
	// signed by the release key the operator trusts, v1.1.0 also unsigned.
	publishSample(ctx, t, c, e.ns, "sample", "v1.0.0", release, reg.Ref("acme/sample:v1.0.0"))
	publishSample(ctx, t, c, e.ns, "sample", "v1.1.0", release, reg.Ref("acme/sample:v1.1.0"))
	publishSample(ctx, t, c, e.ns, "sample", "v1.1.0", nil, reg.Ref("acme/unsigned:v1.1.0"))
	source, kustomize := startFlux(t, dir, e.ns)

	// What the GitOps repository holds: the Installation, pushed as a
	// Flux artifact to acme/deploy:live.
	deploy := reg.Host() + "/acme/deploy:live"
	publish := func(strategyRef string, patches ...v1alpha1.CustomizePatch) string {
		t.Helper()
		spec := sampleSpec("")
		spec.Strategy = &v1alpha1.StrategySource{OCI: &v1alpha1.OCIStrategySource{Reference: strategyRef}}
		if len(patches) > 0 {
			spec.CustomizeComponents = &v1alpha1.CustomizeComponents{Patches: patches}
		}
		return pushFluxArtifact(ctx, t, deploy, map[string][]byte{
			"kustomization.yaml": []byte("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- installation.yaml\n"),
			"installation.yaml":  installationDoc(t, "sample", spec),
		})
	}
	neverReady := v1alpha1.CustomizePatch{ResourceKind: "Deployment", ResourceName: "sample-controller", Type: v1alpha1.StrategicMergePatchType,
		Patch: `{"spec":{"template":{"metadata":{"labels":{"` + testenv.BehaviourLabel + `":"` + string(testenv.BehaviourNeverReady) + `"}}}}}`}

	repos := e.env.Dynamic.Resource(ociRepositories).Namespace(e.ns)
	ks := e.env.Dynamic.Resource(kustomizations).Namespace(e.ns)
	// Removed while the controllers run (cleanups run last in, first
	// out), so that their finalizers go; the Installation is orphaned and
	// removed by the e2e cleanup as every other.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), time.Minute)
		defer cancel()
		for _, r := range []struct {
			c    dynamic.ResourceInterface
			name string
		}{{ks, "product"}, {repos, "product"}} {
			if err := r.c.Delete(ctx, r.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("cleanup: %v", err)
			}
			if err := testenv.Poll(ctx, r.name+" removed", func(ctx context.Context) (bool, string, error) {
				_, err := r.c.Get(ctx, r.name, metav1.GetOptions{})
				return apierrors.IsNotFound(err), fmt.Sprint(err), nil
			}); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})

	// 1. A product that fails: sample-controller never becomes available.
	rev := publish(reg.Ref("acme/sample:v1.0.0"), neverReady)
	if _, err := repos.Create(ctx, fluxObject(ociRepositories, "OCIRepository", e.ns, "product", map[string]any{
		"interval": "2s", "url": "oci://" + strings.TrimSuffix(deploy, ":live"), "ref": map[string]any{"tag": "live"}, "insecure": true,
	}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ks.Create(ctx, fluxObject(kustomizations, "Kustomization", e.ns, "product", map[string]any{
		"interval": "10m", "retryInterval": "2s", "timeout": "3m", "path": "./", "prune": true, "wait": true,
		"deletionPolicy": "Orphan", "targetNamespace": e.ns,
		"sourceRef": map[string]any{"kind": "OCIRepository", "name": "product"},
	}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// watch follows the Kustomization until done says so, failing the
	// test whenever it is Ready for a revision while the Installation is
	// not rolled over at version (kstatus Current and
	// assertCurrentMeansRolledOver), and reports whether it was seen
	// waiting: revision attempted, not Ready, the Installation
	// Reconciling.
	watch := func(what, revision, version string, done func(kustomizationState, *v1alpha1.Installation) bool) (kustomizationState, *v1alpha1.Installation, bool) {
		t.Helper()
		var (
			k       kustomizationState
			in      *v1alpha1.Installation
			waiting bool
		)
		testenv.WaitFor(ctx, t, what, func(ctx context.Context) (bool, string, error) {
			source.mustRun()
			kustomize.mustRun()
			k = readKustomization(ctx, t, ks, "product")
			in = &v1alpha1.Installation{}
			var res *kstatus.Result
			if ok := e.exists(ctx, t, in, "sample"); ok {
				res, in = e.kstatusOf(ctx, t, "sample")
			} else {
				in = nil
			}
			if k.ready == string(metav1.ConditionTrue) && k.applied == revision {
				if in == nil {
					t.Fatalf("Kustomization Ready for %s without the Installation: %s", revision, k)
				}
				if res.Status != kstatus.CurrentStatus {
					t.Fatalf("Kustomization Ready for %s while kstatus of the Installation is %s (%s): %s; %s", revision, res.Status, res.Message, k, describe(in))
				}
				assertCurrentMeansRolledOver(t, res, in, version)
			}
			if in != nil && k.attempted == revision && k.ready != string(metav1.ConditionTrue) {
				if r := in.Condition(v1alpha1.ConditionReconciling); r != nil && r.Status == metav1.ConditionTrue {
					waiting = true
				}
			}
			state := k.String()
			if in != nil {
				state += "; Installation " + describe(in)
			}
			return done(k, in), state, nil
		})
		return k, in, waiting
	}
	failedFor := func(revision string) func(kustomizationState, *v1alpha1.Installation) bool {
		return func(k kustomizationState, in *v1alpha1.Installation) bool {
			if k.ready == string(metav1.ConditionTrue) && k.attempted == revision {
				t.Fatalf("Kustomization Ready for %s, whose product fails: %s; %s", revision, k, describe(in))
			}
			return k.attempted == revision && k.ready == string(metav1.ConditionFalse) && k.reason == "HealthCheckFailed"
		}
	}
	stalledMessage := "Installation/" + e.ns + "/sample status: 'Failed'"
	k, in, waiting := watch("the Kustomization fails its health check", rev, "v1.0.0", failedFor(rev))
	if !waiting {
		t.Errorf("never saw the Kustomization waiting (not Ready) while the Installation was Reconciling")
	}
	if !strings.Contains(k.message, stalledMessage) {
		t.Errorf("Kustomization message %q does not name the failed Installation (%q)", k.message, stalledMessage)
	}
	assertCondition(t, in, v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonDeploymentFailed)
	if msg := in.Condition(v1alpha1.ConditionStalled).Message; !strings.Contains(msg, "sample-controller") {
		t.Errorf("Stalled message %q does not name sample-controller", msg)
	}
	t.Logf("failed product: %s", k)

	// 2. The fix: Ready once v1.0.0 is rolled over, not before.
	rev = publish(reg.Ref("acme/sample:v1.0.0"))
	k, in, _ = watch("the Kustomization Ready for the fixed product", rev, "v1.0.0", func(k kustomizationState, _ *v1alpha1.Installation) bool {
		return k.ready == string(metav1.ConditionTrue) && k.applied == rev
	})
	assertCondition(t, in, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllComponentsReady)
	t.Logf("installed: %s", k)

	// 3. An upgrade to a strategy the operator refuses (unsigned): the
	// Installation Stalled, the Kustomization not Ready, v1.0.0 runs on.
	rev = publish(reg.Ref("acme/unsigned:v1.1.0"))
	k, in, _ = watch("the Kustomization fails on the refused upgrade", rev, "v1.0.0", failedFor(rev))
	if !strings.Contains(k.message, stalledMessage) {
		t.Errorf("Kustomization message %q does not name the refused Installation (%q)", k.message, stalledMessage)
	}
	assertCondition(t, in, v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonUntrustedStrategy)
	if in.Status.ObservedVersion != "v1.0.0" {
		t.Errorf("the refused upgrade changed what runs: %s", describe(in))
	}
	t.Logf("refused upgrade: %s", k)

	// 4. The signed upgrade: not Ready while v1.1.0 rolls out, Ready once
	// it is rolled over.
	rev = publish(reg.Ref("acme/sample:v1.1.0"))
	k, in, waiting = watch("the Kustomization Ready for the upgrade", rev, "v1.1.0", func(k kustomizationState, _ *v1alpha1.Installation) bool {
		return k.ready == string(metav1.ConditionTrue) && k.applied == rev
	})
	if !waiting {
		t.Errorf("never saw the Kustomization waiting (not Ready) while v1.1.0 rolled out")
	}
	if in.Status.ObservedVersion != "v1.1.0" {
		t.Errorf("Kustomization Ready, Installation not at v1.1.0: %s", describe(in))
	}
	t.Logf("upgraded: %s", k)
}
