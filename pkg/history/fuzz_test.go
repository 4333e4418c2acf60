package history

import (
	"encoding/base64"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/internal/alloctest"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// FuzzOpenRevision feeds arbitrary bytes to every decode a rollback
// makes of what a namespace ConfigMap editor may write: the history
// ConfigMap's records, the anchor annotation (the installer writes it, but
// it is read as untrusted too) and a revision ConfigMap's data, raw and
// as base64, under an anchored digest of another text and under the
// digest of the bytes themselves (so the decode and the parse run).
// Nothing panics, nothing opens that does not hash to the anchor, and no
// input allocates more than alloctest.MaxPerInput.
func FuzzOpenRevision(f *testing.F) {
	good := []byte("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: ns\n")
	f.Add(good)
	f.Add([]byte(`[{"revision":2,"identity":{"version":"v2"},"configMap":"x","digest":"sha256:00"},{"revision":1}]`))
	f.Add([]byte("---\nkind: A\n---\nkind: A\n"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Add([]byte("H4sIAAAAAAAA/+z9"))
	owner := inventory.Owner{Namespace: "ns", Name: "small", Kind: inventory.KindPlugin}
	id := strategy.Identity{Version: "v1", Registry: "example.com"}
	other := codec.Digest(good)
	base, err := codec.EncodeText(good, codec.EncodeOptions{Namespace: "ns", Name: "installstrategy-revision-small-1", Identity: id})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		hcm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName(owner), Namespace: "ns"}, Data: map[string]string{RevisionsKey: string(data)}}
		if n := alloctest.Allocated(func() { _, _ = decode(owner, hcm) }); n > alloctest.MaxPerInput {
			t.Fatalf("history records: %d bytes allocated", n)
		}
		if n := alloctest.Allocated(func() { _, _ = decodeAnchor(owner, string(data)) }); n > alloctest.MaxPerInput {
			t.Fatalf("anchor: %d bytes allocated", n)
		}
		for _, form := range []string{string(data), base64.StdEncoding.EncodeToString(data)} {
			for _, digest := range []string{other, codec.Digest(data)} {
				cm := base.DeepCopy()
				cm.Annotations[metakeys.DigestAnnotation] = digest
				cm.Data[codec.ManifestsKey] = form
				a := Anchored{Revision: 1, Digest: digest, Identity: id}
				var v any
				n := alloctest.Allocated(func() {
					got, err := OpenRevision(cm, a, OpenOptions{})
					if err == nil {
						v = got
						if got.Digest != digest {
							t.Fatalf("opened a text hashing to %s under the anchored %s", got.Digest, digest)
						}
					}
				})
				if n > alloctest.MaxPerInput {
					t.Fatalf("revision data (%d bytes): %d bytes allocated", len(form), n)
				}
				if v != nil && digest == other && string(data) != string(good) {
					t.Fatalf("opened other bytes under the digest of another text")
				}
			}
		}
	})
}

// TestOpenRevisionRefusesABomb: a revision ConfigMap that keeps the
// anchored digest and identity but holds 80 MiB of empty documents
// gzipped into a few hundred KB is refused at the bounded decode.
func TestOpenRevisionRefusesABomb(t *testing.T) {
	id := strategy.Identity{Version: "v1"}
	genuine := []byte("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: ns\n")
	cm, err := codec.EncodeText(genuine, codec.EncodeOptions{Namespace: "ns", Name: "r", Identity: id})
	if err != nil {
		t.Fatal(err)
	}
	a := Anchored{Revision: 1, Digest: cm.Annotations[metakeys.DigestAnnotation], Identity: id}
	if v, err := OpenRevision(cm, a, OpenOptions{}); err != nil || len(v.Strategy.Objects) != 1 || v.Strategy.Identity != id {
		t.Fatalf("genuine revision: %v", err)
	}
	bomb, err := codec.EncodeText([]byte(strings.Repeat("---\nkind: A\n", 80<<20/12)), codec.EncodeOptions{Namespace: "ns", Name: "r", Identity: id})
	if err != nil {
		t.Fatal(err)
	}
	forged := cm.DeepCopy()
	forged.Data = bomb.Data
	n := alloctest.Allocated(func() { _, err = OpenRevision(forged, a, OpenOptions{}) })
	if err == nil || n > alloctest.MaxPerInput {
		t.Fatalf("bomb under the anchored digest: %v, %d bytes allocated", err, n)
	}
	for name, edit := range map[string]func(*corev1.ConfigMap){
		"another digest recorded": func(c *corev1.ConfigMap) { c.Annotations[metakeys.DigestAnnotation] = codec.Digest([]byte("x")) },
		"another identity":        func(c *corev1.ConfigMap) { c.Annotations[metakeys.VersionAnnotation] = "v9" },
		"a chunked head":          func(c *corev1.ConfigMap) { c.Annotations[metakeys.ChunksAnnotation] = "[]" },
	} {
		c := cm.DeepCopy()
		edit(c)
		if _, err := OpenRevision(c, a, OpenOptions{}); err == nil {
			t.Errorf("%s: opened", name)
		}
	}
}
