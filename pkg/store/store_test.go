package store_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/installstrategy/installstrategy/internal/kubevirtdata"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/generate"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

func newStore(t *testing.T, env *testenv.Env, opts store.Options) *store.Store {
	t.Helper()
	s, err := store.NewForConfig(env.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func sample(t *testing.T, version string) *strategy.Strategy {
	t.Helper()
	s, err := generate.Sample(&identity.Config{Namespace: "sample-system", Registry: "registry.example/sample", Version: version}, generate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// big returns a synthetic strategy of n ConfigMaps each holding size bytes
// of random base64, so that its text hardly compresses.
func big(t *testing.T, seed uint64, n, size int) *strategy.Strategy {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	s := &strategy.Strategy{Identity: strategy.Identity{Version: "v9.9.9", Registry: "registry.example/big", Identifier: fmt.Sprintf("big-%d", seed)}}
	raw := make([]byte, size*3/4)
	for i := range n {
		for j := range raw {
			raw[j] = byte(rng.Uint32())
		}
		s.Objects = append(s.Objects, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": fmt.Sprintf("blob-%03d", i), "namespace": "big"},
			"data":     map[string]any{"blob": base64.StdEncoding.EncodeToString(raw)},
		}})
	}
	s.Sort()
	return s
}

func serialize(t *testing.T, s *strategy.Strategy) []byte {
	t.Helper()
	text, err := s.Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return text
}

func configMaps(t *testing.T, env *testenv.Env, ns string) []corev1.ConfigMap {
	t.Helper()
	list, err := env.Kube.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.ConfigMap
	for _, cm := range list.Items {
		if cm.Name != "kube-root-ca.crt" {
			out = append(out, cm)
		}
	}
	return out
}

func names(cms []corev1.ConfigMap) []string {
	var out []string
	for _, cm := range cms {
		out = append(out, cm.Name)
	}
	slices.Sort(out)
	return out
}

// TestRoundTripSmall publishes the sample strategy in both forms, finds
// and loads it back, and checks the ConfigMap in the cluster.
func TestRoundTripSmall(t *testing.T) {
	env := testenv.New(t)
	for _, format := range []codec.Format{codec.FormatNative, codec.FormatKubeVirt} {
		t.Run(string(format), func(t *testing.T) {
			ctx := t.Context()
			ns := env.Namespace(ctx, t)
			st := newStore(t, env, store.Options{Format: format})
			want := sample(t, "v1.1.0")
			e, err := st.Publish(ctx, ns, want)
			if err != nil {
				t.Fatal(err)
			}
			found, err := st.Find(ctx, ns, want.Identity)
			if err != nil {
				t.Fatal(err)
			}
			if found.Name != e.Name || found.Chunks != nil || found.Format != format || found.Identity != want.Identity {
				t.Fatalf("found %+v, published %+v", found, e)
			}
			l, err := st.Load(ctx, ns, want.Identity)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(l.Text, serialize(t, want)) || len(l.Strategy.Objects) != len(want.Objects) || l.Strategy.Identity != want.Identity {
				t.Fatal("loaded strategy differs from the published one")
			}
			cms := configMaps(t, env, ns)
			if len(cms) != 1 {
				t.Fatalf("configmaps in the namespace: %q, want one", names(cms))
			}
			cm := cms[0]
			label, prefix, idKey := metakeys.StrategyLabel, codec.NativeGenerateName, metakeys.IdentifierAnnotation
			if format == codec.FormatKubeVirt {
				label, prefix, idKey = metakeys.KubeVirtStrategyLabel, codec.KubeVirtGenerateName, metakeys.KubeVirtIdentifierAnnotation
			}
			if _, ok := cm.Labels[label]; !ok || !strings.HasPrefix(cm.Name, prefix) || cm.Annotations[idKey] != want.Identity.Identifier {
				t.Fatalf("configmap %s: labels %v annotations %v", cm.Name, cm.Labels, cm.Annotations)
			}
		})
	}
}

// TestRoundTripKubeVirt stores KubeVirt v1.9.0's real strategy, as KubeVirt
// writes it and through the store, and loads both back.
func TestRoundTripKubeVirt(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	cms, err := codec.ReadConfigMaps("configmap.yaml", kubevirtdata.Read(t, "v1.9.0", "configmap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	manifests := kubevirtdata.Read(t, "v1.9.0", "manifests.yaml")
	id := codec.DescribeConfigMap(cms[0]).Identity
	if id.Identifier != kubevirtdata.ID(t, "v1.9.0") {
		t.Fatalf("identity %+v", id)
	}

	// As virt-operator would have created it.
	kv := cms[0].DeepCopy()
	kv.Namespace = ns
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, kv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	st := newStore(t, env, store.Options{Format: codec.FormatKubeVirt})
	l, err := st.Load(ctx, ns, id)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(l.Text, manifests) {
		t.Fatal("loaded text differs from KubeVirt's manifests")
	}
	if n := len(l.Strategy.Objects); n != 245 {
		t.Fatalf("%d objects, want 245 distinct objects", n)
	}

	// Published by the store, in KubeVirt's form: the same bytes.
	e, err := st.PublishText(ctx, ns, manifests, id)
	if err != nil {
		t.Fatal(err)
	}
	got, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, e.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Data[codec.ManifestsKey] != cms[0].Data[codec.ManifestsKey] {
		t.Fatal("the store's KubeVirt-form data.manifests differs from KubeVirt's")
	}
	// Native form: loads back to the same text with its digest verified.
	native := newStore(t, env, store.Options{})
	ne, err := native.PublishText(ctx, ns, manifests, strategy.Identity{Version: id.Version, Registry: id.Registry, Identifier: "native-" + id.Identifier})
	if err != nil {
		t.Fatal(err)
	}
	nl, err := native.Read(ctx, ne)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(nl.Text, manifests) || ne.Digest != codec.Digest(manifests) {
		t.Fatal("native round trip differs")
	}
}

// TestChunked publishes a strategy of more than 3 MiB encoded: it is split
// into chunks that no strategy listing sees, and loads back identical.
func TestChunked(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	want := big(t, 1, 32, 128<<10)
	text := serialize(t, want)
	encoded, err := codec.EncodeText(text, codec.EncodeOptions{Identity: want.Identity})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(encoded.Data[codec.ManifestsKey]); n <= 3<<20 {
		t.Fatalf("synthetic strategy is only %d bytes encoded, want more than 3 MiB", n)
	}
	// Even a store told to write KubeVirt's form chunks in the native form.
	st := newStore(t, env, store.Options{Format: codec.FormatKubeVirt})
	e, err := st.Publish(ctx, ns, want)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Chunks) < 4 || e.Format != codec.FormatNative || e.Digest != codec.Digest(text) {
		t.Fatalf("entry %+v: want at least 4 chunks, native, with the digest of the text", e)
	}

	// Cluster state: one head without data, chunks with the chunk label
	// only, in the order the head lists them.
	var heads, chunks []corev1.ConfigMap
	for _, cm := range configMaps(t, env, ns) {
		_, native := cm.Labels[metakeys.StrategyLabel]
		_, kubevirt := cm.Labels[metakeys.KubeVirtStrategyLabel]
		_, chunk := cm.Labels[metakeys.ChunkLabel]
		switch {
		case chunk && !native && !kubevirt:
			if len(cm.Data[store.ChunkKey]) > store.DefaultMaxObjectBytes {
				t.Errorf("chunk %s holds %d bytes", cm.Name, len(cm.Data[store.ChunkKey]))
			}
			chunks = append(chunks, cm)
		case native && !chunk:
			heads = append(heads, cm)
		default:
			t.Errorf("configmap %s has labels %v", cm.Name, cm.Labels)
		}
	}
	if len(heads) != 1 || len(heads[0].Data) != 0 || heads[0].Name != e.Name || len(chunks) != len(e.Chunks) {
		t.Fatalf("%d heads, %d chunks; entry lists %d", len(heads), len(chunks), len(e.Chunks))
	}
	for i, c := range e.Chunks {
		got, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, c.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Annotations[metakeys.ChunkIndexAnnotation] != fmt.Sprint(i) {
			t.Errorf("chunk %s has index %s, listed at %d", c.Name, got.Annotations[metakeys.ChunkIndexAnnotation], i)
		}
	}
	entries, err := st.List(ctx, ns)
	if err != nil || len(entries) != 1 {
		t.Fatalf("List = %d entries, %v; want the head only", len(entries), err)
	}

	l, err := st.Load(ctx, ns, want.Identity)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(l.Text, text) || len(l.Strategy.Objects) != len(want.Objects) {
		t.Fatal("loaded chunked strategy differs from the published one")
	}
}

// TestReaderRacesWriter loads a chunked strategy while a writer keeps
// publishing new copies of it and deleting the old ones: every load either
// finds nothing (before the first publish) or the whole strategy.
func TestReaderRacesWriter(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	st := newStore(t, env, store.Options{MaxObjectBytes: 256 << 10})
	want := big(t, 2, 16, 96<<10) // about 1.5 MiB encoded: 6 chunks
	text := serialize(t, want)

	var wg sync.WaitGroup
	done := make(chan struct{})
	var writerErr error
	wg.Go(func() {
		defer close(done)
		for range 4 {
			if _, err := st.Publish(ctx, ns, want); err != nil {
				writerErr = err
				return
			}
			if _, err := st.GC(ctx, ns, want.Identity); err != nil {
				writerErr = err
				return
			}
		}
	})
	loads, notFound := 0, 0
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		l, err := st.Load(ctx, ns, want.Identity)
		switch {
		case errors.Is(err, store.ErrNotFound):
			notFound++
		case err != nil:
			t.Fatalf("load while writing: %v", err)
		case !bytes.Equal(l.Text, text):
			t.Fatal("load while writing returned a different text")
		default:
			loads++
		}
	}
	wg.Wait()
	if writerErr != nil {
		t.Fatal(writerErr)
	}
	if loads == 0 {
		t.Fatalf("the reader never loaded the strategy (%d not found)", notFound)
	}
	t.Logf("%d whole loads, %d not found yet", loads, notFound)
	// What the writer leaves: one head and its chunks.
	entries, err := st.List(ctx, ns)
	if err != nil || len(entries) != 1 {
		t.Fatalf("after the race: %d entries, %v", len(entries), err)
	}
	if n := len(configMaps(t, env, ns)); n != 1+len(entries[0].Chunks) {
		t.Fatalf("after the race: %d configmaps, want the head and %d chunks", n, len(entries[0].Chunks))
	}
}

// TestTampered changes stored strategies and checks that loading refuses
// them with an error that says what is wrong and where.
func TestTampered(t *testing.T) {
	env := testenv.New(t)
	flip := func(s string, at int) string {
		b := []byte(s)
		if b[at] == 'A' {
			b[at] = 'B'
		} else {
			b[at] = 'A'
		}
		return string(b)
	}
	tests := []struct {
		name    string
		chunked bool
		tamper  func(t *testing.T, ctx context.Context, ns string, e store.Entry)
		chunk   int // index of the chunk the error names, -1 for none
		want    []string
	}{
		{
			name: "one byte of the manifests", chunked: false, chunk: -1,
			tamper: func(t *testing.T, ctx context.Context, ns string, e store.Entry) {
				update(t, env, ns, e.Name, func(cm *corev1.ConfigMap) {
					cm.Data[codec.ManifestsKey] = flip(cm.Data[codec.ManifestsKey], len(cm.Data[codec.ManifestsKey])/2)
				})
			},
			want: []string{"gzip"},
		},
		{
			name: "digest edited", chunked: false, chunk: -1,
			tamper: func(t *testing.T, ctx context.Context, ns string, e store.Entry) {
				update(t, env, ns, e.Name, func(cm *corev1.ConfigMap) {
					cm.Annotations[metakeys.DigestAnnotation] = codec.Digest([]byte("something else"))
				})
			},
			want: []string{"digest mismatch"},
		},
		{
			name: "one byte of a chunk", chunked: true, chunk: 2,
			tamper: func(t *testing.T, ctx context.Context, ns string, e store.Entry) {
				update(t, env, ns, e.Chunks[2].Name, func(cm *corev1.ConfigMap) {
					cm.Data[store.ChunkKey] = flip(cm.Data[store.ChunkKey], 100)
				})
			},
			want: []string{"chunk 3 of", "edited"},
		},
		{
			name: "a chunk missing", chunked: true, chunk: 1,
			tamper: func(t *testing.T, ctx context.Context, ns string, e store.Entry) {
				if err := env.Kube.CoreV1().ConfigMaps(ns).Delete(ctx, e.Chunks[1].Name, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"chunk 2 of", "missing"},
		},
		{
			name: "digest of a chunked strategy edited", chunked: true, chunk: -1,
			tamper: func(t *testing.T, ctx context.Context, ns string, e store.Entry) {
				update(t, env, ns, e.Name, func(cm *corev1.ConfigMap) {
					cm.Annotations[metakeys.DigestAnnotation] = codec.Digest([]byte("something else"))
				})
			},
			want: []string{"digest mismatch"},
		},
		{
			name: "chunk list edited", chunked: true, chunk: -1,
			tamper: func(t *testing.T, ctx context.Context, ns string, e store.Entry) {
				update(t, env, ns, e.Name, func(cm *corev1.ConfigMap) { cm.Annotations[metakeys.ChunksAnnotation] = "[" })
			},
			want: []string{metakeys.ChunksAnnotation},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			ns := env.Namespace(ctx, t)
			st := newStore(t, env, store.Options{MaxObjectBytes: 16 << 10})
			want := big(t, 3, 4, 16<<10) // about 64 KiB: 5 chunks of 16 KiB
			if !tt.chunked {
				want = sample(t, "v1.0.0")
			}
			e, err := st.Publish(ctx, ns, want)
			if err != nil {
				t.Fatal(err)
			}
			if (e.Chunks != nil) != tt.chunked {
				t.Fatalf("published with %d chunks", len(e.Chunks))
			}
			tt.tamper(t, ctx, ns, e)
			_, err = st.Load(ctx, ns, want.Identity)
			var corrupt *store.CorruptError
			if !errors.As(err, &corrupt) {
				t.Fatalf("load error = %v, want a CorruptError", err)
			}
			if corrupt.Chunk != tt.chunk || !strings.Contains(err.Error(), ns+"/"+e.Name) {
				t.Fatalf("error %q: chunk %d, want chunk %d and the head's name", err, corrupt.Chunk, tt.chunk)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			t.Log(err)
		})
	}
}

func update(t *testing.T, env *testenv.Env, ns, name string, change func(cm *corev1.ConfigMap)) {
	t.Helper()
	cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	change(cm)
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// legacyConfigMap is a strategy ConfigMap as old KubeVirt versions wrote
// it: plain text, no identifier, no encoding annotation.
func legacyConfigMap(ns, version, registry string, text []byte) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: codec.KubeVirtGenerateName, Namespace: ns,
			Labels: map[string]string{metakeys.KubeVirtStrategyLabel: "", metakeys.ManagedByLabel: metakeys.KubeVirtManagedBy},
			Annotations: map[string]string{
				metakeys.KubeVirtVersionAnnotation:  version,
				metakeys.KubeVirtRegistryAnnotation: registry,
			},
		},
		Data: map[string]string{codec.ManifestsKey: string(text)},
	}
}

// TestLegacy loads legacy KubeVirt ConfigMaps by version and registry: of
// two matches the newer wins, and one in another namespace never counts.
// Creation timestamps have 1 s resolution, so the test waits 1.1 s between
// creates to make the order real.
func TestLegacy(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	other := env.Namespace(ctx, t)
	api := env.Kube.CoreV1()
	older, newer, elsewhere := serialize(t, sample(t, "v1.0.0")), serialize(t, sample(t, "v1.1.0")), serialize(t, sample(t, "v1.2.0"))
	const version, registry = "v0.20.0", "index.docker.io/kubevirt"

	create := func(cm *corev1.ConfigMap) *corev1.ConfigMap {
		t.Helper()
		out, err := api.ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(1100 * time.Millisecond)
		return out
	}
	create(legacyConfigMap(ns, version, registry, older))
	newest := create(legacyConfigMap(ns, version, registry, newer))
	create(legacyConfigMap(other, version, registry, elsewhere))
	// Same version and registry, but an identifier: it matches only that
	// identifier, never the legacy lookup.
	withID := legacyConfigMap(ns, version, registry, elsewhere)
	withID.Annotations[metakeys.KubeVirtIdentifierAnnotation] = "0123456789abcdef0123456789abcdef01234567"
	create(withID)
	// Another registry.
	create(legacyConfigMap(ns, version, "quay.io/kubevirt", elsewhere))

	for _, s := range []*store.Store{newStore(t, env, store.Options{}), mustNew(t, env)} {
		for _, id := range []strategy.Identity{
			{Version: version, Registry: registry},
			{Version: version, Registry: registry, Identifier: "fedcba9876543210fedcba9876543210fedcba98"},
		} {
			l, err := s.Load(ctx, ns, id)
			if err != nil {
				t.Fatal(err)
			}
			if l.Entry.Name != newest.Name || !bytes.Equal(l.Text, newer) || !l.Entry.Legacy() || l.Entry.Encoding != codec.EncodingPlain {
				t.Fatalf("loaded %s (legacy %v, %s), want the newer legacy %s", l.Entry.Name, l.Entry.Legacy(), l.Entry.Encoding, newest.Name)
			}
		}
		if _, err := s.Find(ctx, ns, strategy.Identity{Version: "v0.19.0", Registry: registry}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("find other version: %v, want ErrNotFound", err)
		}
	}
}

// mustNew returns a store that lists whole ConfigMaps (no metadata client).
func mustNew(t *testing.T, env *testenv.Env) *store.Store {
	t.Helper()
	s, err := store.New(env.Kube, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestGC keeps the newest strategy in use and deletes every other one, with
// its chunks, and chunks no head lists once they are old enough.
func TestGC(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	st := newStore(t, env, store.Options{MaxObjectBytes: 16 << 10, Clock: clk})
	inUse := sample(t, "v1.1.0")
	publish := func(s *strategy.Strategy) store.Entry {
		t.Helper()
		e, err := st.Publish(ctx, ns, s)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	publish(sample(t, "v1.0.0"))
	publish(inUse)
	publish(big(t, 4, 4, 16<<10))
	time.Sleep(1100 * time.Millisecond)
	kept := publish(inUse)
	// The next target, published before an Installation names it: kept.
	time.Sleep(1100 * time.Millisecond)
	next := publish(sample(t, "v1.2.0"))
	orphan, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{GenerateName: store.ChunkGenerateName, Labels: map[string]string{metakeys.ChunkLabel: ""}},
		Data:       map[string]string{store.ChunkKey: "left behind"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	if _, err := st.GC(ctx, ns, strategy.Identity{}); err == nil {
		t.Fatal("GC without an identity in use succeeded")
	}
	// A young orphan chunk may belong to a writer at work: kept.
	res, err := st.GC(ctx, ns, inUse.Identity)
	if err != nil {
		t.Fatal(err)
	}
	if res.Kept == nil || res.Kept.Name != kept.Name || len(res.Deleted) != 3 || len(res.OrphanChunks) != 0 {
		t.Fatalf("GC result %+v", res)
	}
	if got, want := names(configMaps(t, env, ns)), []string{kept.Name, next.Name, orphan.Name}; !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Fatalf("after GC: %q, want %q", got, want)
	}
	clk.SetTime(clk.Now().Add(store.DefaultOrphanChunkAge + time.Minute))
	res, err = st.GC(ctx, ns, inUse.Identity)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.OrphanChunks) != 1 || len(res.Deleted) != 0 {
		t.Fatalf("second GC result %+v", res)
	}
	if got, want := names(configMaps(t, env, ns)), slices.Sorted(slices.Values([]string{kept.Name, next.Name})); !slices.Equal(got, want) {
		t.Fatalf("after the second GC: %q, want %q", got, want)
	}
	if _, err := st.Load(ctx, ns, inUse.Identity); err != nil {
		t.Fatal(err)
	}
	// Once the next target is in use, the older one goes.
	if res, err := st.GC(ctx, ns, next.Identity); err != nil || len(res.Deleted) != 1 || res.Deleted[0].Name != kept.Name {
		t.Fatalf("GC with the next target in use: %+v %v", res, err)
	}
}

// TestEnsure publishes once per identity, and again over a corrupt copy.
func TestEnsure(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	st := newStore(t, env, store.Options{})
	want := sample(t, "v1.2.0")
	first, created, err := st.Ensure(ctx, ns, want)
	if err != nil || !created {
		t.Fatalf("first Ensure: created %v, %v", created, err)
	}
	second, created, err := st.Ensure(ctx, ns, want)
	if err != nil || created || second.Name != first.Name {
		t.Fatalf("second Ensure: created %v, %s, %v", created, second.Name, err)
	}
	if n := len(configMaps(t, env, ns)); n != 1 {
		t.Fatalf("%d configmaps after two Ensures", n)
	}
	update(t, env, ns, first.Name, func(cm *corev1.ConfigMap) {
		cm.Annotations[metakeys.DigestAnnotation] = codec.Digest(nil)
	})
	time.Sleep(1100 * time.Millisecond)
	third, created, err := st.Ensure(ctx, ns, want)
	if err != nil || !created || third.Name == first.Name {
		t.Fatalf("Ensure over a corrupt copy: created %v, %s, %v", created, third.Name, err)
	}
	if l, err := st.Load(ctx, ns, want.Identity); err != nil || l.Entry.Name != third.Name {
		t.Fatalf("load after repair: %v", err)
	}
}

// TestGCKeepsHistory: GCKeeping keeps the strategies a history names (a
// chunked one with its chunks, still readable) and deletes the others.
func TestGCKeepsHistory(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	st := newStore(t, env, store.Options{MaxObjectBytes: 16 << 10})
	old, err := st.Publish(ctx, ns, big(t, 4, 4, 16<<10))
	if err != nil {
		t.Fatal(err)
	}
	dropped, err := st.Publish(ctx, ns, sample(t, "v1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // the one in use is newer than both
	inUse := sample(t, "v1.1.0")
	if _, err := st.Publish(ctx, ns, inUse); err != nil {
		t.Fatal(err)
	}
	// A ConfigMap of the retained name with other content (replaced since)
	// would not be kept: the digest is part of what is retained.
	res, err := st.GCKeeping(ctx, ns, inUse.Identity, []store.Retain{{Name: old.Name, Digest: old.Digest}, {Name: dropped.Name, Digest: "sha256:other"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Retained) != 1 || res.Retained[0].Name != old.Name || len(res.Deleted) != 1 || res.Deleted[0].Name != dropped.Name {
		t.Fatalf("GCKeeping: retained %v, deleted %v; want %s retained and %s deleted", res.Retained, res.Deleted, old.Name, dropped.Name)
	}
	if len(old.Chunks) == 0 {
		t.Fatal("the retained strategy is not chunked: the test proves nothing about its chunks")
	}
	if _, err := st.Read(ctx, old); err != nil {
		t.Fatalf("the retained strategy no longer reads: %v", err)
	}
}
