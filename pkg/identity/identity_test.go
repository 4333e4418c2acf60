package identity_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/installstrategy/installstrategy/internal/kubevirtdata"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
)

// TestKubeVirtVectors checks the KubeVirt algorithm against the deployment
// IDs KubeVirt itself computed for its real configurations.
func TestKubeVirtVectors(t *testing.T) {
	for _, v := range kubevirtdata.Versions {
		t.Run(v, func(t *testing.T) {
			data := kubevirtdata.Read(t, v, "config.json")
			want := kubevirtdata.ID(t, v)
			got, err := identity.IdentifierOf(data, "kubevirt")
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("kubevirt identifier = %s, want %s", got, want)
			}
			c, err := identity.ParseConfig(data)
			if err != nil {
				t.Fatal(err)
			}
			if c.ID != want {
				t.Fatalf("recorded id = %s, want %s", c.ID, want)
			}
			alg, err := c.Verify()
			if err != nil {
				t.Fatal(err)
			}
			if alg.Name() != "kubevirt" {
				t.Fatalf("Verify chose %s, want kubevirt", alg.Name())
			}
			// The native form of the same configuration hashes the same
			// under KubeVirt's algorithm: the JSON form does not matter.
			text, err := c.JSON()
			if err != nil {
				t.Fatal(err)
			}
			again, err := identity.IdentifierOf(text, "kubevirt")
			if err != nil {
				t.Fatal(err)
			}
			if again != want {
				t.Fatalf("after a native JSON round trip: %s, want %s", again, want)
			}
		})
	}
}

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name    string
		json    string
		want    identity.Config
		wantErr string
	}{
		{
			name: "native form",
			json: `{"namespace":"ns","registry":"r.io/x","imagePrefix":"p-","version":"v1.0.0","componentImages":{"sample-api":"img"},"additionalProperties":{"a":"1"},"passthroughEnvVars":{"E":"v"}}`,
			want: identity.Config{Namespace: "ns", Registry: "r.io/x", ImagePrefix: "p-", Version: "v1.0.0",
				ComponentImages: map[string]string{"sample-api": "img"}, AdditionalProperties: map[string]string{"a": "1"}, PassthroughEnvVars: map[string]string{"E": "v"}},
		},
		{
			name: "kubevirt form",
			json: `{"id":"abc","namespace":"kubevirt","kubeVirtVersion":"v1.9.0","virtOperatorImage":"op","GsImage":"","additionalProperties":{"x":""}}`,
			want: identity.Config{ID: "abc", Namespace: "kubevirt", Version: "v1.9.0",
				ComponentImages: map[string]string{"virtOperatorImage": "op"}, AdditionalProperties: map[string]string{"x": ""}},
		},
		{name: "nulls", json: `{"namespace":null,"additionalProperties":null}`, want: identity.Config{}},
		{name: "both versions agreeing", json: `{"version":"v1","kubeVirtVersion":"v1"}`, want: identity.Config{Version: "v1"}},
		{name: "both versions disagreeing", json: `{"version":"v1","kubeVirtVersion":"v2"}`, wantErr: `keys "version" ("v1") and "kubeVirtVersion" ("v2") disagree`},
		{name: "unknown key", json: `{"namespce":"x"}`, wantErr: `unknown key "namespce"`},
		{name: "wrong type", json: `{"namespace":3}`, wantErr: `key "namespace"`},
		{name: "not an object", json: `[]`, wantErr: "cannot unmarshal array"},
		{name: "null", json: `null`, wantErr: "configuration is null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := identity.ParseConfig([]byte(tt.json))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			g, _ := got.JSON()
			w, _ := tt.want.JSON()
			if string(g) != string(w) {
				t.Fatalf("got %s\nwant %s", g, w)
			}
		})
	}
}

func base() identity.Config {
	return identity.Config{Namespace: "sample", Registry: "registry.example/sample", Version: "v1.0.0"}
}

// TestIdentifierChanges checks, for both algorithms, which changes of a
// configuration change its identifier.
func TestIdentifierChanges(t *testing.T) {
	tests := []struct {
		name   string
		change func(c *identity.Config)
		same   map[string]bool // per algorithm: identifier unchanged
	}{
		{"id field", func(c *identity.Config) { c.ID = "whatever" }, map[string]bool{"native": true, "kubevirt": true}},
		{"namespace", func(c *identity.Config) { c.Namespace = "other" }, nil},
		{"registry", func(c *identity.Config) { c.Registry = "other" }, nil},
		{"prefix", func(c *identity.Config) { c.ImagePrefix = "p-" }, nil},
		{"version", func(c *identity.Config) { c.Version = "v1.0.1" }, nil},
		{"component image", func(c *identity.Config) { c.ComponentImages = map[string]string{"virtApiImage": "x"} }, nil},
		{"additional property", func(c *identity.Config) { c.AdditionalProperties = map[string]string{"k": "v"} }, nil},
		{"empty additional property", func(c *identity.Config) { c.AdditionalProperties = map[string]string{"k": ""} }, nil},
		{"empty imagePrefix property", func(c *identity.Config) { c.AdditionalProperties = map[string]string{"imagePrefix": ""} },
			map[string]bool{"kubevirt": true}},
		{"empty key", func(c *identity.Config) { c.AdditionalProperties = map[string]string{"": "v"} }, map[string]bool{"kubevirt": true}},
		{"empty maps", func(c *identity.Config) {
			c.AdditionalProperties = map[string]string{}
			c.PassthroughEnvVars = map[string]string{}
		}, map[string]bool{"native": true, "kubevirt": true}},
		{"passthrough env", func(c *identity.Config) { c.PassthroughEnvVars = map[string]string{"k": "v"} }, nil},
		{"empty placement", func(c *identity.Config) { c.Placement = &identity.Placement{Infra: &identity.NodePlacement{}} },
			map[string]bool{"kubevirt": true}},
		{"placement", func(c *identity.Config) {
			c.Placement = &identity.Placement{Infra: &identity.NodePlacement{Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}}}
		}, nil},
		{"affinity", func(c *identity.Config) {
			c.Placement = &identity.Placement{Workloads: &identity.NodePlacement{Affinity: &corev1.Affinity{}}}
		}, nil},
	}
	for _, alg := range identity.Algorithms {
		b := base()
		before, err := alg.Identifier(&b)
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range tests {
			t.Run(alg.Name()+"/"+tt.name, func(t *testing.T) {
				c := base()
				tt.change(&c)
				after, err := alg.Identifier(&c)
				if err != nil {
					t.Fatal(err)
				}
				if same := after == before; same != tt.same[alg.Name()] {
					t.Fatalf("identifier unchanged = %v, want %v", same, tt.same[alg.Name()])
				}
			})
		}
	}
}

// TestNativeStable pins the native identifier of one configuration: the
// algorithm is documented and must never change.
func TestNativeStable(t *testing.T) {
	c := base()
	c.AdditionalProperties = map[string]string{"b": "2", "a": "<&>"}
	text, err := c.JSON()
	if err != nil {
		t.Fatal(err)
	}
	const wantJSON = `{"namespace":"sample","registry":"registry.example/sample","version":"v1.0.0","additionalProperties":{"a":"<&>","b":"2"}}`
	if string(text) != wantJSON {
		t.Fatalf("canonical JSON = %s, want %s", text, wantJSON)
	}
	id, err := identity.Native.Identifier(&c)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(identity.NativePrefix + wantJSON))
	if want := hex.EncodeToString(sum[:]); id != want {
		t.Fatalf("native identifier = %s, want %s", id, want)
	}
	// Pinned, so a change of the algorithm cannot go unnoticed.
	const pinned = "964e0afa6da62da51d5aba9da161acc9f9c746e93f5e0e932f6f177adf05e6f2"
	if id != pinned {
		t.Fatalf("native identifier = %s, pinned %s", id, pinned)
	}
}

func TestKubeVirtRefuses(t *testing.T) {
	tests := []struct {
		name    string
		change  func(c *identity.Config)
		wantErr string
	}{
		{"unknown component image", func(c *identity.Config) { c.ComponentImages = map[string]string{"sample-api": "x"} }, `component images ["sample-api"]`},
		{"placement property clash", func(c *identity.Config) {
			c.AdditionalProperties = map[string]string{metakeys.PlacementProperty: "x"}
			c.Placement = &identity.Placement{Workloads: &identity.NodePlacement{NodeSelector: map[string]string{"a": "b"}}}
		}, "both a placement and an additional property"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base()
			tt.change(&c)
			_, err := identity.KubeVirt.Identifier(&c)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestVerify(t *testing.T) {
	c := base()
	nid, _ := identity.Native.Identifier(&c)
	kid, _ := identity.KubeVirt.Identifier(&c)
	tests := []struct {
		id   string
		want string
	}{{"", "native"}, {nid, "native"}, {kid, "kubevirt"}, {"deadbeef", ""}}
	for _, tt := range tests {
		c.ID = tt.id
		alg, err := c.Verify()
		if tt.want == "" {
			var mm *identity.MismatchError
			if !errors.As(err, &mm) || mm.Computed["native"] != nid || mm.Computed["kubevirt"] != kid {
				t.Fatalf("Verify(%q) error = %v, want a MismatchError listing both identifiers", tt.id, err)
			}
			continue
		}
		if err != nil || alg.Name() != tt.want {
			t.Fatalf("Verify(%q) = %v, %v; want %s", tt.id, alg, err, tt.want)
		}
	}
}

func TestAlgorithmByName(t *testing.T) {
	for name, want := range map[string]string{"": "native", "native": "native", "kubevirt": "kubevirt"} {
		alg, err := identity.AlgorithmByName(name)
		if err != nil || alg.Name() != want {
			t.Fatalf("AlgorithmByName(%q) = %v, %v", name, alg, err)
		}
	}
	if _, err := identity.AlgorithmByName("md5"); err == nil {
		t.Fatal("AlgorithmByName(md5) succeeded")
	}
}

func TestImage(t *testing.T) {
	tests := []struct {
		c    identity.Config
		comp string
		want string
	}{
		{identity.Config{Registry: "r.io/x", Version: "v1.0.0"}, "sample-api", "r.io/x/sample-api:v1.0.0"},
		{identity.Config{Registry: "r.io/x", ImagePrefix: "pre-", Version: "v1.0.0"}, "sample-api", "r.io/x/pre-sample-api:v1.0.0"},
		{identity.Config{Registry: "r.io/x", Version: "v1", ComponentImages: map[string]string{"sample-api": "other@sha256:00"}}, "sample-api", "other@sha256:00"},
		{identity.Config{}, "sample-api", "sample-api"},
	}
	for _, tt := range tests {
		if got := tt.c.Image(tt.comp); got != tt.want {
			t.Errorf("Image(%q) = %q, want %q", tt.comp, got, tt.want)
		}
	}
}

func TestCloneIsDeep(t *testing.T) {
	c := base()
	c.AdditionalProperties = map[string]string{"a": "1"}
	c.Placement = &identity.Placement{Infra: &identity.NodePlacement{NodeSelector: map[string]string{"x": "y"}, Tolerations: []corev1.Toleration{{Key: "k"}},
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}}}}
	cp := c.Clone()
	cp.AdditionalProperties["a"] = "2"
	cp.Placement.Infra.NodeSelector["x"] = "z"
	cp.Placement.Infra.Tolerations[0].Key = "changed"
	cp.Placement.Infra.Affinity.NodeAffinity = nil
	if c.AdditionalProperties["a"] != "1" || c.Placement.Infra.NodeSelector["x"] != "y" || c.Placement.Infra.Tolerations[0].Key != "k" || c.Placement.Infra.Affinity.NodeAffinity == nil {
		t.Fatal("Clone shares state with the original")
	}
	// The JSON form round-trips.
	text, _ := c.JSON()
	var back identity.Config
	if err := json.Unmarshal(text, &back); err != nil {
		t.Fatal(err)
	}
	again, _ := back.JSON()
	if string(again) != string(text) {
		t.Fatalf("round trip: %s != %s", again, text)
	}
}

// TestKubeVirtJSON: a configuration in KubeVirt's JSON form has the keys
// virt-operator's dump mode reads (kubeVirtVersion, component images at
// the top), and ParseConfig reads it back to the same configuration and
// identifier.
func TestKubeVirtJSON(t *testing.T) {
	c := &identity.Config{ID: "abc", Namespace: "kubevirt", Registry: "quay.io/kubevirt", Version: "v1.9.0",
		ComponentImages:      map[string]string{"virtOperatorImage": "quay.io/kubevirt/virt-operator:v1.9.0"},
		AdditionalProperties: map[string]string{"UninstallStrategy": "BlockUninstallIfWorkloadsExist"}}
	b, err := c.KubeVirtJSON()
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	if raw["kubeVirtVersion"] != "v1.9.0" || raw["virtOperatorImage"] != "quay.io/kubevirt/virt-operator:v1.9.0" || raw["version"] != nil || raw["componentImages"] != nil {
		t.Errorf("KubeVirt form %s: want kubeVirtVersion and virtOperatorImage at the top", b)
	}
	back, err := identity.ParseConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, c) {
		t.Errorf("read back %+v, want %+v", back, c)
	}
	want, _ := c.Identity(identity.KubeVirt)
	if got, _ := back.Identity(identity.KubeVirt); got != want {
		t.Errorf("identity %+v, want %+v", got, want)
	}
}
