package operator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
// Installation: signed by a key of the source's own keys
// (spec.strategy.configMap.verify) or, without them, of the trusted keys
// ConfigMap of the operator's namespace — never by the operator's own key,
// which signs only what the operator stores itself (a copy of one of those
// under the named ConfigMap is a replay) — or its text hashing to the
// digest pinned in the Installation. The digest is computed from the text
// read, never taken from an annotation. A signed strategy must also carry
// a signed statement that names its text, the identity the ConfigMap
// claims (trust.Gate), the bound product (sourceProduct), spec.version
// when set, and no older version than the deployed one (unless
// spec.allowDowngrade): the named ConfigMap replaced with another signed
// release or product is refused. configMapSource applies it through
// trust.Gate, before the text is parsed.
func (r *Reconciler) configMapPolicy(ctx context.Context, in *v1alpha1.Installation) (trust.Policy, error) {
	src := in.Spec.Strategy.ConfigMap
	ring, err := r.sourceKeys(ctx, src.Verify)
	if err != nil {
		return trust.Policy{}, err
	}
	product, bound := sourceProduct(in)
	expect := &trust.Expect{Product: product, ProductBound: bound, Version: in.Spec.Version,
		Deployed: in.Status.ObservedVersion, AllowDowngrade: in.Spec.AllowDowngrade}
	return trust.Policy{Keys: ring, Pinned: src.Digest, Expect: expect}, nil
}

// sourceProduct is the product a configMap source's signed statement must
// name, and whether one is bound: spec.strategy.configMap.product, else
// the product named by the statement that vouched for the configMap
// strategy deployed now (status.strategy.product, "" included). Only the
// author changes it, by naming another in the spec. A first install that
// names none, or one whose strategy was pinned, binds none.
func sourceProduct(in *v1alpha1.Installation) (string, bool) {
	if p := in.Spec.Strategy.ConfigMap.Product; p != "" {
		return p, true
	}
	if s := in.Status.Strategy; s != nil && s.Source == v1alpha1.StrategySourceConfigMap && s.Product != nil {
		return *s.Product, true
	}
	return "", false
}

// sourceKeys is the key ring a strategy from outside the operator's store
// (configMap, oci, helm) is judged by: the source's own keys when it names
// them (verify.keysConfigMap, in the key namespace: read at every load),
// else those of the trusted keys ConfigMap. The operator's own keys are
// never in it: they sign what the operator stores, and a stored strategy
// replayed as a source is not a release.
func (r *Reconciler) sourceKeys(ctx context.Context, v *v1alpha1.VerifySource) (*trust.KeyRing, error) {
	if v == nil || v.KeysConfigMap == "" {
		return r.trustedKeysConfigMap(ctx)
	}
	cm, err := r.kube.CoreV1().ConfigMaps(r.opts.KeyNamespace).Get(ctx, v.KeysConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, &trust.UntrustedError{Err: fmt.Errorf("%w: verify.keysConfigMap %s/%s does not exist", trust.ErrUnknownKey, r.opts.KeyNamespace, v.KeysConfigMap)}
	}
	if err != nil {
		return nil, fmt.Errorf("verify.keysConfigMap %s/%s: %w", r.opts.KeyNamespace, v.KeysConfigMap, err)
	}
	ring := &trust.KeyRing{}
	for _, k := range slices.Sorted(maps.Keys(cm.Data)) {
		if err := ring.AddPEM(cm.Namespace+"/"+cm.Name+"/"+k, []byte(cm.Data[k])); err != nil {
			return nil, fmt.Errorf("verify.keysConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
		}
	}
	return ring, nil
}
