package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

var configMapsResource = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// listedMeta is the metadata of a listed ConfigMap and, when the listing
// returned whole objects, the size of its encoded manifests.
type listedMeta struct {
	meta    metav1.ObjectMeta
	encoded int // -1 when unknown (metadata-only listing)
}

// listMeta lists the metadata of the ConfigMaps of a namespace ("" for
// all namespaces) that carry a label.
func (s *Store) listMeta(ctx context.Context, namespace, label string) ([]listedMeta, error) {
	opts := metav1.ListOptions{LabelSelector: label}
	var out []listedMeta
	if s.opts.Metadata != nil {
		list, err := s.opts.Metadata.Resource(configMapsResource).Namespace(namespace).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list configmaps in %s with label %s: %w", where(namespace), label, err)
		}
		for _, item := range list.Items {
			out = append(out, listedMeta{meta: item.ObjectMeta, encoded: -1})
		}
		return out, nil
	}
	list, err := s.kube.CoreV1().ConfigMaps(namespace).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("list configmaps in %s with label %s: %w", where(namespace), label, err)
	}
	for _, item := range list.Items {
		out = append(out, listedMeta{meta: item.ObjectMeta, encoded: len(item.Data[codec.ManifestsKey])})
	}
	return out, nil
}

// where names a namespace in a message; "" is every namespace.
func where(namespace string) string {
	if namespace == "" {
		return "every namespace"
	}
	return "namespace " + namespace
}

// listed is an entry and the problem with its metadata, if any.
type listed struct {
	Entry
	err error
}

// list returns the strategies of a namespace, newest first.
func (s *Store) list(ctx context.Context, namespace string) ([]listed, error) {
	seen := map[string]bool{}
	var out []listed
	for _, label := range []string{metakeys.StrategyLabel, metakeys.KubeVirtStrategyLabel} {
		metas, err := s.listMeta(ctx, namespace, label)
		if err != nil {
			return nil, err
		}
		for i := range metas {
			key := metas[i].meta.Namespace + "/" + metas[i].meta.Name
			if seen[key] {
				continue
			}
			seen[key] = true
			e, err := entryOf(&metas[i].meta)
			if metas[i].encoded >= 0 && e.Chunks == nil {
				e.EncodedBytes = metas[i].encoded
			}
			out = append(out, listed{e, err})
		}
	}
	slices.SortFunc(out, func(a, b listed) int {
		if newer(a.Entry, b.Entry) {
			return -1
		}
		return 1
	})
	return out, nil
}

// List returns the strategies of a namespace, in either form, newest
// first. Chunks are not strategies and are not listed. A head whose chunk
// list cannot be read is listed (with nil Chunks) and reported in the
// joined error.
func (s *Store) List(ctx context.Context, namespace string) ([]Entry, error) {
	all, err := s.list(ctx, namespace)
	if err != nil {
		return nil, err
	}
	entries := make([]Entry, len(all))
	var errs []error
	for i, l := range all {
		entries[i] = l.Entry
		if l.err != nil {
			errs = append(errs, l.err)
		}
	}
	return entries, errors.Join(errs...)
}

// Find returns the strategy of a namespace that lookups use for id: of the
// entries that match it (see Entry.Matches), the newest. Ties of
// creationTimestamp, which has 1 s resolution, go to the greater name.
// No match is an error wrapping ErrNotFound; a newest match whose chunk
// list cannot be read is a *CorruptError.
func (s *Store) Find(ctx context.Context, namespace string, id strategy.Identity) (Entry, error) {
	all, err := s.list(ctx, namespace)
	if err != nil {
		return Entry{}, err
	}
	var refused []error
	for _, l := range all {
		if !l.Matches(id) {
			continue
		}
		if s.opts.Trusted != nil && l.err == nil {
			if err := s.opts.Trusted(l.Entry); err != nil {
				refused = append(refused, fmt.Errorf("%s: %w", l.Entry, err))
				continue
			}
		}
		return l.Entry, l.err
	}
	if len(refused) > 0 {
		return Entry{}, fmt.Errorf("find strategy %s in %s: %w (not trusted: %w)", describe(id), namespace, ErrNotFound, errors.Join(refused...))
	}
	return Entry{}, fmt.Errorf("find strategy %s in %s: %w", describe(id), where(namespace), ErrNotFound)
}

func describe(id strategy.Identity) string {
	var parts []string
	if id.Identifier != "" {
		parts = append(parts, "identifier "+id.Identifier)
	}
	parts = append(parts, "version "+id.Version)
	if id.Registry != "" {
		parts = append(parts, "registry "+id.Registry)
	}
	return strings.Join(parts, ", ")
}

// Loaded is a strategy read from the store.
type Loaded struct {
	Entry    Entry
	Strategy *strategy.Strategy
	// Text is the manifests text as stored.
	Text []byte
	// Digest is the "sha256:" digest of Text (a native entry's recorded
	// digest, which Read verified; computed for a KubeVirt-form ConfigMap,
	// which records none).
	Digest   string
	Warnings []strategy.Warning
}

// errVanished: the strategy was deleted while it was read.
var errVanished = errors.New("strategy deleted while reading it")

// Load finds the strategy for id (see Find), reads it and verifies it. A
// strategy that cannot be trusted is a *CorruptError that says what is
// wrong and where. A strategy deleted while being read is looked up again.
func (s *Store) Load(ctx context.Context, namespace string, id strategy.Identity) (*Loaded, error) {
	var lastErr error
	for range 3 {
		e, err := s.Find(ctx, namespace, id)
		if err != nil {
			return nil, err
		}
		l, err := s.Read(ctx, e)
		if errors.Is(err, errVanished) {
			lastErr = err
			continue
		}
		return l, err
	}
	return nil, fmt.Errorf("load strategy %s in %s: %w (three times)", describe(id), where(namespace), lastErr)
}

// Read reads and verifies the strategy of an entry: the chunks against the
// head's record, the text against the recorded digest.
func (s *Store) Read(ctx context.Context, e Entry) (*Loaded, error) {
	text, err := s.readText(ctx, e)
	if err != nil {
		return nil, err
	}
	st, warnings, err := strategy.Parse(text, s.opts.Parse)
	if err != nil {
		return nil, &CorruptError{ConfigMap: e.String(), Chunk: -1, Err: fmt.Errorf("manifests: %w", err)}
	}
	st.Identity = e.Identity
	return &Loaded{Entry: e, Strategy: st, Text: text, Digest: codec.Digest(text), Warnings: warnings}, nil
}

func (s *Store) readText(ctx context.Context, e Entry) ([]byte, error) {
	cm, fresh, err := s.readConfigMap(ctx, e, nil)
	if err != nil {
		return nil, err
	}
	return s.textOf(ctx, fresh, cm)
}

// ReadConfigMap reads the ConfigMap of an entry as stored, a chunked one
// assembled (each chunk checked against the head's record), without
// decoding it. admit, when set, judges the ConfigMap's metadata as read now
// before any chunk is fetched (trust.Gate.Admit), so a head nobody vouches
// for costs nothing but itself; its error is returned wrapping
// ErrUntrusted.
func (s *Store) ReadConfigMap(ctx context.Context, e Entry, admit func(*metav1.ObjectMeta) error) (*corev1.ConfigMap, error) {
	cm, fresh, err := s.readConfigMap(ctx, e, admit)
	if err != nil || fresh.Chunks == nil {
		return cm, err
	}
	joined, err := s.readChunks(ctx, fresh)
	if err != nil {
		return nil, err
	}
	cm = cm.DeepCopy()
	cm.Data = map[string]string{codec.ManifestsKey: joined}
	delete(cm.Annotations, metakeys.ChunksAnnotation)
	return cm, nil
}

func (s *Store) readConfigMap(ctx context.Context, e Entry, admit func(*metav1.ObjectMeta) error) (*corev1.ConfigMap, Entry, error) {
	api := s.kube.CoreV1().ConfigMaps(e.Namespace)
	cm, err := api.Get(ctx, e.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, Entry{}, fmt.Errorf("read %s: %w", e, errVanished)
	case err != nil:
		return nil, Entry{}, fmt.Errorf("read strategy configmap %s: %w", e, err)
	case cm.UID != e.UID:
		return nil, Entry{}, fmt.Errorf("read %s: %w", e, errVanished)
	}
	fresh, err := entryOf(&cm.ObjectMeta)
	if err != nil {
		return nil, Entry{}, err
	}
	if s.opts.Trusted != nil {
		// Judge what is read now, not what was listed: the text is
		// verified against this digest, the signature must cover it.
		if err := s.opts.Trusted(fresh); err != nil {
			return nil, Entry{}, fmt.Errorf("read strategy %s: %w: %w", e, ErrUntrusted, err)
		}
	}
	if admit != nil {
		if err := admit(&cm.ObjectMeta); err != nil {
			return nil, Entry{}, fmt.Errorf("read strategy %s: %w: %w", e, ErrUntrusted, err)
		}
	}
	return cm, fresh, nil
}

// readChunks fetches and checks every chunk of a head, a few at a time,
// and joins their parts. A missing chunk of a head that still exists is
// corruption; of a head that is gone, a race with its deletion.
func (s *Store) readChunks(ctx context.Context, e Entry) (string, error) {
	api := s.kube.CoreV1().ConfigMaps(e.Namespace)
	parts := make([]string, len(e.Chunks))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for i, c := range e.Chunks {
		g.Go(func() error {
			cm, err := api.Get(gctx, c.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return &CorruptError{ConfigMap: e.String(), Chunk: i, Chunks: len(e.Chunks), ChunkName: c.Name, Err: errors.New("missing")}
			}
			if err != nil {
				return fmt.Errorf("read chunk %d of %d (%s) of %s: %w", i+1, len(e.Chunks), c.Name, e, err)
			}
			parts[i], err = checkChunk(e, i, cm)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		var corrupt *CorruptError
		if errors.As(err, &corrupt) && corrupt.Err.Error() == "missing" {
			if h, herr := api.Get(ctx, e.Name, metav1.GetOptions{}); apierrors.IsNotFound(herr) || (herr == nil && h.UID != e.UID) {
				return "", fmt.Errorf("read %s: %w", e, errVanished)
			}
		}
		return "", err
	}
	return strings.Join(parts, ""), nil
}

// Delete deletes a stored strategy: the head (or single ConfigMap) first,
// then its chunks, so no reader ever finds a head without its chunks.
// Objects already gone are no error.
func (s *Store) Delete(ctx context.Context, e Entry) error {
	api := s.kube.CoreV1().ConfigMaps(e.Namespace)
	opts := metav1.DeleteOptions{}
	if e.UID != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &e.UID}
	}
	if s.opts.Deleting != nil {
		s.opts.Deleting(e)
	}
	if err := api.Delete(ctx, e.Name, opts); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete strategy configmap %s: %w", e, err)
	}
	var errs []error
	for i, c := range e.Chunks {
		if err := api.Delete(ctx, c.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete chunk %d of %d (%s) of %s: %w", i+1, len(e.Chunks), c.Name, e, err))
		}
	}
	return errors.Join(errs...)
}

// textOf decodes and verifies the text of a (head) ConfigMap.
func (s *Store) textOf(ctx context.Context, fresh Entry, cm *corev1.ConfigMap) ([]byte, error) {
	e := fresh
	if fresh.Chunks != nil {
		joined, err := s.readChunks(ctx, fresh)
		if err != nil {
			return nil, err
		}
		cm = cm.DeepCopy()
		cm.Data = map[string]string{codec.ManifestsKey: joined}
	}
	text, _, err := codec.Decode(cm, s.opts.Decode)
	if err != nil {
		return nil, &CorruptError{ConfigMap: e.String(), Chunk: -1, Chunks: len(fresh.Chunks), Err: err}
	}
	return text, nil
}
