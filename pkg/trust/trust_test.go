package trust_test

import (
	"bytes"
	"crypto"
	"crypto/elliptic"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

const text = "---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: a\n  namespace: ns\n"

// A signature made by SignDigest over the digest of a text is what cosign
// verify-blob checks: sigstore's own verifier (the code behind `cosign
// verify-blob --key`), loaded from the PEM public key, accepts it over the
// text, and refuses it over a text with one byte changed.
func TestSignatureVerifiesWithSigstoreVerifier(t *testing.T) {
	s, err := trust.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	sig, keyID, err := s.SignDigest(codec.Digest([]byte(text)))
	if err != nil {
		t.Fatal(err)
	}
	if keyID != s.KeyID() || !strings.HasPrefix(keyID, "sha256:") {
		t.Errorf("key id %q", keyID)
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(s.PublicPEM())
	if err != nil {
		t.Fatal(err)
	}
	v, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.VerifySignature(bytes.NewReader(raw), strings.NewReader(text)); err != nil {
		t.Errorf("sigstore verifier refuses our signature: %v", err)
	}
	changed := strings.Replace(text, "name: a", "name: b", 1)
	if err := v.VerifySignature(bytes.NewReader(raw), strings.NewReader(changed)); err == nil {
		t.Error("sigstore verifier accepts the signature over a changed text")
	}
}

// A signature made by sigstore's signer (cosign sign-blob's code) over the
// text verifies with our key ring over the digest.
func TestSigstoreSignatureVerifiesWithKeyRing(t *testing.T) {
	privPEM, pubPEM, err := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), cryptoutils.StaticPasswordFunc([]byte("pw")))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(privPEM, []byte("ENCRYPTED SIGSTORE PRIVATE KEY")) {
		t.Fatalf("not cosign's encrypted format:\n%s", privPEM)
	}
	priv, err := cryptoutils.UnmarshalPEMToPrivateKey(privPEM, cryptoutils.StaticPasswordFunc([]byte("pw")))
	if err != nil {
		t.Fatal(err)
	}
	sv, err := signature.LoadSigner(priv, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := sv.SignMessage(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	var ring trust.KeyRing
	if err := ring.AddPEM("cosign.pub", pubPEM); err != nil {
		t.Fatal(err)
	}
	name, err := ring.Verify(codec.Digest([]byte(text)), base64.StdEncoding.EncodeToString(raw), "")
	if err != nil || name != "cosign.pub" {
		t.Errorf("verify: %q, %v", name, err)
	}
}

// cosign's encrypted key needs its password; plain PKCS#8 needs none; both
// sign what the public key verifies.
func TestParsePrivateKey(t *testing.T) {
	enc, pubPEM, err := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), cryptoutils.StaticPasswordFunc([]byte("secret")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := trust.ParsePrivateKey(enc, []byte("wrong")); err == nil {
		t.Error("an encrypted key opened with the wrong password")
	}
	s, err := trust.ParsePrivateKey(enc, []byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(s.PublicPEM(), pubPEM) {
		t.Errorf("public key of the parsed key differs:\n%s\n%s", s.PublicPEM(), pubPEM)
	}
	plain, err := trust.ParsePrivateKey(s.PrivatePEM(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if plain.KeyID() != s.KeyID() {
		t.Errorf("PKCS#8 round trip changed the key id: %s, %s", plain.KeyID(), s.KeyID())
	}
	if _, err := trust.ParsePrivateKey(pubPEM, nil); err == nil {
		t.Error("a public key parsed as a private key")
	}
	if _, err := trust.ParsePublicKeys(s.PrivatePEM()); err == nil {
		t.Error("a private key accepted as a public key")
	}
}

func TestPolicy(t *testing.T) {
	trusted, _ := trust.GenerateKey()
	other, _ := trust.GenerateKey()
	var ring trust.KeyRing
	if err := ring.AddPEM("trusted.pub", trusted.PublicPEM()); err != nil {
		t.Fatal(err)
	}
	digest := codec.Digest([]byte(text))
	changed := codec.Digest([]byte(text + "#"))
	sig, id, _ := trusted.SignDigest(digest)
	otherSig, otherID, _ := other.SignDigest(digest)
	broken := []byte(sig)
	broken[10] ^= 1
	for _, tc := range []struct {
		name    string
		policy  trust.Policy
		subject trust.Subject
		want    string
		wantErr error
	}{
		{"trusted key", trust.Policy{Keys: &ring}, trust.Subject{Digest: digest, Signature: sig, KeyID: id}, "signed by trusted.pub", nil},
		{"trusted key, no key id", trust.Policy{Keys: &ring}, trust.Subject{Digest: digest, Signature: sig}, "signed by trusted.pub", nil},
		{"untrusted key", trust.Policy{Keys: &ring}, trust.Subject{Digest: digest, Signature: otherSig, KeyID: otherID}, "", trust.ErrUnknownKey},
		{"untrusted key claiming the trusted id", trust.Policy{Keys: &ring}, trust.Subject{Digest: digest, Signature: otherSig, KeyID: id}, "", trust.ErrBadSignature},
		{"broken signature", trust.Policy{Keys: &ring}, trust.Subject{Digest: digest, Signature: string(broken), KeyID: id}, "", trust.ErrBadSignature},
		{"changed byte", trust.Policy{Keys: &ring}, trust.Subject{Digest: changed, Signature: sig, KeyID: id}, "", trust.ErrBadSignature},
		{"unsigned", trust.Policy{Keys: &ring}, trust.Subject{Digest: digest}, "", trust.ErrUnsigned},
		{"no keys at all", trust.Policy{}, trust.Subject{Digest: digest, Signature: sig}, "", trust.ErrUnknownKey},
		{"pinned digest, no key", trust.Policy{Pinned: digest}, trust.Subject{Digest: digest}, "pinned digest", nil},
		{"pinned digest, other text", trust.Policy{Pinned: digest}, trust.Subject{Digest: changed}, "", trust.ErrDigestNotPinned},
		{"pinned digest, other text, trusted signature", trust.Policy{Keys: &ring, Pinned: digest}, trust.Subject{Digest: digest, Signature: sig, KeyID: id}, "signed by trusted.pub", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.policy.Check(tc.subject)
			if tc.wantErr == nil {
				if err != nil || got != tc.want {
					t.Fatalf("Check = %q, %v; want %q", got, err, tc.want)
				}
				return
			}
			var ue *trust.UntrustedError
			if !errors.As(err, &ue) || !errors.Is(err, tc.wantErr) {
				t.Fatalf("Check = %q, %v; want an UntrustedError wrapping %v", got, err, tc.wantErr)
			}
		})
	}
}
