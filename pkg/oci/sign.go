package oci

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/signature/payload"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// What cosign writes for a keyed image signature.
const (
	// simpleSigningMediaType is the media type of a signature layer: the
	// signed payload.
	simpleSigningMediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	// signatureAnnotation holds the base64 signature on a signature layer.
	signatureAnnotation = "dev.cosignproject.cosign/signature"
	// maxPayloadBytes bounds a signature payload read from a registry.
	maxPayloadBytes = 1 << 20
)

// SignatureTag is the tag cosign keeps an artifact's signatures under:
// "sha256-<hex>.sig" for digest "sha256:<hex>".
func SignatureTag(digest string) string { return strings.Replace(digest, ":", "-", 1) + ".sig" }

// statementKeys are the payload's optional keys of a trust.Statement's
// fields (the artifact annotations' keys).
var statementKeys = struct{ product, version, registry, identifier, digest string }{
	metakeys.ProductAnnotation, metakeys.VersionAnnotation, metakeys.RegistryAnnotation,
	metakeys.IdentifierAnnotation, metakeys.DigestAnnotation,
}

// StatementOf is the statement an artifact's annotations claim.
func StatementOf(a *Artifact) trust.Statement {
	m := a.Meta
	return trust.Statement{Product: m.Product, Version: m.Version, Registry: m.Registry, Identifier: m.Identifier, Digest: codec.Digest(a.Text)}
}

// Payload is the cosign simple-signing payload of a signature over the
// artifact digest in repository, with st in its optional section.
func Payload(repository, digest string, st trust.Statement) ([]byte, error) {
	d, err := name.NewDigest(repository + "@" + digest)
	if err != nil {
		return nil, fmt.Errorf("signature payload: %w", err)
	}
	opt := map[string]any{
		statementKeys.product: st.Product,
		statementKeys.version: st.Version,
		statementKeys.digest:  st.Digest,
	}
	if st.Registry != "" {
		opt[statementKeys.registry] = st.Registry
	}
	if st.Identifier != "" {
		opt[statementKeys.identifier] = st.Identifier
	}
	return json.Marshal(payload.Cosign{Image: d, Annotations: opt})
}

// Sign signs the artifact a (which must come from Pull or Push's
// reference) with s: a simple-signing payload naming its digest and its
// statement, added to the signature image of its repository (the
// signatures already there are kept; the same signature twice is
// written once).
func (c *Client) Sign(ctx context.Context, a *Artifact, s *trust.Signer) (Signature, error) {
	body, err := Payload(a.Repository, a.Digest, StatementOf(a))
	if err != nil {
		return Signature{}, err
	}
	// Signatures are randomised: one of this key over the same payload
	// is already the signature.
	have, err := c.Signatures(ctx, a)
	if err != nil {
		return Signature{}, err
	}
	own := &trust.KeyRing{}
	if err := own.Add("signer", s.Public()); err != nil {
		return Signature{}, err
	}
	for _, h := range have {
		if string(h.Payload) == string(body) {
			if _, err := Verify([]Signature{h}, a.Digest, own); err == nil {
				return h, nil
			}
		}
	}
	sum := sha256.Sum256(body)
	sig, _, err := s.SignDigest("sha256:" + hex.EncodeToString(sum[:]))
	if err != nil {
		return Signature{}, err
	}
	return Signature{Payload: body, Signature: sig}, c.AddSignatures(ctx, a.Repository, a.Digest, []Signature{{Payload: body, Signature: sig}})
}

// AddSignatures adds signatures (made elsewhere, or read from another
// registry) to the signature image of digest in repository, as cosign
// attach does; signatures already there are not written again.
func (c *Client) AddSignatures(ctx context.Context, repository, digest string, sigs []Signature) error {
	repo, err := name.NewRepository(repository, c.nameOpts()...)
	if err != nil {
		return fmt.Errorf("%s: %w", repository, err)
	}
	tag := repo.Tag(SignatureTag(digest))
	ref := Scheme + tag.String()
	opts := c.remote(ctx)
	base, have, err := c.signatureImage(ctx, tag)
	if err != nil {
		return err
	}
	if base == nil {
		base = mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	}
	added := 0
	for _, s := range sigs {
		if have[s.key()] {
			continue
		}
		have[s.key()] = true
		base, err = mutate.Append(base, mutate.Addendum{Layer: static.NewLayer(s.Payload, simpleSigningMediaType),
			Annotations: map[string]string{signatureAnnotation: s.Signature}})
		if err != nil {
			return fmt.Errorf("%s: sign: %w", ref, err)
		}
		added++
	}
	if added == 0 {
		return nil
	}
	if err := remote.Write(tag, base, opts...); err != nil {
		return refError(ref, "push signature", err)
	}
	return nil
}

func (c *Client) nameOpts() []name.Option {
	if c.opts.Insecure {
		return []name.Option{name.Insecure}
	}
	return nil
}

// Signature is one signature layer: the payload and its base64 signature.
type Signature struct {
	Payload   []byte
	Signature string
}

func (s Signature) key() string { return string(s.Payload) + "\x00" + s.Signature }

// signatureImage reads the signature image at tag and the signatures it
// holds; a missing one is (nil, empty, nil).
func (c *Client) signatureImage(ctx context.Context, tag name.Tag) (v1.Image, map[string]bool, error) {
	have := map[string]bool{}
	sigs, img, err := c.readSignatures(ctx, tag)
	if errors.Is(err, ErrNotFound) {
		return nil, have, nil
	}
	if err != nil {
		return nil, nil, err
	}
	for _, s := range sigs {
		have[s.key()] = true
	}
	return img, have, nil
}

// Signatures returns the signatures stored for the artifact a, unverified;
// none is an empty list, not an error.
func (c *Client) Signatures(ctx context.Context, a *Artifact) ([]Signature, error) {
	repo, err := name.NewRepository(a.Repository, c.nameOpts()...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", a.Repository, err)
	}
	sigs, _, err := c.readSignatures(ctx, repo.Tag(SignatureTag(a.Digest)))
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	return sigs, err
}

func (c *Client) readSignatures(ctx context.Context, tag name.Tag) ([]Signature, v1.Image, error) {
	ref := Scheme + tag.String()
	opts := c.remote(ctx)
	img, err := remote.Image(tag, opts...)
	if err != nil {
		return nil, nil, refError(ref, "pull signatures", err)
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, nil, refError(ref, "pull signatures", err)
	}
	var layers []v1.Descriptor
	for _, l := range m.Layers {
		if l.MediaType == simpleSigningMediaType && l.Annotations[signatureAnnotation] != "" {
			layers = append(layers, l)
		}
	}
	if len(layers) > MaxSignatures {
		return nil, nil, fmt.Errorf("%s: %w", ref, &trust.RefusedError{Step: "size",
			Err: fmt.Errorf("%w: %d signatures, the bound is %d", trust.ErrTooLarge, len(layers), MaxSignatures)})
	}
	var out []Signature
	for _, l := range layers {
		body, err := c.readBlob(ctx, ref, tag.Context(), l, maxPayloadBytes)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, Signature{Payload: body, Signature: l.Annotations[signatureAnnotation]})
	}
	return out, img, nil
}

// Verified is a signature that verified with a trusted key and names the
// artifact's digest.
type Verified struct {
	// Key names the trusted key that verified it.
	Key string
	// Statement is what the payload's optional section says.
	Statement trust.Statement
}

// Verify returns the signatures of sigs that a key of ring verifies and
// that name digest, with their statements. When none does, the error
// wraps trust.ErrUnsigned (no signatures), trust.ErrUnknownKey or
// trust.ErrBadSignature, and says how many were tried.
func Verify(sigs []Signature, digest string, ring *trust.KeyRing) ([]Verified, error) {
	if len(sigs) == 0 {
		return nil, fmt.Errorf("%w (no %s)", trust.ErrUnsigned, SignatureTag(digest))
	}
	var out []Verified
	var errs []error
	for i, s := range sigs {
		sum := sha256.Sum256(s.Payload)
		key, err := ring.Verify("sha256:"+hex.EncodeToString(sum[:]), s.Signature, "")
		if err != nil {
			errs = append(errs, fmt.Errorf("signature %d: %w", i+1, err))
			continue
		}
		var p payload.SimpleContainerImage
		if err := json.Unmarshal(s.Payload, &p); err != nil {
			errs = append(errs, fmt.Errorf("signature %d: payload: %w: %w", i+1, trust.ErrBadSignature, err))
			continue
		}
		if p.Critical.Type != payload.CosignSignatureType || p.Critical.Image.DockerManifestDigest != digest {
			errs = append(errs, fmt.Errorf("signature %d: %w: signs %s (%q), not %s", i+1, trust.ErrBadSignature, p.Critical.Image.DockerManifestDigest, p.Critical.Type, digest))
			continue
		}
		str := func(k string) string { v, _ := p.Optional[k].(string); return v }
		out = append(out, Verified{Key: key, Statement: trust.Statement{Product: str(statementKeys.product), Version: str(statementKeys.version),
			Registry: str(statementKeys.registry), Identifier: str(statementKeys.identifier), Digest: str(statementKeys.digest)}})
	}
	if len(out) == 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// Check is the trust policy of an artifact: one of its verified
// signatures must bind it to what e asks (see trust.Statement.Check) and
// to what its own annotations claim. The error is a *trust.UntrustedError.
func Check(a *Artifact, verified []Verified, e trust.Expect) (Verified, error) {
	return CheckClaims(StatementOf(a), verified, e)
}

// CheckClaims is Check of an artifact that claims claims (a chart's: its
// expected product, its version, its archive's digest).
func CheckClaims(claims trust.Statement, verified []Verified, e trust.Expect) (Verified, error) {
	var errs []error
	for _, v := range verified {
		if v.Statement != claims {
			errs = append(errs, fmt.Errorf("%w: signed by %s for %s, the artifact claims %s", trust.ErrIdentityMismatch, v.Key, describe(v.Statement), describe(claims)))
			continue
		}
		if err := v.Statement.Check(e); err != nil {
			errs = append(errs, fmt.Errorf("signed by %s: %w", v.Key, err))
			continue
		}
		return v, nil
	}
	if len(errs) == 0 {
		errs = append(errs, trust.ErrUnsigned)
	}
	return Verified{}, &trust.UntrustedError{Err: errors.Join(errs...)}
}

func describe(s trust.Statement) string {
	return fmt.Sprintf("%s %s (identifier %q, text %s)", s.Product, s.Version, s.Identifier, s.Digest)
}
