package trust

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"k8s.io/apimachinery/pkg/util/version"
)

// ErrIdentityMismatch: a strategy's signature verifies, but the identity
// it was signed for (product, version, text digest) is not the one asked
// for or the one the strategy carries.
var ErrIdentityMismatch = errors.New("signed identity does not match")

// ErrDowngrade: the strategy's version is older than the one deployed, and
// the downgrade was not asked for.
var ErrDowngrade = errors.New("downgrade refused")

// Statement is what an identity-bound signature says of a strategy: which
// product and version it is, for which registry and deployment identifier,
// and the digest of its decoded manifests text. Signing a statement, not
// only the bytes, keeps a signed strategy from being offered as another
// product or another version of the same product.
type Statement struct {
	// Product names the product, e.g. "kubevirt".
	Product string `json:"product"`
	// Version is the product version, e.g. "v1.9.0".
	Version string `json:"version"`
	// Registry and Identifier are the strategy's registry and deployment
	// identifier ("" when it has none).
	Registry   string `json:"registry,omitempty"`
	Identifier string `json:"identifier,omitempty"`
	// Digest is "sha256:<hex>" of the decoded manifests text.
	Digest string `json:"digest"`
}

// Expect is what an installation asks of a statement. Empty fields ask
// nothing.
type Expect struct {
	// Product is the product the installation installs; "" asks nothing
	// unless ProductBound.
	Product string
	// ProductBound asks for Product even when it is "": a statement must
	// then name no product (the product deployed named none).
	ProductBound bool
	// Version is the version it asks for; "" accepts any version (a
	// tracked tag or ConfigMap), subject to Deployed.
	Version string
	// Digest is the digest of the text that was read; a statement for
	// another text does not describe it.
	Digest string
	// Deployed is the version deployed now: a statement for an older
	// semantic version is a downgrade, refused unless AllowDowngrade or
	// Version names it.
	Deployed string
	// AllowDowngrade accepts a version older than Deployed.
	AllowDowngrade bool
}

// Check returns nil when the statement is what e asks for, else an error
// wrapping ErrIdentityMismatch or ErrDowngrade that names the field.
func (s Statement) Check(e Expect) error {
	var bad []string
	if (e.Product != "" || e.ProductBound) && s.Product != e.Product {
		bad = append(bad, fmt.Sprintf("product %q, want %q", s.Product, e.Product))
	}
	if e.Version != "" && s.Version != e.Version {
		bad = append(bad, fmt.Sprintf("version %q, want %q", s.Version, e.Version))
	}
	if e.Digest != "" && s.Digest != e.Digest {
		bad = append(bad, fmt.Sprintf("text digest %s, the text read hashes to %s", s.Digest, e.Digest))
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: signed for %s", ErrIdentityMismatch, strings.Join(bad, ", "))
	}
	if e.Version == "" && !e.AllowDowngrade && isDowngrade(e.Deployed, s.Version) {
		return fmt.Errorf("%w: %s is older than the deployed %s (allow it with spec.allowDowngrade, or name the version in spec.version)", ErrDowngrade, s.Version, e.Deployed)
	}
	return nil
}

// isDowngrade reports whether target is an older semantic version than
// deployed. Versions that are not semantic versions (with or without a
// leading "v") cannot be ordered and are never a downgrade.
func isDowngrade(deployed, target string) bool {
	if deployed == "" || target == "" {
		return false
	}
	d, err := version.ParseSemantic(deployed)
	if err != nil {
		return false
	}
	t, err := version.ParseSemantic(target)
	if err != nil {
		return false
	}
	return t.LessThan(d)
}

// ErrNoStatement: the strategy is signed, but carries no signed statement
// of what it is, so the signature says nothing of its product or version.
var ErrNoStatement = errors.New("signed without a statement of its product and version")

// DigestSigner signs a "sha256:" digest (a *Signer, or a store's signer).
type DigestSigner interface {
	SignDigest(digest string) (signature, keyID string, err error)
}

// StatementOf is the statement a strategy ConfigMap's annotations claim
// (native or KubeVirt keys), for the text digest.
func StatementOf(annotations map[string]string, digest string) Statement {
	pick := func(native, kubevirt string) string {
		if v := annotations[native]; v != "" {
			return v
		}
		return annotations[kubevirt]
	}
	return Statement{
		Product:    annotations[metakeys.ProductAnnotation],
		Version:    pick(metakeys.VersionAnnotation, metakeys.KubeVirtVersionAnnotation),
		Registry:   pick(metakeys.RegistryAnnotation, metakeys.KubeVirtRegistryAnnotation),
		Identifier: pick(metakeys.IdentifierAnnotation, metakeys.KubeVirtIdentifierAnnotation),
		Digest:     digest,
	}
}

// SignStatement puts st and its signature by s into annotations
// (metakeys.StatementAnnotation and metakeys.StatementSignatureAnnotation),
// replacing earlier ones.
func SignStatement(annotations map[string]string, st Statement, s DigestSigner) error {
	body, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("statement: %w", err)
	}
	sum := sha256.Sum256(body)
	sig, _, err := s.SignDigest("sha256:" + hex.EncodeToString(sum[:]))
	if err != nil {
		return fmt.Errorf("sign statement: %w", err)
	}
	annotations[metakeys.StatementAnnotation] = string(body)
	annotations[metakeys.StatementSignatureAnnotation] = sig
	return nil
}

// VerifyStatement checks a signed statement (the annotations' values) with
// the keys of ring and returns it with the name of the key that verified.
// No statement is ErrNoStatement.
func VerifyStatement(statement, signature string, ring *KeyRing) (Statement, string, error) {
	if statement == "" {
		return Statement{}, "", ErrNoStatement
	}
	sum := sha256.Sum256([]byte(statement))
	key, err := ring.Verify("sha256:"+hex.EncodeToString(sum[:]), signature, "")
	if err != nil {
		return Statement{}, "", fmt.Errorf("statement: %w", err)
	}
	var st Statement
	if err := json.Unmarshal([]byte(statement), &st); err != nil {
		return Statement{}, "", fmt.Errorf("statement: %w: %w", ErrBadSignature, err)
	}
	return st, key, nil
}
