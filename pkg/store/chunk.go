package store

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
)

// partDigest returns "sha256:<hex>" of a chunk's part.
func partDigest(part string) string {
	sum := sha256.Sum256([]byte(part))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// split cuts data into n nearly equal parts of at most max bytes.
func split(data string, max int) []string {
	n := (len(data) + max - 1) / max
	size := (len(data) + n - 1) / n
	parts := make([]string, 0, n)
	for len(data) > 0 {
		k := min(size, len(data))
		parts = append(parts, data[:k])
		data = data[k:]
	}
	return parts
}

// chunkConfigMaps returns the chunks of a native strategy ConfigMap, to be
// created in order, and the head that lists them once their names are
// known (see head).
func chunkConfigMaps(cm *corev1.ConfigMap, max int) []*corev1.ConfigMap {
	parts := split(cm.Data[codec.ManifestsKey], max)
	out := make([]*corev1.ConfigMap, len(parts))
	for i, p := range parts {
		out[i] = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				GenerateName: chunkGenerateName,
				Namespace:    cm.Namespace,
				Labels:       map[string]string{metakeys.ManagedByLabel: metakeys.ManagedBy, metakeys.ChunkLabel: ""},
				Annotations: map[string]string{
					metakeys.ChunkIndexAnnotation: strconv.Itoa(i),
					metakeys.ChunkOfAnnotation:    cm.Annotations[metakeys.DigestAnnotation],
				},
			},
			Data: map[string]string{ChunkKey: p},
		}
	}
	return out
}

// head returns the head of a chunked strategy: cm's labels and annotations,
// no data, and the list of the created chunks.
func head(cm *corev1.ConfigMap, chunks []*corev1.ConfigMap) (*corev1.ConfigMap, error) {
	list := make([]Chunk, len(chunks))
	for i, c := range chunks {
		list[i] = Chunk{Name: c.Name, Size: len(c.Data[ChunkKey]), Digest: partDigest(c.Data[ChunkKey])}
	}
	raw, err := json.Marshal(list)
	if err != nil {
		return nil, err
	}
	h := cm.DeepCopy()
	h.Data = nil
	h.Annotations = maps.Clone(cm.Annotations)
	h.Annotations[metakeys.ChunksAnnotation] = string(raw)
	return h, nil
}

// maxChunks is the most chunks a head may list, and MaxEncodedBytes the
// most their parts may hold together: enough for a text at codec's
// decoded-size limit that does not compress at all (64 MiB, 86 MiB as
// base64), so a head cannot make a reader fetch or join more.
const (
	maxChunks       = 1024
	MaxEncodedBytes = codec.DefaultMaxDecodedBytes/3*4 + 4<<20
)

func parseChunks(raw string) ([]Chunk, error) {
	var chunks []Chunk
	if err := json.Unmarshal([]byte(raw), &chunks); err != nil {
		return nil, err
	}
	if len(chunks) == 0 {
		return nil, errors.New("lists no chunks")
	}
	if len(chunks) > maxChunks {
		return nil, fmt.Errorf("lists %d chunks, more than %d", len(chunks), maxChunks)
	}
	seen := make(map[string]int, len(chunks))
	total := 0
	for i, c := range chunks {
		if c.Name == "" || !strings.HasPrefix(c.Digest, "sha256:") {
			return nil, fmt.Errorf("chunk %d: want a name and a sha256 digest", i+1)
		}
		if j, dup := seen[c.Name]; dup {
			return nil, fmt.Errorf("chunk %d: %s is listed twice (also chunk %d)", i+1, c.Name, j+1)
		}
		seen[c.Name] = i
		if c.Size <= 0 || c.Size > codec.ObjectSizeLimit {
			return nil, fmt.Errorf("chunk %d: size %d is outside 1..%d", i+1, c.Size, codec.ObjectSizeLimit)
		}
		if total += c.Size; total > MaxEncodedBytes {
			return nil, fmt.Errorf("chunks hold more than %d bytes", MaxEncodedBytes)
		}
	}
	return chunks, nil
}

// Assemble returns the strategy ConfigMap that the head of a chunked
// strategy stands for, from ConfigMaps already read (a file of `kubectl get
// cm -o yaml` output): its chunks' parts joined into data.manifests, each
// chunk checked as Read checks it (index, size and sha256 against the head's
// record). Every chunk the head lists must be among chunks. The result
// decodes with codec.Decode, which verifies the whole text's digest. A
// ConfigMap that is no chunked head is returned as it is.
func Assemble(head *corev1.ConfigMap, chunks []*corev1.ConfigMap) (*corev1.ConfigMap, error) {
	if _, ok := head.Annotations[metakeys.ChunksAnnotation]; !ok {
		return head, nil
	}
	e, err := entryOf(&head.ObjectMeta)
	if err != nil {
		return nil, err
	}
	byName := make(map[string]*corev1.ConfigMap, len(chunks))
	for _, c := range chunks {
		byName[c.Name] = c
	}
	parts := make([]string, len(e.Chunks))
	for i, rec := range e.Chunks {
		c, ok := byName[rec.Name]
		if !ok {
			return nil, &CorruptError{ConfigMap: e.String(), Chunk: i, Chunks: len(e.Chunks), ChunkName: rec.Name, Err: errors.New("not among the ConfigMaps given")}
		}
		if parts[i], err = checkChunk(e, i, c); err != nil {
			return nil, err
		}
	}
	out := head.DeepCopy()
	out.Data = map[string]string{codec.ManifestsKey: strings.Join(parts, "")}
	delete(out.Annotations, metakeys.ChunksAnnotation)
	return out, nil
}

// checkChunk verifies one fetched chunk against the head's record.
func checkChunk(e Entry, i int, cm *corev1.ConfigMap) (string, error) {
	fail := func(err error) (string, error) {
		return "", &CorruptError{ConfigMap: e.String(), Chunk: i, Chunks: len(e.Chunks), ChunkName: e.Chunks[i].Name, Err: err}
	}
	if _, ok := cm.Labels[metakeys.ChunkLabel]; !ok {
		return fail(fmt.Errorf("not a chunk (no %s label)", metakeys.ChunkLabel))
	}
	if idx := cm.Annotations[metakeys.ChunkIndexAnnotation]; atoi(idx) != i {
		return fail(fmt.Errorf("annotation %s is %q, the head lists it at %d", metakeys.ChunkIndexAnnotation, idx, i))
	}
	part, ok := cm.Data[ChunkKey]
	if !ok {
		return fail(fmt.Errorf("data has no %q key", ChunkKey))
	}
	rec := e.Chunks[i]
	if len(part) != rec.Size {
		return fail(fmt.Errorf("edited: part is %d bytes, the head records %d", len(part), rec.Size))
	}
	if got := partDigest(part); got != rec.Digest {
		return fail(fmt.Errorf("edited: part hashes to %s, the head records %s", got, rec.Digest))
	}
	return part, nil
}
