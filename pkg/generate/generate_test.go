package generate_test

import (
	"bytes"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/installstrategy/installstrategy/pkg/generate"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

func sampleConfig(version string) *identity.Config {
	return &identity.Config{Namespace: "sample-system", Registry: "registry.example/sample", Version: version}
}

func mustSample(t *testing.T, cfg *identity.Config) *strategy.Strategy {
	t.Helper()
	s, err := generate.Sample(cfg, generate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func refs(s *strategy.Strategy) map[string]*unstructured.Unstructured {
	out := map[string]*unstructured.Unstructured{}
	for _, o := range s.Objects {
		out[strategy.RefOf(o).String()] = o
	}
	return out
}

// TestSampleVersionsDiffer pins what changes between sample versions: the
// upgrade tests rely on these differences.
func TestSampleVersionsDiffer(t *testing.T) {
	tests := []struct {
		from, to       string
		added, removed []string
		changed        []string // besides every workload (images change with the version)
	}{
		{
			from: "v1.0.0", to: "v1.1.0",
			added:   []string{"Service/sample-system/sample-controller-metrics"},
			removed: []string{"ConfigMap/sample-system/sample-legacy-settings"},
			changed: []string{"CustomResourceDefinition.apiextensions.k8s.io/widgets.sample.installstrategy.io", "ConfigMap/sample-system/sample-config"},
		},
		{
			from: "v1.1.0", to: "v1.2.0",
			changed: []string{"CustomResourceDefinition.apiextensions.k8s.io/gadgets.sample.installstrategy.io"},
		},
	}
	workloads := []string{"Deployment.apps/sample-system/sample-api", "Deployment.apps/sample-system/sample-controller", "DaemonSet.apps/sample-system/sample-handler"}
	for _, tt := range tests {
		t.Run(tt.from+"->"+tt.to, func(t *testing.T) {
			a, b := refs(mustSample(t, sampleConfig(tt.from))), refs(mustSample(t, sampleConfig(tt.to)))
			var added, removed, changed []string
			for k, o := range b {
				old, ok := a[k]
				if !ok {
					added = append(added, k)
					continue
				}
				x, _ := strategy.MarshalObject(old)
				y, _ := strategy.MarshalObject(o)
				if !bytes.Equal(x, y) {
					changed = append(changed, k)
				}
			}
			for k := range a {
				if _, ok := b[k]; !ok {
					removed = append(removed, k)
				}
			}
			check := func(what string, got, want []string) {
				t.Helper()
				slices.Sort(got)
				want = slices.Sorted(slices.Values(want))
				if !slices.Equal(got, want) {
					t.Errorf("%s = %q, want %q", what, got, want)
				}
			}
			check("added", added, tt.added)
			check("removed", removed, tt.removed)
			check("changed", changed, append(slices.Clone(workloads), tt.changed...))
		})
	}
}

func crdVersions(t *testing.T, s *strategy.Strategy, name string) []string {
	t.Helper()
	o := refs(s)["CustomResourceDefinition.apiextensions.k8s.io/"+name]
	if o == nil {
		t.Fatalf("no CRD %s", name)
	}
	vs, _, _ := unstructured.NestedSlice(o.Object, "spec", "versions")
	var out []string
	for _, v := range vs {
		m := v.(map[string]any)
		name := m["name"].(string)
		if m["storage"] == true {
			name += "*"
		}
		out = append(out, name)
	}
	return out
}

func TestSampleCRDVersions(t *testing.T) {
	tests := []struct {
		version        string
		widget, gadget []string
	}{
		{"v1.0.0", []string{"v1alpha1*"}, []string{"v1alpha1*"}},
		{"v1.1.0", []string{"v1alpha1", "v1beta1*"}, []string{"v1alpha1*"}},
		{"v1.2.0", []string{"v1alpha1", "v1beta1*"}, []string{"v1alpha1*", "v1beta1"}},
		{"v2.0.0-rc.1", []string{"v1alpha1", "v1beta1*"}, []string{"v1alpha1*", "v1beta1"}},
	}
	for _, tt := range tests {
		s := mustSample(t, sampleConfig(tt.version))
		if got := crdVersions(t, s, "widgets.sample.installstrategy.io"); !slices.Equal(got, tt.widget) {
			t.Errorf("%s widget versions = %q, want %q", tt.version, got, tt.widget)
		}
		if got := crdVersions(t, s, "gadgets.sample.installstrategy.io"); !slices.Equal(got, tt.gadget) {
			t.Errorf("%s gadget versions = %q, want %q", tt.version, got, tt.gadget)
		}
	}
}

func TestSampleBadVersion(t *testing.T) {
	for _, v := range []string{"", "latest", "v0.9.0", "1.0.0"} {
		if _, err := generate.Sample(sampleConfig(v), generate.Options{}); err == nil {
			t.Errorf("Sample(%q) succeeded", v)
		}
	}
}

func fromUnstructured(m map[string]any, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(m, into)
}

func podSpec(t *testing.T, o *unstructured.Unstructured) *corev1.PodSpec {
	t.Helper()
	m, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
	spec := &corev1.PodSpec{}
	if err := fromUnstructured(m, spec); err != nil {
		t.Fatal(err)
	}
	return spec
}

// TestSampleWorkloads checks roles, images, pull policy, passthrough env and
// the restricted security context of every workload, and that the builder
// leaves placement to pkg/placement (the pods are not placed, whatever the
// configuration's Placement says).
func TestSampleWorkloads(t *testing.T) {
	cfg := sampleConfig("v1.1.0")
	cfg.ImagePrefix = "pre-"
	cfg.ComponentImages = map[string]string{"sample-handler": "other.example/handler@sha256:abc"}
	cfg.AdditionalProperties = map[string]string{generate.ImagePullPolicyProperty: "Always"}
	cfg.PassthroughEnvVars = map[string]string{"B": "2", "A": "1"}
	infra := corev1.Toleration{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	cfg.Placement = &identity.Placement{
		Infra:     &identity.NodePlacement{NodeSelector: map[string]string{"node-role.kubernetes.io/control-plane": ""}, Tolerations: []corev1.Toleration{infra}},
		Workloads: &identity.NodePlacement{NodeSelector: map[string]string{"sample/handler": "true"}},
	}
	s := mustSample(t, cfg)
	tests := []struct {
		ref   string
		role  generate.Role
		image string
	}{
		{"Deployment.apps/sample-system/sample-api", generate.RoleAPI, "registry.example/sample/pre-sample-api:v1.1.0"},
		{"Deployment.apps/sample-system/sample-controller", generate.RoleController, "registry.example/sample/pre-sample-controller:v1.1.0"},
		{"DaemonSet.apps/sample-system/sample-handler", generate.RoleHandler, "other.example/handler@sha256:abc"},
	}
	all := refs(s)
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			o := all[tt.ref]
			if o == nil {
				t.Fatal("missing")
			}
			if got := o.GetAnnotations()[metakeys.RoleAnnotation]; got != string(tt.role) {
				t.Errorf("role annotation = %q, want %q", got, tt.role)
			}
			spec := podSpec(t, o)
			c := spec.Containers[0]
			if c.Image != tt.image {
				t.Errorf("image = %q, want %q", c.Image, tt.image)
			}
			if c.ImagePullPolicy != corev1.PullAlways {
				t.Errorf("pull policy = %q", c.ImagePullPolicy)
			}
			if len(spec.NodeSelector) != 0 || len(spec.Tolerations) != 0 || spec.Affinity != nil {
				t.Errorf("the builder placed the pods: node selector %v, tolerations %v, affinity %v", spec.NodeSelector, spec.Tolerations, spec.Affinity)
			}
			n := len(c.Env)
			if n < 2 || c.Env[n-2] != (corev1.EnvVar{Name: "A", Value: "1"}) || c.Env[n-1] != (corev1.EnvVar{Name: "B", Value: "2"}) {
				t.Errorf("env = %v, want the passthrough variables last, sorted", c.Env)
			}
			if sc := spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("pod security context = %+v", sc)
			}
			if sc := c.SecurityContext; sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
				t.Errorf("container security context = %+v", sc)
			}
		})
	}
	secret := all["Secret/sample-system/sample-api-certs"]
	if secret == nil || secret.Object["type"] != string(corev1.SecretTypeTLS) || secret.Object["data"] != nil {
		t.Errorf("TLS secret = %v, want type kubernetes.io/tls without data", secret)
	}
}

// TestSampleRoundTrip serialises every sample version and parses it back:
// no warnings (every kind is known), the same objects, deterministic bytes.
func TestSampleRoundTrip(t *testing.T) {
	for _, v := range generate.SampleVersions {
		t.Run(v, func(t *testing.T) {
			s := mustSample(t, sampleConfig(v))
			text, err := s.Serialize()
			if err != nil {
				t.Fatal(err)
			}
			again, err := mustSample(t, sampleConfig(v)).Serialize()
			if err != nil || !bytes.Equal(text, again) {
				t.Fatalf("two builds serialise differently (%v)", err)
			}
			back, warnings, err := strategy.Parse(text, strategy.ParseOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(warnings) > 0 {
				t.Fatalf("warnings: %v", warnings)
			}
			if len(back.Objects) != len(s.Objects) {
				t.Fatalf("%d objects back, %d written", len(back.Objects), len(s.Objects))
			}
			for _, o := range s.Objects {
				if _, ok := kinds.Lookup(strategy.RefOf(o).GroupKind()); !ok {
					t.Errorf("%s: kind not in the kind table", strategy.RefOf(o))
				}
			}
			id, _ := sampleConfig(v).Identity(nil)
			if s.Identity != id {
				t.Errorf("identity = %+v, want %+v", s.Identity, id)
			}
		})
	}
}

func TestBuilderErrors(t *testing.T) {
	tests := []struct {
		name    string
		cfg     *identity.Config
		build   func(b *generate.Builder)
		wantErr []string
	}{
		{"declared twice", sampleConfig("v1"), func(b *generate.Builder) { b.ServiceAccount("a").ServiceAccount("a") }, []string{"ServiceAccount/sample-system/a: declared twice"}},
		{"bad role", sampleConfig("v1"), func(b *generate.Builder) { b.Deployment(generate.Workload{Name: "w", Role: "web"}) }, []string{`role "web"`}},
		{"no name", sampleConfig("v1"), func(b *generate.Builder) { b.ConfigMap("", nil) }, []string{"object without a name"}},
		{"crd without versions", sampleConfig("v1"), func(b *generate.Builder) { b.CRD(generate.CRD{Group: "g.io", Kind: "K"}) }, []string{"crd ks.g.io: no versions"}},
		{"unstructured without kind", sampleConfig("v1"), func(b *generate.Builder) { b.Add(&unstructured.Unstructured{Object: map[string]any{}}) }, []string{"without apiVersion or kind"}},
		{"version no label value", sampleConfig("v1.2.3+build.1"), func(b *generate.Builder) {
			b.Deployment(generate.Workload{Name: "a", Role: generate.RoleAPI}).Deployment(generate.Workload{Name: "b", Role: generate.RoleAPI})
		}, []string{`version "v1.2.3+build.1" is not a valid value of label app.kubernetes.io/version`}},
		{"no namespace, no version", &identity.Config{}, func(b *generate.Builder) {}, []string{"no version", "no namespace"}},
		{"kubevirt algorithm refuses", &identity.Config{Namespace: "n", Version: "v1", ComponentImages: map[string]string{"x": "y"}}, func(b *generate.Builder) {}, []string{"component images"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := generate.Options{}
			if tt.name == "kubevirt algorithm refuses" {
				opts.Algorithm = identity.KubeVirt
			}
			b := generate.New(tt.cfg, opts)
			tt.build(b)
			_, err := b.Build()
			if err == nil {
				t.Fatal("Build succeeded")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestBuilderNamespacesAndCopies(t *testing.T) {
	cfg := sampleConfig("v1.0.0")
	b := generate.New(cfg, generate.Options{Product: "p"})
	cfg.Namespace = "changed-after-New"
	cm := &corev1.ConfigMap{}
	cm.Name = "typed"
	b.Add(cm)
	b.Add(&unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "raw"}}})
	b.ClusterRole("cluster-wide")
	s, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	got := slices.Sorted(maps.Keys(refs(s)))
	want := []string{"ClusterRole.rbac.authorization.k8s.io/cluster-wide", "ConfigMap/sample-system/raw", "ConfigMap/sample-system/typed"}
	if !slices.Equal(got, want) {
		t.Fatalf("objects = %q, want %q", got, want)
	}
	if cm.Namespace != "" {
		t.Fatal("Add modified the caller's object")
	}
}
