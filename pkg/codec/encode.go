package codec

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// EncodeOptions says how to write a strategy ConfigMap. The zero value writes
// the native form with a generated name and no namespace.
type EncodeOptions struct {
	// Format is FormatNative (the default) or FormatKubeVirt.
	Format Format
	// Namespace of the ConfigMap; empty leaves it unset.
	Namespace string
	// Name of the ConfigMap; empty means a generateName prefix is used.
	Name string
	// Identity is written into the annotations.
	Identity strategy.Identity
	// Compact writes each object as a line of JSON instead of block YAML
	// (strategy.SerializeCompactTo; Encode only, native form only): the
	// same strategy for a tenth of the time and a thirtieth of the memory
	// on KubeVirt's, in a text that is not KubeVirt's.
	Compact bool
}

// Encode serialises a strategy (see strategy.Serialize, and
// EncodeOptions.Compact) and wraps it in a ConfigMap. The identity comes from opts when set there, else from s. The
// text is compressed and hashed as it is written, never held whole: the
// result is EncodeText's for s.Serialize(), for a fraction of its memory.
func Encode(s *strategy.Strategy, opts EncodeOptions) (*corev1.ConfigMap, error) {
	if opts.Identity == (strategy.Identity{}) {
		opts.Identity = s.Identity
	}
	f, err := encodeFormat(opts)
	if err != nil {
		return nil, err
	}
	var compressed bytes.Buffer
	zw := newGzipWriter(&compressed, f)
	var w io.Writer = zw
	sum := sha256.New()
	if f == FormatNative {
		// Only the native form records the text's digest.
		w = io.MultiWriter(zw, sum)
	}
	serialize := s.SerializeTo
	if opts.Compact {
		if f != FormatNative {
			return nil, errors.New("encode: a compact text is of the native form only")
		}
		serialize = s.SerializeCompactTo
	}
	size, err := serialize(w)
	if err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("encode: gzip: %w", err)
	}
	digest := "sha256:" + hex.EncodeToString(sum.Sum(nil))
	return wrapEncoded(base64.StdEncoding.EncodeToString(compressed.Bytes()), digest, size, f, opts), nil
}

// EncodeText wraps a manifests text, as it is, in a strategy ConfigMap:
// gzip+base64 in data.manifests, with the labels and annotations of the
// chosen form. In the KubeVirt form the result is byte for byte what
// KubeVirt's operator writes for the same text.
func EncodeText(text []byte, opts EncodeOptions) (*corev1.ConfigMap, error) {
	f, err := encodeFormat(opts)
	if err != nil {
		return nil, err
	}
	data, err := gzipBase64(text, f)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	digest := ""
	if f == FormatNative {
		digest = Digest(text)
	}
	return wrapEncoded(data, digest, int64(len(text)), f, opts), nil
}

// encodeFormat checks what every encoding needs: a known form (native when
// empty) and a version.
func encodeFormat(opts EncodeOptions) (Format, error) {
	f := opts.Format
	if f == "" {
		f = FormatNative
	}
	if _, err := ParseFormat(string(f)); err != nil {
		return "", err
	}
	if opts.Identity.Version == "" {
		return "", errors.New("encode: the strategy needs a version")
	}
	return f, nil
}

// wrapEncoded is the strategy ConfigMap of f for gzip+base64 data whose
// text has the given digest and size.
func wrapEncoded(data, digest string, size int64, f Format, opts EncodeOptions) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: kinds.ConfigMap.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: opts.Name, Namespace: opts.Namespace},
		Data:       map[string]string{ManifestsKey: data},
	}
	id := opts.Identity
	if f == FormatKubeVirt {
		if cm.Name == "" {
			cm.GenerateName = KubeVirtGenerateName
		}
		cm.Labels = map[string]string{metakeys.ManagedByLabel: metakeys.KubeVirtManagedBy, metakeys.KubeVirtStrategyLabel: ""}
		cm.Annotations = map[string]string{
			metakeys.KubeVirtVersionAnnotation:  id.Version,
			metakeys.KubeVirtRegistryAnnotation: id.Registry,
			metakeys.KubeVirtEncodingAnnotation: EncodingGzipBase64,
		}
		if id.Identifier != "" {
			cm.Annotations[metakeys.KubeVirtIdentifierAnnotation] = id.Identifier
		}
	} else {
		if cm.Name == "" {
			cm.GenerateName = NativeGenerateName
		}
		cm.Labels = map[string]string{metakeys.ManagedByLabel: metakeys.ManagedBy, metakeys.StrategyLabel: ""}
		cm.Annotations = map[string]string{
			metakeys.VersionAnnotation:     id.Version,
			metakeys.RegistryAnnotation:    id.Registry,
			metakeys.EncodingAnnotation:    EncodingGzipBase64,
			metakeys.DigestAnnotation:      digest,
			metakeys.DecodedSizeAnnotation: strconv.FormatInt(size, 10),
		}
		if id.Identifier != "" {
			cm.Annotations[metakeys.IdentifierAnnotation] = id.Identifier
		}
	}
	return cm
}

// MarshalYAML writes a ConfigMap the way KubeVirt's files show it: keys
// sorted, no empty fields (no creationTimestamp).
func MarshalYAML(cm *corev1.ConfigMap) ([]byte, error) {
	return yaml.Marshal(configMapMap(cm))
}

// configMapMap keeps only the fields a strategy ConfigMap uses, so the
// output has no empty metadata fields.
func configMapMap(cm *corev1.ConfigMap) map[string]any {
	md := map[string]any{}
	set := func(k, v string) {
		if v != "" {
			md[k] = v
		}
	}
	set("name", cm.Name)
	set("generateName", cm.GenerateName)
	set("namespace", cm.Namespace)
	set("resourceVersion", cm.ResourceVersion)
	set("uid", string(cm.UID))
	if !cm.CreationTimestamp.IsZero() {
		md["creationTimestamp"] = cm.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z")
	}
	if len(cm.Labels) > 0 {
		md["labels"] = cm.Labels
	}
	if len(cm.Annotations) > 0 {
		md["annotations"] = cm.Annotations
	}
	out := map[string]any{"apiVersion": "v1", "kind": kinds.ConfigMap.Kind, "metadata": md}
	if len(cm.Data) > 0 {
		out["data"] = cm.Data
	}
	if len(cm.BinaryData) > 0 {
		out["binaryData"] = cm.BinaryData
	}
	return out
}
