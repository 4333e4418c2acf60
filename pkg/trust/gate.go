package trust

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// Gate is the one way into a strategy ConfigMap that someone other than
// the caller could have written. Its order is fixed: size bounds, then the
// policy over what the metadata claims (a signature over the recorded
// digest, or a pinned digest), then the bounded decode, then the policy
// over the digest of the decoded text, and only then the parse. A refusal
// before the decode costs nothing but the metadata; a refusal after it
// costs at most the decode limit. The zero value trusts nothing.
type Gate struct {
	// Policy decides trust (Policy.Check; its semantics are the gate's).
	Policy Policy
	// MaxEncodedBytes bounds data.manifests; 0 means
	// codec.ObjectSizeLimit, what one ConfigMap can hold. A strategy
	// assembled from chunks may need more (the store bounds its chunks).
	MaxEncodedBytes int
	// Decode and Parse tune the decode and the parse.
	Decode codec.DecodeOptions
	Parse  strategy.ParseOptions
}

// Verified is a strategy whose trust was decided before it was parsed.
type Verified struct {
	Strategy *strategy.Strategy
	// Text is the decoded manifests text and Digest its "sha256:" digest,
	// computed from the text.
	Text   []byte
	Digest string
	// VerifiedBy says who vouched for it (Policy.Check's answer: "signed
	// by <key>" or "pinned digest").
	VerifiedBy string
	// Statement is the signed statement that vouched for it (nil for a
	// pinned digest, or a policy without Expect).
	Statement *Statement
	Info      codec.Info
	Warnings  []strategy.Warning
}

// RefusedError says that an input was refused before its trust could be
// decided: it is too large, or does not decode. Trust refusals are
// *UntrustedError.
type RefusedError struct {
	// Step is "size", "decode" or "parse".
	Step string
	Err  error
}

func (e *RefusedError) Error() string { return "refused at " + e.Step + ": " + e.Err.Error() }

func (e *RefusedError) Unwrap() error { return e.Err }

// ErrTooLarge is wrapped by the error of an input above a size bound.
var ErrTooLarge = errors.New("too large")

// Admit decides from a strategy ConfigMap's metadata alone whether its
// text may be read at all: a recorded digest must be signed by a trusted
// key (with the statement the policy expects, naming the identity the
// ConfigMap claims) or be the pinned digest; a
// ConfigMap that records no digest (KubeVirt's form) must carry a
// signature or the policy must pin a digest. With a pinned digest an
// unchunked ConfigMap is admitted whatever it records, so Open can tell a
// recorded digest that lies about the text (a decode error) from another
// text; a chunked head (metakeys.ChunksAnnotation) is not, since
// reading it means fetching its chunks. Admission is not trust: Open
// decides again on the digest of the decoded text. The error is an
// *UntrustedError.
func (g Gate) Admit(meta *metav1.ObjectMeta) error {
	info := codec.DescribeConfigMap(&corev1.ConfigMap{ObjectMeta: *meta})
	s := Subject{Digest: info.Digest, Signature: info.Signature, KeyID: info.SignatureKey,
		Statement: info.Statement, StatementSignature: info.StatementSignature, Identity: &info.Identity}
	if info.Digest == "" && (info.Signature != "" || g.Policy.Pinned != "") {
		// Only the text's digest can tell.
		return nil
	}
	_, err := g.Policy.Check(s)
	if _, chunked := meta.Annotations[metakeys.ChunksAnnotation]; err != nil && g.Policy.Pinned != "" && !chunked {
		return nil
	}
	return err
}

// Open reads a strategy ConfigMap (a chunked one already assembled) through
// the gate: size bounds, Admit, the bounded decode (which verifies a
// recorded digest), the policy over the text's digest, then the parse. The
// error is an *UntrustedError or a *RefusedError.
func (g Gate) Open(cm *corev1.ConfigMap) (*Verified, error) {
	maxEncoded := g.MaxEncodedBytes
	if maxEncoded <= 0 {
		maxEncoded = codec.ObjectSizeLimit
	}
	if n := len(cm.Data[codec.ManifestsKey]); n > maxEncoded {
		return nil, &RefusedError{Step: "size", Err: fmt.Errorf("%w: data.%s is %d bytes, the bound is %d", ErrTooLarge, codec.ManifestsKey, n, maxEncoded)}
	}
	if err := g.Admit(&cm.ObjectMeta); err != nil {
		return nil, err
	}
	text, info, err := codec.Decode(cm, g.Decode)
	if err != nil {
		return nil, &RefusedError{Step: "decode", Err: err}
	}
	v := &Verified{Text: text, Digest: codec.Digest(text), Info: info}
	d, err := g.Policy.Decide(Subject{Digest: v.Digest, Signature: info.Signature, KeyID: info.SignatureKey,
		Statement: info.Statement, StatementSignature: info.StatementSignature, Identity: &info.Identity})
	if err != nil {
		return nil, err
	}
	v.VerifiedBy, v.Statement = d.VerifiedBy, d.Statement
	if v.Strategy, v.Warnings, err = strategy.Parse(text, g.Parse); err != nil {
		return nil, &RefusedError{Step: "parse", Err: fmt.Errorf("manifests: %w", err)}
	}
	v.Strategy.Identity = info.Identity
	return v, nil
}
