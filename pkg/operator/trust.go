package operator

import (
	"context"
	"errors"
	"fmt"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// errKeyNotLoaded: a stored strategy was judged before the operator's key
// was read (cannot happen in the stages, which read it first).
var errKeyNotLoaded = errors.New("the operator's signing key is not loaded yet")

// operatorKey reads the operator's signing key (creating it on first
// start) and keeps it; keyWatches replaces it when the key Secret changes
// (a rotated or revoked key counts without a restart) and marks it to be
// read again when the Secret is deleted.
func (r *Reconciler) operatorKey(ctx context.Context) (*trust.OperatorKey, error) {
	r.keyMu.Lock()
	defer r.keyMu.Unlock()
	if r.key != nil && !r.keyStale {
		return r.key, nil
	}
	k, err := trust.EnsureOperatorKey(ctx, r.kube, r.opts.KeyNamespace)
	if err != nil {
		return nil, err
	}
	r.key, r.keyStale = k, false
	return k, nil
}

func (r *Reconciler) loadedKey() *trust.OperatorKey {
	r.keyMu.Lock()
	defer r.keyMu.Unlock()
	return r.key
}

// operatorSigner signs what the operator's store publishes with the
// operator's key.
type operatorSigner struct{ r *Reconciler }

func (s operatorSigner) SignDigest(digest string) (string, string, error) {
	k := s.r.loadedKey()
	if k == nil {
		return "", "", errKeyNotLoaded
	}
	return k.Signer.SignDigest(digest)
}

// trustedStored is the operator store's policy: a strategy the operator
// stored itself (its product, a dump Job's result it adopted) must carry a
// signature by the operator's current or a retired key over its recorded
// digest, and the identity signature binding it to its namespace and
// identity (so a signed strategy copied under another identifier is not
// taken for that identifier's).
func (r *Reconciler) trustedStored(e store.Entry) error {
	k := r.loadedKey()
	if k == nil {
		return errKeyNotLoaded
	}
	if _, err := k.Keys.Verify(e.Digest, e.Signature, e.SignatureKey); err != nil {
		return err
	}
	if _, err := k.Keys.Verify(codec.IdentityDigest(e.Namespace, e.Identity, e.Digest), e.IdentitySignature, e.SignatureKey); err != nil {
		return fmt.Errorf("identity signature (namespace %s, identifier %s): %w", e.Namespace, e.Identity.Identifier, err)
	}
	return nil
}

// configMapPolicy is the policy of a strategy ConfigMap named by an
// Installation: signed by the operator's key or a key of the trusted keys
// ConfigMap of the operator's namespace, or its text hashing to the digest
// pinned in the Installation. The digest is computed from the text read,
// never taken from an annotation. A signed strategy must also carry a
// signed statement that names its text, spec.version when set, and no
// older version than the deployed one (unless spec.allowDowngrade): the
// named ConfigMap replaced with another signed release is refused.
// loadConfigMap applies it through trust.Gate, before the text is parsed.
func (r *Reconciler) configMapPolicy(ctx context.Context, in *v1alpha1.Installation) (trust.Policy, error) {
	ring, err := r.trustedKeys(ctx)
	if err != nil {
		return trust.Policy{}, err
	}
	expect := &trust.Expect{Version: in.Spec.Version, Deployed: in.Status.ObservedVersion, AllowDowngrade: in.Spec.AllowDowngrade}
	return trust.Policy{Keys: ring, Pinned: in.Spec.Strategy.ConfigMap.Digest, Expect: expect}, nil
}
