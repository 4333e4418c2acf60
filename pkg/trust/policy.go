package trust

import (
	"errors"
	"fmt"

	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// ErrDigestNotPinned: the strategy has no trusted signature, and the digest
// its text hashes to is not the one pinned.
var ErrDigestNotPinned = errors.New("digest does not match the pinned digest")

// Policy decides whether a strategy may be applied: it must be signed by a
// key of Keys, or its text must hash to Pinned. The zero value trusts
// nothing.
type Policy struct {
	// Keys are the trusted public keys.
	Keys *KeyRing
	// Pinned is a "sha256:<hex>" digest of the decoded manifests text that
	// is accepted without a signature; "" pins nothing.
	Pinned string
	// Expect, when set, is what a signed strategy's signed statement must
	// say (product, version, no downgrade; its digest is the subject's):
	// a signature alone binds content, not identity. A pinned digest
	// needs no statement.
	Expect *Expect
}

// Subject is what a policy judges: the digest of a strategy's decoded text
// (computed from the text, never taken from an annotation unchecked) and
// the signature annotations of its ConfigMap.
type Subject struct {
	// Digest is "sha256:<hex>" of the decoded text.
	Digest string
	// Signature and keyID are the ConfigMap's signature annotations.
	Signature, KeyID string
	// Statement and StatementSignature are its signed statement
	// annotations.
	Statement, StatementSignature string
	// Identity, when set, is the identity the ConfigMap claims (version,
	// registry, identifier: what it will be applied as): a signed
	// statement must name the same, so a statement signed for one
	// identity does not vouch for a ConfigMap claiming another. Nil
	// asks nothing.
	Identity *strategy.Identity
}

// Decision is how a policy trusts a subject.
type Decision struct {
	// VerifiedBy is "signed by <key name>" or "pinned digest".
	VerifiedBy string
	// Statement is the signed statement that vouched for the subject,
	// when a signature did and the policy asked for one (Expect set); nil
	// for a pinned digest.
	Statement *Statement
}

// UntrustedError says why a strategy may not be applied.
type UntrustedError struct {
	// Err wraps ErrUnsigned, ErrUnknownKey, ErrBadSignature or
	// ErrDigestNotPinned; with a pinned digest, also the signature's error.
	Err error
}

func (e *UntrustedError) Error() string { return "untrusted strategy: " + e.Err.Error() }

func (e *UntrustedError) Unwrap() error { return e.Err }

// Check returns how the subject is trusted ("signed by <key name>" or
// "pinned digest"), or an *UntrustedError.
func (p Policy) Check(s Subject) (string, error) {
	d, err := p.Decide(s)
	return d.VerifiedBy, err
}

// Decide is Check with the signed statement that vouched, or an
// *UntrustedError.
func (p Policy) Decide(s Subject) (Decision, error) {
	name, sigErr := p.Keys.Verify(s.Digest, s.Signature, s.KeyID)
	var st *Statement
	if sigErr == nil && p.Expect != nil {
		st, sigErr = p.checkStatement(s)
	}
	if sigErr == nil {
		return Decision{VerifiedBy: "signed by " + name, Statement: st}, nil
	}
	if p.Pinned != "" {
		if s.Digest == p.Pinned {
			return Decision{VerifiedBy: "pinned digest"}, nil
		}
		return Decision{}, &UntrustedError{Err: fmt.Errorf("%w: the text hashes to %s, %s is pinned; and %w", ErrDigestNotPinned, s.Digest, p.Pinned, sigErr)}
	}
	return Decision{}, &UntrustedError{Err: fmt.Errorf("%w, and no digest is pinned", sigErr)}
}

// checkStatement requires a signed statement by a key of the policy that
// describes the subject (its text, and the identity it claims when
// known) and is what Expect asks for.
func (p Policy) checkStatement(s Subject) (*Statement, error) {
	st, _, err := VerifyStatement(s.Statement, s.StatementSignature, p.Keys)
	if err != nil {
		return nil, err
	}
	e := *p.Expect
	e.Digest = s.Digest
	if err := st.Check(e); err != nil {
		return nil, err
	}
	if id := s.Identity; id != nil && (st.Version != id.Version || st.Registry != id.Registry || st.Identifier != id.Identifier) {
		return nil, fmt.Errorf("%w: signed for version %q registry %q identifier %q, the configmap claims version %q registry %q identifier %q",
			ErrIdentityMismatch, st.Version, st.Registry, st.Identifier, id.Version, id.Registry, id.Identifier)
	}
	return &st, nil
}
