package operator

import (
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/dump"
	"github.com/installstrategy/installstrategy/pkg/generate"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

func installation(spec v1alpha1.InstallationSpec) *v1alpha1.Installation {
	return &v1alpha1.Installation{ObjectMeta: metav1.ObjectMeta{Namespace: "sample-system", Name: "sample"}, Spec: spec}
}

func identifier(t *testing.T, in *v1alpha1.Installation) string {
	t.Helper()
	cfg, err := ConfigFor(in, Defaults{})
	if err != nil {
		t.Fatal(err)
	}
	id, err := cfg.Identity(identity.Native)
	if err != nil {
		t.Fatal(err)
	}
	return id.Identifier
}

func TestConfigFor(t *testing.T) {
	in := installation(v1alpha1.InstallationSpec{
		ImagePrefix:      "p-",
		ImagePullPolicy:  corev1.PullAlways,
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "a"}, {Name: "b"}},
		Infra:            &v1alpha1.NodePlacement{NodeSelector: map[string]string{"infra": "yes"}},
		Workloads:        &v1alpha1.NodePlacement{Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}, Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{}}},
	})
	cfg, err := ConfigFor(in, Defaults{Version: "v9.9.9", Registry: "r.example"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Namespace != "sample-system" || cfg.Version != "v9.9.9" || cfg.Registry != "r.example" || cfg.ImagePrefix != "p-" {
		t.Errorf("config %+v", cfg)
	}
	if cfg.AdditionalProperties[generate.ImagePullPolicyProperty] != "Always" || cfg.AdditionalProperties[ImagePullSecretsProperty] != "a,b" {
		t.Errorf("additional properties %v", cfg.AdditionalProperties)
	}
	if cfg.Placement == nil || cfg.Placement.Infra.NodeSelector["infra"] != "yes" || len(cfg.Placement.Workloads.Tolerations) != 1 ||
		cfg.Placement.Workloads.Affinity == nil || cfg.Placement.Workloads.Affinity.PodAntiAffinity == nil || cfg.Placement.Infra.Affinity != nil {
		t.Errorf("placement %+v", cfg.Placement)
	}
	def, err := ConfigFor(installation(v1alpha1.InstallationSpec{}), Defaults{})
	if err != nil {
		t.Fatal(err)
	}
	if def.Version != generate.SampleVersions[len(generate.SampleVersions)-1] || def.Registry != DefaultRegistry || def.AdditionalProperties != nil || def.Placement != nil {
		t.Errorf("defaults %+v", def)
	}
}

// Every field of the spec that changes the manifests changes the
// identifier.
func TestIdentifierChanges(t *testing.T) {
	base := v1alpha1.InstallationSpec{Version: "v1.0.0", Registry: "r.example"}
	baseID := identifier(t, installation(base))
	changes := map[string]func(*v1alpha1.InstallationSpec){
		"version":          func(s *v1alpha1.InstallationSpec) { s.Version = "v1.1.0" },
		"registry":         func(s *v1alpha1.InstallationSpec) { s.Registry = "other.example" },
		"imagePrefix":      func(s *v1alpha1.InstallationSpec) { s.ImagePrefix = "x-" },
		"imagePullPolicy":  func(s *v1alpha1.InstallationSpec) { s.ImagePullPolicy = corev1.PullNever },
		"imagePullSecrets": func(s *v1alpha1.InstallationSpec) { s.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "s"}} },
		"customize": func(s *v1alpha1.InstallationSpec) {
			s.CustomizeComponents = &v1alpha1.CustomizeComponents{Patches: []v1alpha1.CustomizePatch{{ResourceKind: "*", ResourceName: "*", Type: "merge", Patch: "{}"}}}
		},
		"infra": func(s *v1alpha1.InstallationSpec) {
			s.Infra = &v1alpha1.NodePlacement{NodeSelector: map[string]string{"a": "b"}}
		},
		"affinity": func(s *v1alpha1.InstallationSpec) {
			s.Workloads = &v1alpha1.NodePlacement{Affinity: &corev1.Affinity{}}
		},
	}
	for name, change := range changes {
		spec := *base.DeepCopy()
		change(&spec)
		if id := identifier(t, installation(spec)); id == baseID {
			t.Errorf("%s: identifier unchanged", name)
		}
	}
	// Settings that do not change the manifests leave it alone.
	spec := *base.DeepCopy()
	spec.PruneCRDs = true
	spec.UninstallStrategy = v1alpha1.UninstallRemoveWorkloads
	if identifier(t, installation(spec)) != baseID {
		t.Error("pruneCRDs or uninstallStrategy changed the identifier")
	}
}

func TestOwner(t *testing.T) {
	in := &v1alpha1.Installation{}
	in.Namespace, in.Name = "ns", "sample"
	if got := Owner(in); got != (inventory.Owner{Namespace: "ns", Name: "sample", Kind: inventory.KindInstallation}) {
		t.Errorf("Owner = %+v", got)
	}
}

func sampleStrategy(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	s, err := dump.Product(&identity.Config{Namespace: "ns", Registry: "r.example", Version: "v1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	return s.Objects
}

func TestCustomize(t *testing.T) {
	tests := []struct {
		name    string
		patch   v1alpha1.CustomizePatch
		check   func(objs []*unstructured.Unstructured) string
		wantErr string
	}{
		{
			name:  "strategic",
			patch: v1alpha1.CustomizePatch{ResourceKind: "Deployment", ResourceName: "sample-controller", Type: "strategic", Patch: `{"spec":{"template":{"spec":{"containers":[{"name":"sample-controller","args":["--x"]}]}}}}`},
			check: func(objs []*unstructured.Unstructured) string {
				o := find(objs, "Deployment", "sample-controller")
				cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
				c := cs[0].(map[string]any)
				if c["image"] == nil || len(c["args"].([]any)) != 1 {
					return "container not merged by name"
				}
				return ""
			},
		},
		{
			name:  "merge on every kind, YAML",
			patch: v1alpha1.CustomizePatch{ResourceKind: "*", ResourceName: "*", Type: "merge", Patch: "metadata:\n  labels:\n    extra: \"yes\"\n"},
			check: func(objs []*unstructured.Unstructured) string {
				for _, o := range objs {
					if o.GetLabels()["extra"] != "yes" {
						return o.GetKind() + " " + o.GetName() + " not patched"
					}
				}
				return ""
			},
		},
		{
			name:  "json",
			patch: v1alpha1.CustomizePatch{ResourceKind: "ConfigMap", ResourceName: "sample-config", Type: "json", Patch: `[{"op":"add","path":"/data/k","value":"v"}]`},
			check: func(objs []*unstructured.Unstructured) string {
				if v, _, _ := unstructured.NestedString(find(objs, "ConfigMap", "sample-config").Object, "data", "k"); v != "v" {
					return "not patched"
				}
				return ""
			},
		},
		{
			name:    "renaming is refused",
			patch:   v1alpha1.CustomizePatch{ResourceKind: "ConfigMap", ResourceName: "sample-config", Type: "merge", Patch: `{"metadata":{"name":"other"}}`},
			wantErr: "may not change",
		},
		{
			name:    "strategic on a custom kind",
			patch:   v1alpha1.CustomizePatch{ResourceKind: "CustomResourceDefinition", ResourceName: "*", Type: "strategic", Patch: `{}`},
			wantErr: "built-in kind",
		},
		{
			name:    "bad json patch",
			patch:   v1alpha1.CustomizePatch{ResourceKind: "ConfigMap", ResourceName: "sample-config", Type: "json", Patch: `[{"op":"remove","path":"/nope"}]`},
			wantErr: "customize patch 0 (json) of",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := sampleStrategy(t)
			s := strategyOf(objs)
			err := Customize(s, &v1alpha1.CustomizeComponents{Patches: []v1alpha1.CustomizePatch{tt.patch}})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if msg := tt.check(s.Objects); msg != "" {
				t.Error(msg)
			}
		})
	}
}

// Prepare places the pods and adds the pull secrets first, then applies the
// patches, so a patch overrides the placement.
func TestPrepare(t *testing.T) {
	toleration := corev1.Toleration{Key: "k", Operator: corev1.TolerationOpExists}
	in := installation(v1alpha1.InstallationSpec{
		Version:          "v1.0.0",
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "a"}, {Name: "b"}},
		Infra:            &v1alpha1.NodePlacement{NodeSelector: map[string]string{"infra": "yes"}},
		Workloads:        &v1alpha1.NodePlacement{Tolerations: []corev1.Toleration{toleration}},
		CustomizeComponents: &v1alpha1.CustomizeComponents{Patches: []v1alpha1.CustomizePatch{
			{ResourceKind: "Deployment", ResourceName: "sample-api", Type: "strategic", Patch: `{"spec":{"template":{"spec":{"nodeSelector":{"infra":"patched"}}}}}`},
		}},
	})
	s := strategyOf(sampleStrategy(t))
	if err := Prepare(s, in); err != nil {
		t.Fatal(err)
	}
	podSpec := func(kind, name string) *corev1.PodSpec {
		o := find(s.Objects, kind, name)
		m, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
		spec := &corev1.PodSpec{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, spec); err != nil {
			t.Fatal(err)
		}
		return spec
	}
	for _, tc := range []struct {
		kind, name, selector string
		tolerations          int
	}{
		{"Deployment", "sample-api", "patched", 0},
		{"Deployment", "sample-controller", "yes", 0},
		{"DaemonSet", "sample-handler", "", 1},
	} {
		spec := podSpec(tc.kind, tc.name)
		if spec.NodeSelector["infra"] != tc.selector || len(spec.Tolerations) != tc.tolerations {
			t.Errorf("%s: nodeSelector %v tolerations %v, want infra=%q and %d tolerations", tc.name, spec.NodeSelector, spec.Tolerations, tc.selector, tc.tolerations)
		}
		if len(spec.ImagePullSecrets) != 2 || spec.ImagePullSecrets[0].Name != "a" || spec.ImagePullSecrets[1].Name != "b" {
			t.Errorf("%s: imagePullSecrets %v, want a, b", tc.name, spec.ImagePullSecrets)
		}
	}
}

func TestStages(t *testing.T) {
	r := &Reconciler{}
	var names []string
	for _, s := range r.stages() {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, ","); got != "finalizer,active,config,load,claim,apply,gc" {
		t.Errorf("stages %s", got)
	}
	names = nil
	for _, s := range r.deleteStages() {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, ","); got != "deleting,workloads,uninstall,strategies,release" {
		t.Errorf("delete stages %s", got)
	}
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

func strategyOf(objs []*unstructured.Unstructured) *strategy.Strategy {
	return &strategy.Strategy{Objects: objs}
}

func TestEventNoteFitsTheAPILimit(t *testing.T) {
	short := "deleted ConfigMap ns/x"
	if got := eventNote(short); got != short {
		t.Errorf("a short note changed: %q", got)
	}
	long := strings.Repeat("é", 700) // 1400 bytes, 2 per rune
	got := eventNote(long)
	if len(got) > maxEventNote || !utf8.ValidString(got) || !strings.HasSuffix(got, "(truncated)") {
		t.Errorf("eventNote of %d bytes = %d bytes, valid UTF-8 %v, %q…", len(long), len(got), utf8.ValidString(got), got[len(got)-20:])
	}
}
