// Package identity owns the deployment configuration of a product (namespace,
// registry, image prefix, version, component images, additional properties,
// passthrough environment, placement) and the identifier hashed from it.
//
// The identifier names the install strategy generated for a configuration:
// two configurations with the same identifier get the same strategy. Two
// algorithms compute it behind one interface: [Native] (SHA-256 over the
// canonical JSON of the configuration, documented and stable) and [KubeVirt]
// (KubeVirt's hex SHA-1 over field names and values, reproducing the
// deployment IDs virt-operator writes).
package identity

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// EnvVar is the environment variable that carries a configuration, as JSON,
// to an operator running with --dump-install-strategy (KubeVirt's name).
const EnvVar = "TARGET_DEPLOYMENT_CONFIG"

// Config is the deployment configuration of one installation of a product.
// Its JSON form uses the keys in the field tags; [ParseConfig] also reads
// KubeVirt's form (kubeVirtVersion, and component images as top-level keys
// such as virtOperatorImage).
type Config struct {
	// ID is the identifier recorded with the configuration. It never takes
	// part in hashing; [Config.Verify] checks it.
	ID string `json:"id,omitempty"`
	// Namespace is the install namespace.
	Namespace string `json:"namespace,omitempty"`
	// Registry is the image registry, e.g. "quay.io/example".
	Registry string `json:"registry,omitempty"`
	// ImagePrefix is put before every component name in image names.
	ImagePrefix string `json:"imagePrefix,omitempty"`
	// Version is the product version and the image tag, e.g. "v1.2.0".
	Version string `json:"version,omitempty"`
	// ComponentImages overrides the image of a component, keyed by
	// component name (KubeVirt: by JSON key, e.g. "virtApiImage"; KubeVirt
	// v1.5 and v1.6 configurations also carry image shasums here, e.g.
	// "virtApiSha").
	ComponentImages map[string]string `json:"componentImages,omitempty"`
	// AdditionalProperties holds everything else that changes the
	// strategy, e.g. settings copied from the custom resource's spec.
	AdditionalProperties map[string]string `json:"additionalProperties,omitempty"`
	// PassthroughEnvVars are environment variables given to every
	// container of the product.
	PassthroughEnvVars map[string]string `json:"passthroughEnvVars,omitempty"`
	// Placement says where the product's workloads run; nil leaves them
	// to the scheduler. Generators do not apply it: pkg/placement puts it
	// on a strategy's pod templates when the strategy is deployed.
	Placement *Placement `json:"placement,omitempty"`
}

// Placement places a product's workloads on nodes.
type Placement struct {
	// Infra places the control-plane components (api and controller
	// roles).
	Infra *NodePlacement `json:"infra,omitempty"`
	// Workloads places the per-node components (handler role).
	Workloads *NodePlacement `json:"workloads,omitempty"`
}

// NodePlacement is a node selector, tolerations and an affinity for a pod.
type NodePlacement struct {
	NodeSelector map[string]string   `json:"nodeSelector,omitempty"`
	Tolerations  []corev1.Toleration `json:"tolerations,omitempty"`
	// Affinity replaces the pod's affinity; nil keeps it.
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
}

// IsZero reports whether the placement constrains nothing.
func (p *Placement) IsZero() bool {
	return p == nil || (p.Infra.IsZero() && p.Workloads.IsZero())
}

// IsZero reports whether the placement constrains nothing.
func (p *NodePlacement) IsZero() bool {
	return p == nil || (len(p.NodeSelector) == 0 && len(p.Tolerations) == 0 && p.Affinity == nil)
}

// Image returns the image of a component: the override in ComponentImages
// when there is one, else "<registry>/<prefix><component>:<version>".
func (c *Config) Image(component string) string {
	if img := c.ComponentImages[component]; img != "" {
		return img
	}
	name := c.ImagePrefix + component
	if c.Registry != "" {
		name = c.Registry + "/" + name
	}
	if c.Version != "" {
		name += ":" + c.Version
	}
	return name
}

// Clone returns a deep copy of the configuration.
func (c *Config) Clone() *Config {
	out := *c
	out.ComponentImages = maps.Clone(c.ComponentImages)
	out.AdditionalProperties = maps.Clone(c.AdditionalProperties)
	out.PassthroughEnvVars = maps.Clone(c.PassthroughEnvVars)
	if c.Placement != nil {
		p := Placement{Infra: c.Placement.Infra.clone(), Workloads: c.Placement.Workloads.clone()}
		out.Placement = &p
	}
	return &out
}

func (p *NodePlacement) clone() *NodePlacement {
	if p == nil {
		return nil
	}
	out := NodePlacement{NodeSelector: maps.Clone(p.NodeSelector), Affinity: p.Affinity.DeepCopy()}
	for _, t := range p.Tolerations {
		out.Tolerations = append(out.Tolerations, *t.DeepCopy())
	}
	return &out
}

// JSON returns the configuration in its canonical JSON form: the keys of the
// field tags in declaration order, map keys sorted, empty fields left out,
// no HTML escaping, no insignificant white space.
func (c *Config) JSON() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode((*plainConfig)(c)); err != nil {
		return nil, fmt.Errorf("config: encode json: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// KubeVirtJSON is the configuration in KubeVirt's JSON form, the one
// virt-operator's dump mode reads from EnvVar: kubeVirtVersion for the
// version, component images as top-level keys (virtOperatorImage, ...).
// Placement is not part of KubeVirt's form and is left out; ParseConfig
// reads the result back.
func (c *Config) KubeVirtJSON() ([]byte, error) {
	m := map[string]any{}
	set := func(k, v string) {
		if v != "" {
			m[k] = v
		}
	}
	set("id", c.ID)
	set("namespace", c.Namespace)
	set("registry", c.Registry)
	set("imagePrefix", c.ImagePrefix)
	set("kubeVirtVersion", c.Version)
	for k, v := range c.ComponentImages {
		set(k, v)
	}
	if len(c.AdditionalProperties) > 0 {
		m["additionalProperties"] = c.AdditionalProperties
	}
	if len(c.PassthroughEnvVars) > 0 {
		m["passthroughEnvVars"] = c.PassthroughEnvVars
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("config: encode json: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// plainConfig has Config's fields without its methods, so encoding/json
// uses the default encoding.
type plainConfig Config

// ParseConfig reads a configuration in its own JSON form or in KubeVirt's
// (the TARGET_DEPLOYMENT_CONFIG JSON virt-operator writes). Unknown keys are
// an error, so a misspelt key never silently changes nothing.
func ParseConfig(data []byte) (*Config, error) {
	c := &Config{}
	if err := json.Unmarshal(data, c); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return c, nil
}

// UnmarshalJSON reads both JSON forms of a configuration (see ParseConfig).
func (c *Config) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	if raw == nil {
		return errors.New("configuration is null, want an object")
	}
	*c = Config{}
	var errs []error
	str := func(key string, dst *string) {
		if err := unmarshalNullable(raw[key], dst); err != nil {
			errs = append(errs, fmt.Errorf("key %q: %w", key, err))
		}
	}
	var version, kubeVirtVersion string
	for _, key := range slices.Sorted(maps.Keys(raw)) {
		switch key {
		case "id":
			str(key, &c.ID)
		case "namespace":
			str(key, &c.Namespace)
		case "registry":
			str(key, &c.Registry)
		case "imagePrefix":
			str(key, &c.ImagePrefix)
		case "version":
			str(key, &version)
		case "kubeVirtVersion":
			str(key, &kubeVirtVersion)
		case "componentImages", "additionalProperties", "passthroughEnvVars":
			var m map[string]string
			if err := unmarshalNullable(raw[key], &m); err != nil {
				errs = append(errs, fmt.Errorf("key %q: %w", key, err))
				continue
			}
			switch key {
			case "componentImages":
				for k, v := range m {
					c.setComponentImage(k, v)
				}
			case "additionalProperties":
				c.AdditionalProperties = m
			default:
				c.PassthroughEnvVars = m
			}
		case "placement":
			if err := unmarshalNullable(raw[key], &c.Placement); err != nil {
				errs = append(errs, fmt.Errorf("key %q: %w", key, err))
			}
		default:
			// Images, and the image shasums of KubeVirt v1.5 and v1.6
			// (virtOperatorSha, ..., gsSha), go to ComponentImages.
			if !strings.HasSuffix(key, "Image") && !strings.HasSuffix(key, "Sha") {
				errs = append(errs, fmt.Errorf("unknown key %q", key))
				continue
			}
			var img string
			str(key, &img)
			if img != "" {
				c.setComponentImage(key, img)
			}
		}
	}
	switch {
	case version != "" && kubeVirtVersion != "" && version != kubeVirtVersion:
		errs = append(errs, fmt.Errorf("keys \"version\" (%q) and \"kubeVirtVersion\" (%q) disagree", version, kubeVirtVersion))
	case version != "":
		c.Version = version
	default:
		c.Version = kubeVirtVersion
	}
	return errors.Join(errs...)
}

func (c *Config) setComponentImage(k, v string) {
	if c.ComponentImages == nil {
		c.ComponentImages = map[string]string{}
	}
	c.ComponentImages[k] = v
}

func unmarshalNullable(data json.RawMessage, dst any) error {
	if len(data) == 0 || string(data) == "null" {
		return nil
	}
	return json.Unmarshal(data, dst)
}

// Identity returns the strategy identity of the configuration under an
// algorithm (nil means Native): its version, registry and identifier.
func (c *Config) Identity(alg Algorithm) (strategy.Identity, error) {
	if alg == nil {
		alg = Native
	}
	id, err := alg.Identifier(c)
	if err != nil {
		return strategy.Identity{}, err
	}
	return strategy.Identity{Version: c.Version, Registry: c.Registry, Identifier: id}, nil
}
