package identity

import (
	"crypto/sha1" //nolint:gosec // KubeVirt's deployment ID is SHA-1; it names, it does not protect.
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/installstrategy/installstrategy/pkg/metakeys"
)

// Algorithm computes the identifier of a configuration.
type Algorithm interface {
	// Name is "native" or "kubevirt".
	Name() string
	// Identifier hashes the configuration; its ID field never takes part.
	Identifier(c *Config) (string, error)
}

// Algorithm names.
const (
	NameNative   = "native"
	NameKubeVirt = "kubevirt"
)

var (
	// Native is the documented, stable algorithm: the lowercase hex SHA-256
	// of NativePrefix followed by the canonical JSON (see Config.JSON) of
	// the configuration with its ID cleared. Adding a field to Config never
	// changes the identifier of a configuration that leaves it empty.
	Native Algorithm = native{}
	// KubeVirt reproduces virt-operator's deployment ID: the lowercase hex
	// SHA-1 of a string that concatenates, each field name followed by its
	// value: ID (always empty), Namespace, Registry, ImagePrefix,
	// KubeVirtVersion (Config.Version), then ComponentImages followed by
	// KubeVirt's thirteen image fields in declaration order (empty ones
	// included), then AdditionalProperties followed by each non-empty key
	// in sorted order and its value (an "imagePrefix" key with an empty
	// value is dropped first), then PassthroughEnvVars likewise.
	//
	// That is the field list of KubeVirt v1.8 and later. The release lines
	// v1.5, v1.6 and v1.7 hashed other fields in place of ComponentImages
	// and its thirteen (see kubeVirtReleaseLine): the version of the
	// configuration picks the list, as each virt-operator hashes with its
	// own. v1.5: ten image fields (no synchronization controller, no
	// virt-template) then their ten shasum fields (virtOperatorSha, ...,
	// gsSha, prHelperSha, sidecarShimSha, carried in ComponentImages under
	// those keys); v1.6: eleven images then eleven shasums (the
	// synchronization controller added); v1.7: the eleven images only.
	// Releases before v1.5 are not reproduced.
	//
	// Two things of Config have no place in KubeVirt's config. A component
	// image under a key KubeVirt does not know is an error. A non-empty
	// Placement is hashed as one more additional property,
	// metakeys.PlacementProperty, holding its canonical JSON (a configuration that
	// already has that property is an error); a configuration without
	// placement, which every KubeVirt configuration is, hashes exactly as
	// KubeVirt does.
	KubeVirt Algorithm = kubeVirt{}
)

// NativePrefix is hashed before the canonical JSON by the Native algorithm,
// so a change of the scheme can never produce an identifier of the old one.
const NativePrefix = "installstrategy.io/identity/v1\n"

// Algorithms lists the algorithms by name.
var Algorithms = []Algorithm{Native, KubeVirt}

// AlgorithmByName returns the algorithm called name; "" means Native.
func AlgorithmByName(name string) (Algorithm, error) {
	switch name {
	case "", NameNative:
		return Native, nil
	case NameKubeVirt:
		return KubeVirt, nil
	}
	return nil, fmt.Errorf("unknown identity algorithm %q: use %s or %s", name, NameNative, NameKubeVirt)
}

// IdentifierOf parses a configuration (see ParseConfig) and returns its
// identifier under the named algorithm ("" means native). It is what
// `kubectl installstrategy id --config FILE --algorithm NAME` prints.
func IdentifierOf(configJSON []byte, algorithm string) (string, error) {
	alg, err := AlgorithmByName(algorithm)
	if err != nil {
		return "", err
	}
	c, err := ParseConfig(configJSON)
	if err != nil {
		return "", err
	}
	return alg.Identifier(c)
}

// MismatchError says that the ID recorded in a configuration is not what
// the algorithms compute for it.
type MismatchError struct {
	// Recorded is the configuration's ID field.
	Recorded string
	// Computed maps each algorithm's name to its identifier (or to the
	// error text when it could not hash the configuration).
	Computed map[string]string
}

func (e *MismatchError) Error() string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(e.Computed)) {
		parts = append(parts, name+" "+e.Computed[name])
	}
	return fmt.Sprintf("config: recorded id %s matches no algorithm (%s)", e.Recorded, strings.Join(parts, ", "))
}

// Verify checks the configuration's recorded ID and returns the algorithm
// that computes it. A configuration without an ID verifies as Native.
// A recorded ID that no algorithm reproduces is a *MismatchError.
func (c *Config) Verify() (Algorithm, error) {
	if c.ID == "" {
		return Native, nil
	}
	computed := map[string]string{}
	for _, alg := range Algorithms {
		id, err := alg.Identifier(c)
		if err != nil {
			computed[alg.Name()] = err.Error()
			continue
		}
		if id == c.ID {
			return alg, nil
		}
		computed[alg.Name()] = id
	}
	return nil, &MismatchError{Recorded: c.ID, Computed: computed}
}

type native struct{}

func (native) Name() string { return NameNative }

func (native) Identifier(c *Config) (string, error) {
	cp := *c
	cp.ID = ""
	text, err := cp.JSON()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write([]byte(NativePrefix))
	h.Write(text)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// kubeVirt implements the KubeVirt algorithm (see the variable).
type kubeVirt struct{}

// kubeVirtField is a field of KubeVirt's deployment config between
// KubeVirtVersion and AdditionalProperties, with its JSON key.
type kubeVirtField struct{ field, key string }

// kubeVirtLayout is what one KubeVirt release line hashes between
// KubeVirtVersion and AdditionalProperties: its image (and, before v1.7,
// image shasum) fields in declaration order, and the name of the struct
// they are embedded in ("" when they are fields of the config itself).
type kubeVirtLayout struct {
	line   string // the first release line with this layout, e.g. "v1.8"
	group  string
	fields []kubeVirtField
}

func images(names ...string) []kubeVirtField {
	out := make([]kubeVirtField, len(names))
	for i, n := range names {
		key := strings.ToLower(n[:1]) + n[1:] + "Image"
		if n == "Gs" || n == "PrHelper" || n == "SidecarShim" {
			key = n + "Image" // KubeVirt's JSON keys of these start upper-case
		}
		out[i] = kubeVirtField{n + "Image", key}
	}
	return out
}

func shas(names ...string) []kubeVirtField {
	out := make([]kubeVirtField, len(names))
	for i, n := range names {
		out[i] = kubeVirtField{n + "Sha", strings.ToLower(n[:1]) + n[1:] + "Sha"}
	}
	return out
}

// The layouts of KubeVirt's pkg/virt-operator/util/config.go, read from each
// release (they hold for every patch release of a line): v1.5 has ten image
// fields and ten shasum fields; v1.6 adds the synchronization controller to
// both; v1.7 drops the shasums; v1.8 moves the images into an embedded
// ComponentImages struct (its name is hashed before its fields) and adds the
// two virt-template images.
var (
	kubeVirtV15 = kubeVirtLayout{line: "v1.5", fields: append(
		images("VirtOperator", "VirtApi", "VirtController", "VirtHandler", "VirtLauncher", "VirtExportProxy", "VirtExportServer", "Gs", "PrHelper", "SidecarShim"),
		shas("VirtOperator", "VirtApi", "VirtController", "VirtHandler", "VirtLauncher", "VirtExportProxy", "VirtExportServer", "Gs", "PrHelper", "SidecarShim")...)}
	kubeVirtV16 = kubeVirtLayout{line: "v1.6", fields: append(
		images("VirtOperator", "VirtApi", "VirtController", "VirtHandler", "VirtLauncher", "VirtExportProxy", "VirtExportServer", "VirtSynchronizationController", "Gs", "PrHelper", "SidecarShim"),
		shas("VirtOperator", "VirtApi", "VirtController", "VirtHandler", "VirtLauncher", "VirtExportProxy", "VirtExportServer", "VirtSynchronizationController", "Gs", "PrHelper", "SidecarShim")...)}
	kubeVirtV17 = kubeVirtLayout{line: "v1.7", fields: images("VirtOperator", "VirtApi", "VirtController", "VirtHandler", "VirtLauncher", "VirtExportProxy", "VirtExportServer", "VirtSynchronizationController", "Gs", "PrHelper", "SidecarShim")}
	kubeVirtV18 = kubeVirtLayout{line: "v1.8", group: "ComponentImages", fields: images("VirtOperator", "VirtApi", "VirtController", "VirtHandler", "VirtLauncher", "VirtExportProxy", "VirtExportServer", "VirtSynchronizationController", "VirtTemplateApiserver", "VirtTemplateController", "Gs", "PrHelper", "SidecarShim")}
)

// kubeVirtImages are the image fields of the newest layout.
var kubeVirtImages = kubeVirtV18.fields

// releaseLine matches the major and minor number of a KubeVirt version.
var releaseLine = regexp.MustCompile(`^v?([0-9]+)\.([0-9]+)(?:[.+-]|$)`)

// kubeVirtLayoutOf picks the layout by the configuration's version: the
// release lines v1.5, v1.6 and v1.7 have their own; every other version
// (v1.8 and later, and versions that are no KubeVirt release number, such
// as a product's own) hashes as v1.8 and later do.
func kubeVirtLayoutOf(version string) kubeVirtLayout {
	m := releaseLine.FindStringSubmatch(version)
	if m == nil || m[1] != "1" {
		return kubeVirtV18
	}
	switch m[2] {
	case "5":
		return kubeVirtV15
	case "6":
		return kubeVirtV16
	case "7":
		return kubeVirtV17
	}
	return kubeVirtV18
}

func (kubeVirt) Name() string { return NameKubeVirt }

func (kubeVirt) Identifier(c *Config) (string, error) {
	s, err := kubeVirtString(c)
	if err != nil {
		return "", err
	}
	sum := sha1.Sum([]byte(s)) //nolint:gosec // see import
	return hex.EncodeToString(sum[:]), nil
}

func kubeVirtString(c *Config) (string, error) {
	layout := kubeVirtLayoutOf(c.Version)
	known := map[string]bool{}
	for _, f := range layout.fields {
		known[f.key] = true
	}
	var unknown []string
	for k, v := range c.ComponentImages {
		if !known[k] && v != "" {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return "", fmt.Errorf("kubevirt identifier: component images %q are not fields of the deployment config of KubeVirt %s (version %q), whose first is %s", unknown, layout.line, c.Version, layout.fields[0].key)
	}
	props := maps.Clone(c.AdditionalProperties)
	if v, ok := props["imagePrefix"]; ok && v == "" {
		delete(props, "imagePrefix")
	}
	if !c.Placement.IsZero() {
		if _, ok := props[metakeys.PlacementProperty]; ok {
			return "", errors.New("kubevirt identifier: the config has both a placement and an additional property " + metakeys.PlacementProperty)
		}
		p := Config{Placement: c.Placement}
		text, err := p.JSON()
		if err != nil {
			return "", err
		}
		if props == nil {
			props = map[string]string{}
		}
		props[metakeys.PlacementProperty] = string(text)
	}
	var b strings.Builder
	field := func(name, value string) { b.WriteString(name); b.WriteString(value) }
	field("ID", "")
	field("Namespace", c.Namespace)
	field("Registry", c.Registry)
	field("ImagePrefix", c.ImagePrefix)
	field("KubeVirtVersion", c.Version)
	b.WriteString(layout.group)
	for _, f := range layout.fields {
		field(f.field, c.ComponentImages[f.key])
	}
	writeMap := func(name string, m map[string]string) {
		b.WriteString(name)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if k != "" {
				field(k, m[k])
			}
		}
	}
	writeMap("AdditionalProperties", props)
	writeMap("PassthroughEnvVars", c.PassthroughEnvVars)
	return b.String(), nil
}
