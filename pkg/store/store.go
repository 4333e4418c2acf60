// Package store publishes, finds, loads and garbage-collects install
// strategies kept as ConfigMaps in a cluster, in the native form or
// KubeVirt's.
//
// A strategy whose encoded text does not fit in one ConfigMap is split into
// ordered chunk ConfigMaps plus a head that lists them and carries the
// digest of the whole text. Chunks are written before the head and deleted
// after it, so a reader that finds a head always finds a whole strategy;
// chunks carry ChunkLabel, never a strategy label, so neither KubeVirt nor a
// listing mistakes them for strategies. docs/STORE.md describes the format.
//
// Lookup follows KubeVirt: a ConfigMap matches on identifier, or, when it
// has none (legacy), on version and registry; the newest by
// creationTimestamp wins; only the install namespace counts.
package store

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// Keys of the chunked form (see docs/STORE.md).
const (
	// ChunkKey is the data key of a chunk's part: a slice of the
	// gzip+base64 text that data.manifests would hold unchunked.
	ChunkKey = "part"
	// chunkGenerateName is the name prefix of chunks.
	chunkGenerateName = "installstrategy-chunk-"
)

// DefaultMaxObjectBytes is the most encoded text one ConfigMap holds
// unless told otherwise: 900 KiB, leaving room for metadata below the
// 1 MiB object limit.
const DefaultMaxObjectBytes = 900 << 10

// DefaultOrphanChunkAge is how old a chunk that no head lists must be
// before GC deletes it, unless told otherwise: a writer may be between its
// chunks and its head for that long.
const DefaultOrphanChunkAge = 10 * time.Minute

// ErrNotFound is wrapped by the error of a lookup that found no matching
// strategy.
var ErrNotFound = errors.New("no matching strategy")

// ErrUntrusted is wrapped by the error of a Read whose entry Options.Trusted
// refuses.
var ErrUntrusted = errors.New("strategy not trusted")

// Options tunes a Store. The zero value writes the native form with
// 900 KiB per ConfigMap and lists whole ConfigMaps.
type Options struct {
	// Format of the strategies written; "" means codec.FormatNative. A
	// strategy that needs chunks is always written in the native form,
	// since only it records the digest the chunks are checked against
	// (and KubeVirt could not read a chunked strategy anyway).
	Format codec.Format
	// MaxObjectBytes is the most encoded text one ConfigMap holds; 0
	// means DefaultMaxObjectBytes. It may not exceed codec.ObjectSizeLimit.
	MaxObjectBytes int
	// OrphanChunkAge: see DefaultOrphanChunkAge; 0 means that.
	OrphanChunkAge time.Duration
	// Clock tells GC the time; nil means the real clock.
	Clock clock.PassiveClock
	// Metadata, when set, lists ConfigMaps as metadata only, so a lookup
	// does not download every strategy; nil lists whole ConfigMaps.
	Metadata metadata.Interface
	// Decode and Parse tune reading.
	Decode codec.DecodeOptions
	Parse  strategy.ParseOptions
	// Signer, when set, signs every strategy the store publishes (the
	// signature annotations go on the single ConfigMap or the head); nil
	// publishes unsigned strategies.
	Signer Signer
	// Trusted, when set, says whether a stored strategy may be used, from
	// its metadata (the signature over the recorded digest; Read then
	// checks the text against that digest). Find, Load and Ensure skip
	// entries it refuses, and GC keeps the newest match it accepts. nil
	// trusts every entry.
	Trusted func(Entry) error
	// Creating and Deleting, when set, are told of each strategy
	// ConfigMap (head or single; not chunks) the store is about to create
	// (its name may still be a generateName) or delete, before the
	// request: a watcher of ConfigMaps can then tell its own writes'
	// events from others'.
	Creating func(*corev1.ConfigMap)
	Deleting func(Entry)
}

// Signer signs a "sha256:" digest and returns the signature and the id of
// the key (pkg/trust's *Signer is one). The store signs the digest of a
// strategy's decoded text, and its codec.IdentityDigest.
type Signer interface {
	SignDigest(digest string) (signature, keyID string, err error)
}

// Store keeps strategies in a cluster.
type Store struct {
	kube kubernetes.Interface
	opts Options
}

// New returns a store using the given clients.
func New(kube kubernetes.Interface, opts Options) (*Store, error) {
	if opts.Format == "" {
		opts.Format = codec.FormatNative
	}
	if _, err := codec.ParseFormat(string(opts.Format)); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if opts.MaxObjectBytes == 0 {
		opts.MaxObjectBytes = DefaultMaxObjectBytes
	}
	if opts.MaxObjectBytes < 0 || opts.MaxObjectBytes > codec.ObjectSizeLimit {
		return nil, fmt.Errorf("store: MaxObjectBytes %d is outside 1..%d", opts.MaxObjectBytes, codec.ObjectSizeLimit)
	}
	if opts.OrphanChunkAge == 0 {
		opts.OrphanChunkAge = DefaultOrphanChunkAge
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Store{kube: kube, opts: opts}, nil
}

// NewForConfig returns a store with clients for cfg, listing metadata only.
func NewForConfig(cfg *rest.Config, opts Options) (*Store, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if opts.Metadata == nil {
		if opts.Metadata, err = metadata.NewForConfig(cfg); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
	}
	return New(kube, opts)
}

// Entry describes one stored strategy, from its (head) ConfigMap's
// metadata.
type Entry struct {
	Namespace string
	Name      string
	UID       types.UID
	// Created is the creationTimestamp (1 s resolution).
	Created  time.Time
	Identity strategy.Identity
	Format   codec.Format
	Encoding string
	// Digest is the recorded digest of the decoded text; empty in
	// KubeVirt's form.
	Digest string
	// DecodedBytes is the recorded size of the text; 0 when unknown.
	DecodedBytes int
	// EncodedBytes is the size of the stored gzip+base64 (or plain) text:
	// the sum of the chunks' parts for a chunked strategy; 0 when unknown
	// (a metadata-only listing of an unchunked strategy).
	EncodedBytes int
	// Chunks lists the chunks of a chunked strategy in order; nil when the
	// strategy is in one ConfigMap.
	Chunks []Chunk
	// Signature and SignatureKey are the signature annotations; empty when
	// the strategy is not signed. IdentitySignature binds the signature to
	// the namespace and identity (codec.IdentityDigest).
	Signature, SignatureKey, IdentitySignature string
	// Statement and StatementSignature are the signed statement of what
	// the strategy is (trust.Statement), if any.
	Statement, StatementSignature string
}

// Chunk is one chunk of a chunked strategy as its head records it.
type Chunk struct {
	Name string `json:"name"`
	// Size is the length of the chunk's part.
	Size int `json:"size"`
	// Digest is "sha256:<hex>" of the chunk's part.
	Digest string `json:"digest"`
}

// Legacy reports whether the strategy has no identifier (KubeVirt's old
// form), so it matches on version and registry.
func (e Entry) Legacy() bool { return e.Identity.Identifier == "" }

// String names the entry's ConfigMap as "namespace/name".
func (e Entry) String() string { return e.Namespace + "/" + e.Name }

// Matches reports whether the entry is a strategy for id: same identifier,
// or, for a legacy entry, same version and registry.
func (e Entry) Matches(id strategy.Identity) bool {
	if e.Legacy() {
		return e.Identity.Version == id.Version && e.Identity.Registry == id.Registry
	}
	return id.Identifier != "" && e.Identity.Identifier == id.Identifier
}

// newer orders entries for "newest wins": by creationTimestamp, then, for
// equal timestamps (they have 1 s resolution), by name, so the choice is
// deterministic.
func newer(a, b Entry) bool {
	if !a.Created.Equal(b.Created) {
		return a.Created.After(b.Created)
	}
	return a.Name > b.Name
}

// CorruptError says that a stored strategy cannot be trusted: a chunk is
// missing, or a chunk or the text does not match its recorded digest, or
// the text cannot be decoded.
type CorruptError struct {
	// ConfigMap is "namespace/name" of the head or single ConfigMap.
	ConfigMap string
	// Chunk is the 0-based index of the chunk at fault, -1 when the fault
	// is in the whole.
	Chunk int
	// Chunks is the number of chunks, 0 for a single ConfigMap.
	Chunks int
	// ChunkName names the chunk at fault.
	ChunkName string
	Err       error
}

func (e *CorruptError) Error() string {
	if e.Chunk >= 0 {
		return fmt.Sprintf("strategy configmap %s: chunk %d of %d (%s): %v", e.ConfigMap, e.Chunk+1, e.Chunks, e.ChunkName, e.Err)
	}
	if de := (*codec.DecodeError)(nil); errors.As(e.Err, &de) {
		// It names the ConfigMap already.
		return "strategy " + e.Err.Error()
	}
	return fmt.Sprintf("strategy configmap %s: %v", e.ConfigMap, e.Err)
}

func (e *CorruptError) Unwrap() error { return e.Err }

// entryOf describes a strategy ConfigMap from its metadata.
func entryOf(m *metav1.ObjectMeta) (Entry, error) {
	info := codec.DescribeConfigMap(&corev1.ConfigMap{ObjectMeta: *m})
	e := Entry{
		Namespace: m.Namespace, Name: m.Name, UID: m.UID, Created: m.CreationTimestamp.Time,
		Identity: info.Identity, Format: info.Format, Encoding: info.Encoding, Digest: info.Digest,
		DecodedBytes: info.DecodedBytes, Signature: info.Signature, SignatureKey: info.SignatureKey, IdentitySignature: info.IdentitySignature,
		Statement: info.Statement, StatementSignature: info.StatementSignature,
	}
	if raw, ok := m.Annotations[metakeys.ChunksAnnotation]; ok {
		chunks, err := parseChunks(raw)
		if err != nil {
			return e, &CorruptError{ConfigMap: e.String(), Chunk: -1, Err: fmt.Errorf("annotation %s: %w", metakeys.ChunksAnnotation, err)}
		}
		e.Chunks = chunks
		for _, c := range chunks {
			e.EncodedBytes += c.Size
		}
	}
	return e, nil
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}
