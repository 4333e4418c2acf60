package store

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/strategy"
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
	cm, err := codec.EncodeText(text, codec.EncodeOptions{Format: s.opts.Format, Namespace: namespace, Identity: id})
	if err != nil {
		return Entry{}, fmt.Errorf("publish strategy %s: %w", id.Version, err)
	}
	if len(cm.Data[codec.ManifestsKey]) <= s.opts.MaxObjectBytes {
		created, err := s.kube.CoreV1().ConfigMaps(namespace).Create(ctx, cm, metav1.CreateOptions{})
		if err != nil {
			return Entry{}, fmt.Errorf("publish strategy %s in %s: create configmap: %w", id.Version, namespace, err)
		}
		return entryOf(&created.ObjectMeta)
	}
	if s.opts.Format != codec.FormatNative {
		if cm, err = codec.EncodeText(text, codec.EncodeOptions{Format: codec.FormatNative, Namespace: namespace, Identity: id}); err != nil {
			return Entry{}, fmt.Errorf("publish strategy %s: %w", id.Version, err)
		}
	}
	return s.publishChunked(ctx, cm)
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
			return undo(fmt.Errorf("publish strategy %s in %s: create chunk %d of %d: %w", cm.Annotations[codec.NativeVersionAnnotation], cm.Namespace, i+1, len(chunks), err))
		}
		created = append(created, out)
	}
	h, err := head(cm, created)
	if err != nil {
		return undo(fmt.Errorf("publish strategy: %w", err))
	}
	out, err := api.Create(ctx, h, metav1.CreateOptions{})
	if err != nil {
		return undo(fmt.Errorf("publish strategy %s in %s: create head: %w", cm.Annotations[codec.NativeVersionAnnotation], cm.Namespace, err))
	}
	return entryOf(&out.ObjectMeta)
}

// Ensure publishes a strategy unless the namespace already holds an intact
// one for its identity (see Find; the existing one is read and verified,
// not compared). It reports whether it published. Two writers racing may
// both publish; the newer wins and GC removes the other.
func (s *Store) Ensure(ctx context.Context, namespace string, st *strategy.Strategy) (Entry, bool, error) {
	existing, err := s.Load(ctx, namespace, st.Identity)
	var corrupt *CorruptError
	switch {
	case err == nil:
		return existing.Entry, false, nil
	case errors.Is(err, ErrNotFound), errors.As(err, &corrupt):
		// Publish a fresh copy: being newer, it wins over a corrupt one.
	default:
		return Entry{}, false, err
	}
	e, err := s.Publish(ctx, namespace, st)
	return e, err == nil, err
}
