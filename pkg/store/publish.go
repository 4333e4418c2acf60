package store

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// Publish writes a strategy into a namespace as a new ConfigMap (generated
// name), or as chunks plus a head when its encoded text exceeds
// MaxObjectBytes. The strategy's Identity needs a version. Publish never
// replaces anything: the newest strategy for an identity wins lookups, and
// GC removes the older ones.
func (s *Store) Publish(ctx context.Context, namespace string, st *strategy.Strategy) (Entry, error) {
	text, err := st.Serialize()
	if err != nil {
		return Entry{}, fmt.Errorf("publish strategy: %w", err)
	}
	return s.PublishText(ctx, namespace, text, st.Identity)
}

// PublishText is Publish for a manifests text that is already serialised.
func (s *Store) PublishText(ctx context.Context, namespace string, text []byte, id strategy.Identity) (Entry, error) {
	cm, err := s.encode(text, namespace, id, s.opts.Format)
	if err != nil {
		return Entry{}, err
	}
	if len(cm.Data[codec.ManifestsKey]) <= s.opts.MaxObjectBytes {
		s.creating(cm)
		created, err := s.kube.CoreV1().ConfigMaps(namespace).Create(ctx, cm, metav1.CreateOptions{})
		if err != nil {
			return Entry{}, fmt.Errorf("publish strategy %s in %s: create configmap: %w", id.Version, namespace, err)
		}
		return entryOf(&created.ObjectMeta)
	}
	if s.opts.Format != codec.FormatNative {
		if cm, err = s.encode(text, namespace, id, codec.FormatNative); err != nil {
			return Entry{}, err
		}
	}
	return s.publishChunked(ctx, cm)
}

// encode wraps a text in a ConfigMap of the given form, signed when the
// store has a Signer.
func (s *Store) encode(text []byte, namespace string, id strategy.Identity, f codec.Format) (*corev1.ConfigMap, error) {
	cm, err := codec.EncodeText(text, codec.EncodeOptions{Format: f, Namespace: namespace, Identity: id})
	if err != nil {
		return nil, fmt.Errorf("publish strategy %s: %w", id.Version, err)
	}
	if s.opts.Signer != nil {
		if err := s.sign(cm.Annotations, namespace, id, codec.Digest(text)); err != nil {
			return nil, fmt.Errorf("publish strategy %s: %w", id.Version, err)
		}
	}
	return cm, nil
}

// sign puts the signature over digest and the identity signature into
// annotations.
func (s *Store) sign(annotations map[string]string, namespace string, id strategy.Identity, digest string) error {
	sig, keyID, err := s.opts.Signer.SignDigest(digest)
	if err != nil {
		return err
	}
	idSig, _, err := s.opts.Signer.SignDigest(codec.IdentityDigest(namespace, id, digest))
	if err != nil {
		return err
	}
	annotations[metakeys.SignatureAnnotation] = sig
	annotations[metakeys.SignatureKeyAnnotation] = keyID
	annotations[metakeys.IdentitySignatureAnnotation] = idSig
	return trust.SignStatement(annotations, trust.StatementOf(annotations, digest), s.opts.Signer)
}

// SignOptions are the options of Sign; the zero value signs the strategy
// as its annotations describe it.
type SignOptions struct {
	// Product, when set, is the product the signature is for (it replaces
	// the ConfigMap's product annotation).
	Product string
}

// CanSign reports whether the store has a Signer.
func (s *Store) CanSign() bool { return s.opts.Signer != nil }

// Sign signs a stored strategy in place with the store's Signer: it reads
// and verifies the entry (chunks, digest), then sets the signature
// annotations on its (head) ConfigMap, provided the ConfigMap is still the
// one read (same UID and resourceVersion). The signature covers the digest
// of the text that was verified, so a change made after the read is never
// covered by it.
//
// opts.Product, when set, names the product the signed statement is for:
// it is written to the ConfigMap's product annotation before signing, so
// the statement and the claim agree (an operator's configMap source binds
// the product; see trust.Expect).
func (s *Store) Sign(ctx context.Context, e Entry, opts SignOptions) (Entry, error) {
	if s.opts.Signer == nil {
		return Entry{}, fmt.Errorf("sign strategy %s: the store has no signer", e)
	}
	api := s.kube.CoreV1().ConfigMaps(e.Namespace)
	cm, err := api.Get(ctx, e.Name, metav1.GetOptions{})
	if err != nil {
		return Entry{}, fmt.Errorf("sign strategy %s: %w", e, err)
	}
	if cm.UID != e.UID {
		return Entry{}, fmt.Errorf("sign strategy %s: %w", e, errVanished)
	}
	fresh, err := entryOf(&cm.ObjectMeta)
	if err != nil {
		return Entry{}, err
	}
	text, err := s.textOf(ctx, fresh, cm)
	if err != nil {
		return Entry{}, err
	}
	signed := cm.DeepCopy()
	if opts.Product != "" {
		signed.Annotations[metakeys.ProductAnnotation] = opts.Product
	}
	if err := s.sign(signed.Annotations, cm.Namespace, fresh.Identity, codec.Digest(text)); err != nil {
		return Entry{}, fmt.Errorf("sign strategy %s: %w", e, err)
	}
	out, err := api.Update(ctx, signed, metav1.UpdateOptions{})
	if err != nil {
		return Entry{}, fmt.Errorf("sign strategy %s: %w", e, err)
	}
	return entryOf(&out.ObjectMeta)
}

// publishChunked creates the chunks in order, then the head. When any
// create fails, the chunks already created are deleted again.
func (s *Store) publishChunked(ctx context.Context, cm *corev1.ConfigMap) (Entry, error) {
	api := s.kube.CoreV1().ConfigMaps(cm.Namespace)
	chunks := chunkConfigMaps(cm, s.opts.MaxObjectBytes)
	var created []*corev1.ConfigMap
	undo := func(err error) (Entry, error) {
		errs := []error{err}
		for _, c := range created {
			if derr := api.Delete(ctx, c.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &c.UID}}); derr != nil && !apierrors.IsNotFound(derr) {
				errs = append(errs, fmt.Errorf("clean up chunk %s: %w", c.Name, derr))
			}
		}
		return Entry{}, errors.Join(errs...)
	}
	for i, c := range chunks {
		out, err := api.Create(ctx, c, metav1.CreateOptions{})
		if err != nil {
			return undo(fmt.Errorf("publish strategy %s in %s: create chunk %d of %d: %w", cm.Annotations[metakeys.VersionAnnotation], cm.Namespace, i+1, len(chunks), err))
		}
		created = append(created, out)
	}
	h, err := head(cm, created)
	if err != nil {
		return undo(fmt.Errorf("publish strategy: %w", err))
	}
	s.creating(h)
	out, err := api.Create(ctx, h, metav1.CreateOptions{})
	if err != nil {
		return undo(fmt.Errorf("publish strategy %s in %s: create head: %w", cm.Annotations[metakeys.VersionAnnotation], cm.Namespace, err))
	}
	return entryOf(&out.ObjectMeta)
}

// Ensure publishes a strategy unless the namespace already holds an intact
// copy of the same text for its identity (see Find; the existing one is
// read, verified and its digest compared; with Options.Trusted, only a
// trusted copy counts). It reports whether it published. Two writers racing may
// both publish; the newer wins and GC removes the other.
func (s *Store) Ensure(ctx context.Context, namespace string, st *strategy.Strategy) (Entry, bool, error) {
	text, err := st.Serialize()
	if err != nil {
		return Entry{}, false, fmt.Errorf("ensure strategy: %w", err)
	}
	existing, err := s.Load(ctx, namespace, st.Identity)
	var corrupt *CorruptError
	switch {
	case err == nil && codec.Digest(existing.Text) == codec.Digest(text):
		return existing.Entry, false, nil
	case err == nil:
		// Another text under the same identity: publish ours, the newer.
	case errors.Is(err, ErrNotFound), errors.As(err, &corrupt):
		// Publish a fresh copy: being newer, it wins over a corrupt one.
	default:
		return Entry{}, false, err
	}
	e, err := s.PublishText(ctx, namespace, text, st.Identity)
	return e, err == nil, err
}

// creating tells Options.Creating of a strategy ConfigMap about to be
// created.
func (s *Store) creating(cm *corev1.ConfigMap) {
	if s.opts.Creating != nil {
		s.opts.Creating(cm)
	}
}
