package kubevirt

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/kubevirtdata"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
)

func kv(spec map[string]any) *unstructured.Unstructured {
	u := Resource{}.New().(*unstructured.Unstructured)
	u.SetNamespace("kubevirt")
	u.SetName("kubevirt")
	u.SetUID("u1")
	u.Object["spec"] = spec
	return u
}

// The deployment ID of a KubeVirt whose spec is empty is virt-operator's
// (the identifiers of the stored strategies in testdata).
func TestDeploymentIDIsVirtOperators(t *testing.T) {
	for _, version := range []string{"v1.8.4", "v1.9.0"} {
		dir := kubevirtdata.Dir(t)
		want, err := os.ReadFile(filepath.Join(dir, "kubevirt-"+version+".id"))
		if err != nil {
			t.Fatal(err)
		}
		r := Resource{}
		in, err := r.View(kv(map[string]any{"imageTag": version}))
		if err != nil {
			t.Fatal(err)
		}
		cfg, alg, err := r.Config(in, r.Defaults)
		if err != nil {
			t.Fatal(err)
		}
		id, err := cfg.Identity(alg)
		if err != nil {
			t.Fatal(err)
		}
		if id.Identifier != strings.TrimSpace(string(want)) {
			t.Errorf("%s: deployment ID %s, virt-operator's is %s", version, id.Identifier, want)
		}
		if got := in.Spec.Strategy.Image; got != "quay.io/kubevirt/virt-operator:"+version {
			t.Errorf("%s: strategy image %s", version, got)
		}
		// A spec field virt-operator hashes changes it.
		in2, _ := r.View(kv(map[string]any{"imageTag": version, "imagePullPolicy": "Always"}))
		cfg2, _, _ := r.Config(in2, r.Defaults)
		if id2, _ := cfg2.Identity(alg); id2.Identifier == id.Identifier {
			t.Errorf("%s: imagePullPolicy does not change the deployment ID", version)
		}
	}
}

// The spec fields that change the strategy reach the view.
func TestViewMapsTheSpec(t *testing.T) {
	in, err := Resource{}.View(kv(map[string]any{
		"imageTag": "v1.9.0", "imageRegistry": "r.example/kv", "imagePullPolicy": "IfNotPresent",
		"imagePullSecrets":  []any{map[string]any{"name": "pull"}},
		"infra":             map[string]any{"nodePlacement": map[string]any{"nodeSelector": map[string]any{"infra": "yes"}}},
		"workloads":         map[string]any{"nodePlacement": map[string]any{"tolerations": []any{map[string]any{"key": "k", "operator": "Exists"}}}},
		"uninstallStrategy": "RemoveWorkloads",
		"customizeComponents": map[string]any{"patches": []any{map[string]any{
			"resourceName": "virt-api", "resourceType": "Deployment", "type": "strategic", "patch": `{"spec":{"replicas":3}}`}}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	s := in.Spec
	if s.Version != "v1.9.0" || s.Registry != "r.example/kv" || s.ImagePullPolicy != "IfNotPresent" || len(s.ImagePullSecrets) != 1 ||
		s.Infra.NodeSelector["infra"] != "yes" || len(s.Workloads.Tolerations) != 1 || s.UninstallStrategy != v1alpha1.UninstallRemoveWorkloads ||
		s.CustomizeComponents.Patches[0].ResourceKind != "Deployment" || s.Strategy.Image != "r.example/kv/virt-operator:v1.9.0" ||
		!s.PruneCRDs || !s.Adopt {
		t.Errorf("view spec %+v", s)
	}
	if in.Name != "kubevirt" || in.Namespace != "kubevirt" || in.UID != "u1" {
		t.Errorf("view metadata %+v", in.ObjectMeta)
	}
	u := kv(map[string]any{"imageTag": "v1.9.0"})
	u.SetAnnotations(map[string]string{metakeys.StrategyConfigMapAnnotation: "kubevirt-install-strategy-abcde", metakeys.StrategyDigestAnnotation: "sha256:0123"})
	if in, err := (Resource{}).View(u); err != nil || in.Spec.Strategy.Image != "" ||
		*in.Spec.Strategy.ConfigMap != (v1alpha1.ConfigMapStrategySource{Name: "kubevirt-install-strategy-abcde", Digest: "sha256:0123"}) {
		t.Errorf("annotated view: %+v, %v", in.Spec.Strategy, err)
	}
	if s.CRDSafety != nil {
		t.Errorf("a CR without the annotation allows CRD changes: %+v", s.CRDSafety)
	}
	u = kv(map[string]any{"imageTag": "v1.9.0"})
	u.SetAnnotations(map[string]string{metakeys.AllowCRDChangeAnnotation: "a.example.com=crdPruned, b.example.com=fieldRemoved"})
	want := []v1alpha1.CRDChangeAllowance{{CRD: "a.example.com", Rule: "crdPruned"}, {CRD: "b.example.com", Rule: "fieldRemoved"}}
	if in, err := (Resource{}).View(u); err != nil || in.Spec.CRDSafety == nil || !reflect.DeepEqual(in.Spec.CRDSafety.Allow, want) {
		t.Errorf("allow annotation: %+v, %v; want %v", in.Spec.CRDSafety, err, want)
	}
	for _, bad := range []string{"a.example.com=bogus", "a.example.com", strings.Repeat("a=scope,", 64) + "a=scope"} {
		u.SetAnnotations(map[string]string{metakeys.AllowCRDChangeAnnotation: bad})
		if _, err := (Resource{}).View(u); err == nil || !strings.Contains(err.Error(), metakeys.AllowCRDChangeAnnotation) {
			t.Errorf("allow annotation %.40q: %v, want an error naming the annotation", bad, err)
		}
	}
	if _, err := (Resource{}).View(kv(map[string]any{"imagePullSecrets": "not a list"})); err == nil {
		t.Error("a spec of the wrong shape was viewed")
	}
}

// SetStatus writes virt-operator's fields, keeps the ones it does not
// own, and View reads them back.
func TestStatusRoundTrip(t *testing.T) {
	r := Resource{}
	u := kv(map[string]any{"imageTag": "v1.9.0"})
	u.Object["status"] = map[string]any{"operatorVersion": "v1.9.0", "phase": "Deploying"}
	in, err := r.View(u)
	if err != nil {
		t.Fatal(err)
	}
	in.Status.Phase = v1alpha1.PhaseDeployed
	cfg, alg, _ := r.Config(in, r.Defaults)
	id, _ := cfg.Identity(alg)
	in.Status.ObservedVersion, in.Status.ObservedRegistry, in.Status.ObservedIdentifier = "v1.9.0", "quay.io/kubevirt", id.Identifier
	in.Status.TargetVersion, in.Status.TargetRegistry, in.Status.TargetIdentifier = "v1.9.0", "quay.io/kubevirt", id.Identifier
	in.SetCondition(v1alpha1.ConditionAvailable, metav1.ConditionTrue, v1alpha1.ReasonAllComponentsReady, "All components are ready.")
	if err := r.SetStatus(u, in); err != nil {
		t.Fatal(err)
	}
	st := u.Object["status"].(map[string]any)
	if st["operatorVersion"] != "v1.9.0" || st["phase"] != "Deployed" || st["observedDeploymentID"] != id.Identifier || st["observedKubeVirtVersion"] != "v1.9.0" {
		t.Errorf("status %v", st)
	}
	var dc map[string]any
	if err := json.Unmarshal([]byte(st["observedDeploymentConfig"].(string)), &dc); err != nil || dc["id"] != id.Identifier || dc["virtOperatorImage"] != "quay.io/kubevirt/virt-operator:v1.9.0" {
		t.Errorf("observedDeploymentConfig %v (%v)", st["observedDeploymentConfig"], err)
	}
	c := st["conditions"].([]any)[0].(map[string]any)
	if c["type"] != "Available" || c["status"] != "True" || c["lastProbeTime"] == nil {
		t.Errorf("condition %v", c)
	}
	back, err := r.View(u)
	if err != nil {
		t.Fatal(err)
	}
	if back.Status.Phase != v1alpha1.PhaseDeployed || back.Status.ObservedIdentifier != id.Identifier || !back.IsConditionTrue(v1alpha1.ConditionAvailable) {
		t.Errorf("read back %+v", back.Status)
	}
	// Failed is not a KubeVirt phase: virt-operator stays Deploying.
	back.Status.Phase = v1alpha1.PhaseFailed
	if err := r.SetStatus(u, back); err != nil || u.Object["status"].(map[string]any)["phase"] != "Deploying" {
		t.Errorf("phase Failed written as %v (%v)", u.Object["status"].(map[string]any)["phase"], err)
	}
}
