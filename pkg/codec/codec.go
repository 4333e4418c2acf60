// Package codec converts between install strategies and the ConfigMaps that
// store them: KubeVirt's gzip+base64 form (byte for byte compatible), its
// legacy plain form, and the native form that adds a sha256 digest of the
// decoded text which every read verifies. Decoding is bounded, so a gzip bomb
// is refused instead of exhausting memory.
package codec

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// Keys of the ConfigMaps KubeVirt writes.
const (
	ManifestsKey = "manifests"

	KubeVirtGenerateName = "kubevirt-install-strategy-"
)

// Keys of the native form.
const (
	NativeGenerateName = "installstrategy-"
)

// Encoding names.
const (
	EncodingGzipBase64 = "gzip+base64"
	EncodingPlain      = "plain"
)

// DefaultMaxDecodedBytes bounds the decoded manifests text unless told
// otherwise: 64 MiB, sixteen times KubeVirt v1.9.0's strategy.
const DefaultMaxDecodedBytes = 64 << 20

// ObjectSizeLimit is the most a ConfigMap's data may hold (1 MiB).
const ObjectSizeLimit = 1 << 20

// Format is the shape of a strategy ConfigMap.
type Format string

// Formats.
const (
	FormatKubeVirt Format = "kubevirt"
	FormatNative   Format = "native"
)

// ParseFormat accepts "kubevirt" or "native".
func ParseFormat(s string) (Format, error) {
	switch Format(s) {
	case FormatKubeVirt, FormatNative:
		return Format(s), nil
	}
	return "", fmt.Errorf("unknown format %q: use kubevirt or native", s)
}

// Info describes a strategy ConfigMap and what decoding it found.
type Info struct {
	Name         string            `json:"name,omitempty"`
	GenerateName string            `json:"generateName,omitempty"`
	Namespace    string            `json:"namespace,omitempty"`
	Format       Format            `json:"format"`
	Encoding     string            `json:"encoding"`
	Identity     strategy.Identity `json:"identity"`
	// EncodedBytes is the size of data.manifests as stored.
	EncodedBytes int `json:"encodedBytes"`
	// DecodedBytes is the size of the manifests text.
	DecodedBytes int `json:"decodedBytes"`
	// Digest is the digest recorded in the ConfigMap ("sha256:<hex>"),
	// empty when none is recorded (KubeVirt's form).
	Digest string `json:"digest,omitempty"`
	// DigestVerified is true when a recorded digest matched the text.
	DigestVerified bool `json:"digestVerified"`
	// Signature and SignatureKey are the signature annotations, empty when
	// the ConfigMap is not signed. Decode does not check them (pkg/trust
	// does).
	Signature    string `json:"signature,omitempty"`
	SignatureKey string `json:"signatureKey,omitempty"`
	// IdentitySignature is the identity signature annotation, if any.
	IdentitySignature string `json:"identitySignature,omitempty"`
	// Statement and StatementSignature are the signed statement
	// annotations, if any (pkg/trust checks them).
	Statement          string `json:"statement,omitempty"`
	StatementSignature string `json:"statementSignature,omitempty"`
}

// Ratio is decoded bytes per encoded byte.
func (i Info) Ratio() float64 {
	if i.EncodedBytes == 0 {
		return 0
	}
	return float64(i.DecodedBytes) / float64(i.EncodedBytes)
}

// Headroom is how many more bytes data.manifests could hold before the
// ConfigMap reaches the 1 MiB limit (negative when over).
func (i Info) Headroom() int { return ObjectSizeLimit - i.EncodedBytes }

// DecodeError says which step of decoding a ConfigMap failed, and where.
type DecodeError struct {
	// ConfigMap is "namespace/name" (or generateName) of the ConfigMap.
	ConfigMap string
	// Step is one of "configmap", "base64", "gzip", "limit", "digest".
	Step string
	// Offset is the byte offset in data.manifests for base64 errors, -1
	// otherwise.
	Offset int64
	Err    error
}

func (e *DecodeError) Error() string {
	where := "configmap " + e.ConfigMap
	if e.Offset >= 0 {
		return fmt.Sprintf("%s: %s: %v at byte offset %d of data.manifests", where, e.Step, e.Err, e.Offset)
	}
	return fmt.Sprintf("%s: %s: %v", where, e.Step, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// ErrDigestMismatch is wrapped by the error of a ConfigMap whose text does
// not match its recorded digest.
var ErrDigestMismatch = errors.New("digest mismatch")

// Digest returns "sha256:<hex>" of a manifests text.
func Digest(text []byte) string {
	sum := sha256.Sum256(text)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// IdentityDigest is the "sha256:" digest that an identity signature (see
// metakeys.IdentitySignatureAnnotation) covers: the namespace, the identity and
// the digest of the text, one per line after a version tag.
func IdentityDigest(namespace string, id strategy.Identity, digest string) string {
	return Digest([]byte(fmt.Sprintf("installstrategy.io/identity-signature/v1\nnamespace=%s\nidentifier=%s\nversion=%s\nregistry=%s\ndigest=%s\n",
		namespace, id.Identifier, id.Version, id.Registry, digest)))
}

// DescribeConfigMap returns the identity a ConfigMap's labels and annotations
// claim, without decoding it.
func DescribeConfigMap(cm *corev1.ConfigMap) Info {
	a := cm.Annotations
	info := Info{Name: cm.Name, GenerateName: cm.GenerateName, Namespace: cm.Namespace, EncodedBytes: len(cm.Data[ManifestsKey]),
		Signature: a[metakeys.SignatureAnnotation], SignatureKey: a[metakeys.SignatureKeyAnnotation], IdentitySignature: a[metakeys.IdentitySignatureAnnotation],
		Statement: a[metakeys.StatementAnnotation], StatementSignature: a[metakeys.StatementSignatureAnnotation]}
	if isNative(cm) {
		info.Format = FormatNative
		info.Identity = strategy.Identity{Version: a[metakeys.VersionAnnotation], Registry: a[metakeys.RegistryAnnotation], Identifier: a[metakeys.IdentifierAnnotation]}
		info.Encoding = a[metakeys.EncodingAnnotation]
		info.Digest = a[metakeys.DigestAnnotation]
		if n, err := strconv.Atoi(a[metakeys.DecodedSizeAnnotation]); err == nil {
			info.DecodedBytes = n
		}
	} else {
		info.Format = FormatKubeVirt
		info.Identity = strategy.Identity{Version: a[metakeys.KubeVirtVersionAnnotation], Registry: a[metakeys.KubeVirtRegistryAnnotation], Identifier: a[metakeys.KubeVirtIdentifierAnnotation]}
		// KubeVirt only checks that the annotation is present.
		if _, ok := a[metakeys.KubeVirtEncodingAnnotation]; ok {
			info.Encoding = EncodingGzipBase64
		}
	}
	if info.Encoding == "" {
		info.Encoding = EncodingPlain
	}
	return info
}

func isNative(cm *corev1.ConfigMap) bool {
	_, label := cm.Labels[metakeys.StrategyLabel]
	_, digest := cm.Annotations[metakeys.DigestAnnotation]
	return label || digest
}

func configMapName(cm *corev1.ConfigMap) string {
	name := cm.Name
	if name == "" {
		name = cm.GenerateName + "<generated>"
	}
	if cm.Namespace != "" {
		return cm.Namespace + "/" + name
	}
	return name
}

// DecodeOptions tunes Decode. The zero value is safe.
type DecodeOptions struct {
	// MaxDecodedBytes refuses texts larger than this; 0 means
	// DefaultMaxDecodedBytes.
	MaxDecodedBytes int64
}

// Decode returns the manifests text of a strategy ConfigMap and what it
// found on the way. A native ConfigMap's digest is verified; a mismatch is an
// error wrapping ErrDigestMismatch.
func Decode(cm *corev1.ConfigMap, opts DecodeOptions) ([]byte, Info, error) {
	info := DescribeConfigMap(cm)
	fail := func(step string, offset int64, err error) ([]byte, Info, error) {
		return nil, info, &DecodeError{ConfigMap: configMapName(cm), Step: step, Offset: offset, Err: err}
	}
	raw, ok := cm.Data[ManifestsKey]
	if !ok {
		if _, chunked := cm.Annotations[metakeys.ChunksAnnotation]; chunked {
			return fail("configmap", -1, fmt.Errorf("this is %w (annotation %s): its text is in the chunk ConfigMaps, which only the store reads from the cluster", ErrChunkedHead, metakeys.ChunksAnnotation))
		}
		return fail("configmap", -1, fmt.Errorf("data has no %q key", ManifestsKey))
	}
	limit := opts.MaxDecodedBytes
	if limit <= 0 {
		limit = DefaultMaxDecodedBytes
	}
	var text []byte
	switch info.Encoding {
	case EncodingPlain:
		if int64(len(raw)) > limit {
			return fail("limit", -1, fmt.Errorf("text of %d bytes exceeds the limit of %d bytes", len(raw), limit))
		}
		text = []byte(raw)
	case EncodingGzipBase64:
		compressed, err := decodeBase64(raw)
		if err != nil {
			var off *offsetError
			if errors.As(err, &off) {
				return fail("base64", off.offset, off.err)
			}
			return fail("base64", -1, err)
		}
		text, err = gunzip(compressed, limit)
		if err != nil {
			var lim *limitError
			if errors.As(err, &lim) {
				return fail("limit", -1, err)
			}
			return fail("gzip", -1, err)
		}
	default:
		return fail("configmap", -1, fmt.Errorf("unsupported encoding %q (supported: %s)", info.Encoding, EncodingGzipBase64))
	}
	info.DecodedBytes = len(text)
	if info.Digest != "" {
		if got := Digest(text); got != info.Digest {
			return fail("digest", -1, fmt.Errorf("%w: annotation %s says %s, text hashes to %s", ErrDigestMismatch, metakeys.DigestAnnotation, info.Digest, got))
		}
		info.DigestVerified = true
	} else if info.Format == FormatNative {
		return fail("digest", -1, fmt.Errorf("native strategy ConfigMap has no %s annotation", metakeys.DigestAnnotation))
	}
	return text, info, nil
}

// offsetError carries a byte offset into data.manifests.
type offsetError struct {
	offset int64
	err    error
}

func (e *offsetError) Error() string { return fmt.Sprintf("%v at byte offset %d", e.err, e.offset) }

type limitError struct{ limit int64 }

func (e *limitError) Error() string {
	return fmt.Sprintf("decoded text exceeds the limit of %d bytes (raise it with --max-decoded-size if the strategy is really that large)", e.limit)
}

// isSpace reports the white space tolerated inside base64 text.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// compact removes white space and returns, for each kept byte, nothing but
// the original offsets of the bytes after which white space was removed, so
// offsets can be mapped back.
func compact(s string) ([]byte, []int) {
	out := make([]byte, 0, len(s))
	var origin []int // origin[i] = original offset of out[i], only built when needed
	for i := 0; i < len(s); i++ {
		if isSpace(s[i]) {
			if origin == nil {
				origin = make([]int, len(out), len(s))
				for j := range origin {
					origin[j] = j
				}
			}
			continue
		}
		out = append(out, s[i])
		if origin != nil {
			origin = append(origin, i)
		}
	}
	return out, origin
}
