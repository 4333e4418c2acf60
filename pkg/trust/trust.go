// Package trust owns who may decide what a strategy contains: keyed
// signatures over a strategy's decoded manifests text, the keys they are
// made and checked with, and the policy that says whether a strategy may be
// applied.
//
// The signature scheme is cosign's keyed signature of a blob: ECDSA P-256
// over the SHA-256 of the decoded manifests text, ASN.1 encoded, then
// standard base64. The SHA-256 of the text is what the native form records
// as its digest (codec.Digest), so a signature over the digest is a
// signature over the text, and `cosign verify-blob --key cosign.pub
// --signature <(annotation) manifests.yaml` accepts it. Keys are PEM:
// public keys as "PUBLIC KEY" (PKIX), private keys as PKCS#8 "PRIVATE KEY",
// SEC 1 "EC PRIVATE KEY" or cosign's password-encrypted "ENCRYPTED SIGSTORE
// PRIVATE KEY" (what `cosign generate-key-pair` writes).
//
// The signature and the id of the key that made it are kept in the
// annotations metakeys.SignatureAnnotation and
// metakeys.SignatureKeyAnnotation of the strategy ConfigMap (the head of
// a chunked one).
package trust

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// Errors a verification wraps, so callers can say what failed.
var (
	// ErrUnsigned: the strategy carries no signature.
	ErrUnsigned = errors.New("not signed")
	// ErrUnknownKey: the signature names (or matches) no trusted key.
	ErrUnknownKey = errors.New("signed by a key that is not trusted")
	// ErrBadSignature: the signature does not verify against the key it
	// names, or is not a signature at all.
	ErrBadSignature = errors.New("signature does not verify")
)

// keyID identifies a public key: "sha256:" and the hex SHA-256 of its PKIX
// DER encoding (what `openssl pkey -pubin -outform der | sha256sum` prints).
func keyID(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("key id: %w", err)
	}
	sum := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// Signer signs strategies with an ECDSA P-256 private key.
type Signer struct {
	key *ecdsa.PrivateKey
	id  string
}

// GenerateKey returns a signer with a new ECDSA P-256 key.
func GenerateKey() (*Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate signing key: %w", err)
	}
	return newSigner(key)
}

func newSigner(key *ecdsa.PrivateKey) (*Signer, error) {
	if key.Curve != elliptic.P256() {
		return nil, fmt.Errorf("signing key: curve %s, want P-256", key.Curve.Params().Name)
	}
	id, err := keyID(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	return &Signer{key: key, id: id}, nil
}

// ParsePrivateKey reads a PEM private key: PKCS#8 "PRIVATE KEY", SEC 1 "EC
// PRIVATE KEY", or cosign's "ENCRYPTED SIGSTORE PRIVATE KEY", which needs
// password (cosign's COSIGN_PASSWORD; it may be empty). The key must be
// ECDSA P-256.
func ParsePrivateKey(data, password []byte) (*Signer, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("private key: no PEM block found")
	}
	pf := func(bool) ([]byte, error) { return password, nil }
	key, err := cryptoutils.UnmarshalPEMToPrivateKey(data, pf)
	if err != nil {
		return nil, fmt.Errorf("private key (PEM %q): %w", block.Type, err)
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("private key (PEM %q): %T, want an ECDSA P-256 key", block.Type, key)
	}
	return newSigner(ec)
}

// keyID is the id of the signer's public key (see keyID).
func (s *Signer) KeyID() string { return s.id }

// Public is the signer's public key.
func (s *Signer) Public() *ecdsa.PublicKey { return &s.key.PublicKey }

// PublicPEM is the signer's public key as a "PUBLIC KEY" PEM block.
func (s *Signer) PublicPEM() []byte {
	out, err := cryptoutils.MarshalPublicKeyToPEM(&s.key.PublicKey)
	if err != nil {
		panic(fmt.Sprintf("marshal an ECDSA public key: %v", err)) // cannot happen for P-256
	}
	return out
}

// PrivatePEM is the signer's private key as an unencrypted PKCS#8 "PRIVATE
// KEY" PEM block.
func (s *Signer) PrivatePEM() []byte {
	out, err := cryptoutils.MarshalPrivateKeyToPEM(s.key)
	if err != nil {
		panic(fmt.Sprintf("marshal an ECDSA private key: %v", err)) // cannot happen for P-256
	}
	return out
}

// SignDigest signs a "sha256:<hex>" digest of a manifests text and returns
// the base64 signature (cosign's format) and the key id.
func (s *Signer) SignDigest(digest string) (signature, keyID string, err error) {
	sum, err := digestBytes(digest)
	if err != nil {
		return "", "", fmt.Errorf("sign: %w", err)
	}
	sig, err := ecdsa.SignASN1(rand.Reader, s.key, sum)
	if err != nil {
		return "", "", fmt.Errorf("sign: %w", err)
	}
	return base64.StdEncoding.EncodeToString(sig), s.id, nil
}

func digestBytes(digest string) ([]byte, error) {
	hexSum, ok := strings.CutPrefix(digest, "sha256:")
	if !ok {
		return nil, fmt.Errorf("digest %q is not sha256:<hex>", digest)
	}
	sum, err := hex.DecodeString(hexSum)
	if err != nil || len(sum) != sha256.Size {
		return nil, fmt.Errorf("digest %q is not sha256:<64 hex digits>", digest)
	}
	return sum, nil
}

// ParsePublicKeys reads every "PUBLIC KEY" PEM block of data (other blocks
// are an error, so a private key pasted by mistake is noticed). Every key
// must be ECDSA P-256.
func ParsePublicKeys(data []byte) ([]*ecdsa.PublicKey, error) {
	var out []*ecdsa.PublicKey
	rest := data
	for n := 1; ; n++ {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != string(cryptoutils.PublicKeyPEMType) {
			return nil, fmt.Errorf("public key %d: PEM block %q, want %q", n, block.Type, cryptoutils.PublicKeyPEMType)
		}
		pub, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("public key %d: %w", n, err)
		}
		ec, ok := pub.(*ecdsa.PublicKey)
		if !ok || ec.Curve != elliptic.P256() {
			return nil, fmt.Errorf("public key %d: %T, want an ECDSA P-256 key", n, pub)
		}
		out = append(out, ec)
	}
	if len(out) == 0 {
		return nil, errors.New("public keys: no PEM block found")
	}
	return out, nil
}

// KeyRing is a set of trusted public keys, each with a name that says where
// it came from (shown when a strategy is accepted). The zero value trusts
// nothing.
type KeyRing struct {
	keys  map[string]*ecdsa.PublicKey
	names map[string]string
}

// Add trusts a public key under a name; adding a key twice keeps the first
// name.
func (k *KeyRing) Add(name string, pub *ecdsa.PublicKey) error {
	id, err := keyID(pub)
	if err != nil {
		return err
	}
	if k.keys == nil {
		k.keys, k.names = map[string]*ecdsa.PublicKey{}, map[string]string{}
	}
	if _, ok := k.keys[id]; !ok {
		k.keys[id], k.names[id] = pub, name
	}
	return nil
}

// AddPEM trusts every public key of a PEM file under name (a suffix "#n"
// tells several keys of one file apart).
func (k *KeyRing) AddPEM(name string, data []byte) error {
	keys, err := ParsePublicKeys(data)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	for i, pub := range keys {
		n := name
		if len(keys) > 1 {
			n = fmt.Sprintf("%s#%d", name, i+1)
		}
		if err := k.Add(n, pub); err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
	}
	return nil
}

// Len is the number of trusted keys.
func (k *KeyRing) Len() int {
	if k == nil {
		return 0
	}
	return len(k.keys)
}

// Verify checks a base64 signature over a "sha256:<hex>" digest. With a
// keyID only that key is tried, else every trusted key. It returns the name
// of the key that verified; the error wraps ErrUnsigned, ErrUnknownKey or
// ErrBadSignature.
func (k *KeyRing) Verify(digest, signature, keyID string) (string, error) {
	if signature == "" {
		return "", ErrUnsigned
	}
	sum, err := digestBytes(digest)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrBadSignature, err)
	}
	sig, err := base64.StdEncoding.DecodeString(strings.TrimSpace(signature))
	if err != nil {
		return "", fmt.Errorf("%w: signature is not base64: %w", ErrBadSignature, err)
	}
	if k == nil || len(k.keys) == 0 {
		return "", fmt.Errorf("%w (no key is trusted)", ErrUnknownKey)
	}
	if keyID != "" {
		pub, ok := k.keys[keyID]
		if !ok {
			return "", fmt.Errorf("%w: key %s", ErrUnknownKey, keyID)
		}
		if !ecdsa.VerifyASN1(pub, sum, sig) {
			return "", fmt.Errorf("%w with key %s (%s)", ErrBadSignature, k.names[keyID], keyID)
		}
		return k.names[keyID], nil
	}
	for _, id := range slices.Sorted(maps.Keys(k.keys)) {
		if ecdsa.VerifyASN1(k.keys[id], sum, sig) {
			return k.names[id], nil
		}
	}
	return "", fmt.Errorf("%w: no trusted key verifies it", ErrUnknownKey)
}

// Sign puts a signature over digest (the "sha256:" digest of the decoded
// manifests text) into a strategy ConfigMap's annotations, and a signed
// statement of the identity they claim (StatementOf, SignStatement),
// replacing any earlier ones.
func Sign(annotations map[string]string, digest string, s *Signer) error {
	sig, id, err := s.SignDigest(digest)
	if err != nil {
		return err
	}
	annotations[metakeys.SignatureAnnotation] = sig
	annotations[metakeys.SignatureKeyAnnotation] = id
	return SignStatement(annotations, StatementOf(annotations, digest), s)
}
