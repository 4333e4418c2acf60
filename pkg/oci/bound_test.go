package oci_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/installstrategy/installstrategy/internal/alloctest"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/oci/ocitest"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// refused fails the test unless err is a size refusal (*trust.RefusedError
// wrapping trust.ErrTooLarge) or, with step "decode", a decode refusal.
func refused(t *testing.T, err error, step string) {
	t.Helper()
	var r *trust.RefusedError
	if !errors.As(err, &r) || r.Step != step || step == "size" && !errors.Is(err, trust.ErrTooLarge) {
		t.Fatalf("error %v (%T), want a refusal at step %s", err, err, step)
	}
}

// hugeManifests serves, on loopback, go-containerregistry's registry,
// except that every manifest of the repository acme/huge is a JSON
// document of size bytes, streamed as it is written (with its
// Content-Length when withLength).
func hugeManifests(t *testing.T, size int, withLength bool) string {
	t.Helper()
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !strings.HasPrefix(req.URL.Path, "/v2/acme/huge/manifests/") {
			h.ServeHTTP(w, req)
			return
		}
		w.Header().Set("Content-Type", string(types.OCIManifestSchema1))
		if withLength {
			w.Header().Set("Content-Length", strconv.Itoa(size))
		}
		head := `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","annotations":{"a":"`
		tail := `"}}`
		if _, err := io.WriteString(w, head); err != nil {
			return
		}
		chunk := bytes.Repeat([]byte("x"), 32<<10)
		for left := size - len(head) - len(tail); left > 0; left -= len(chunk) {
			if _, err := w.Write(chunk[:min(left, len(chunk))]); err != nil {
				return // the client stopped reading
			}
		}
		_, _ = io.WriteString(w, tail)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// A manifest over oci.MaxManifestBytes is refused by every read of a
// manifest (pull, chart pull, copy, signatures) before more than the bound
// is read: by its Content-Length before its body, or as a streamed body
// passes the bound. go-containerregistry alone reads 100 MiB and parses
// it.
func TestManifestBound(t *testing.T) {
	ctx := t.Context()
	c := newClient(t)
	const size = 64 << 20
	for _, withLength := range []bool{true, false} {
		host := hugeManifests(t, size, withLength)
		ref := "oci://" + host + "/acme/huge:v1"
		for _, tc := range []struct {
			name string
			read func() error
		}{
			{"pull", func() error { _, err := c.Pull(ctx, ref); return err }},
			{"pull chart", func() error { _, err := c.PullChart(ctx, ref, 0); return err }},
			{"copy", func() error { _, err := c.Copy(ctx, ref, "oci://"+host+"/acme/copy:v1"); return err }},
			{"signatures", func() error {
				_, err := c.Signatures(ctx, &oci.Artifact{Repository: host + "/acme/huge", Digest: "sha256:" + strings.Repeat("0", 64)})
				return err
			}},
		} {
			t.Run(fmt.Sprintf("%s, content length %t", tc.name, withLength), func(t *testing.T) {
				var err error
				n := alloctest.Allocated(func() { err = tc.read() })
				refused(t, err, "size")
				if n > 4*oci.MaxManifestBytes {
					t.Fatalf("a refused manifest of %d bytes allocated %d bytes", size, n)
				}
			})
		}
	}
}

// rawManifest is a manifest given as bytes, for remote.Put.
type rawManifest []byte

func (m rawManifest) RawManifest() ([]byte, error)        { return m, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

// putArtifact stores blob in the repository of ref and, at ref, a strategy
// manifest whose layer descriptor has the blob's digest and the given size
// (the blob's own when size < 0), and whose annotations record textDigest.
func putArtifact(t testing.TB, ref string, blob []byte, size int64, textDigest string) {
	t.Helper()
	r, err := name.ParseReference(strings.TrimPrefix(ref, oci.Scheme))
	if err != nil {
		t.Fatal(err)
	}
	l := static.NewLayer(blob, oci.LayerMediaType)
	if err := remote.WriteLayer(r.Context(), l); err != nil {
		t.Fatal(err)
	}
	d, _ := l.Digest()
	if size < 0 {
		size = int64(len(blob))
	}
	m := manifestOf(v1.Descriptor{MediaType: oci.LayerMediaType, Size: size, Digest: d}, textDigest)
	if err := remote.Put(r, rawManifest(m)); err != nil {
		t.Fatal(err)
	}
}

// manifestOf is a strategy manifest of one layer, recording textDigest.
func manifestOf(layer v1.Descriptor, textDigest string) []byte {
	config := static.NewLayer([]byte("{}"), oci.ConfigMediaType)
	cd, _ := config.Digest()
	m, _ := json.Marshal(v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, ArtifactType: oci.ArtifactType,
		Config: v1.Descriptor{MediaType: oci.ConfigMediaType, Size: 2, Digest: cd}, Layers: []v1.Descriptor{layer},
		Annotations: map[string]string{metakeys.ProductAnnotation: "sample", metakeys.VersionAnnotation: "v1", metakeys.DigestAnnotation: textDigest}})
	return m
}

// A layer is read through one bound: a descriptor over the limit is
// refused before a byte of the blob is read, a blob longer than its
// descriptor says is refused after its size and one byte, and a layer that
// decompresses past the limit (a gzip bomb) is refused as its decoded
// bytes pass it; each costs about the limit, not the input.
func TestLayerBound(t *testing.T) {
	ctx := t.Context()
	reg := ocitest.New(t)
	const limit = 4 << 20
	c, err := oci.New(oci.Options{MaxDecodedBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	random := make([]byte, 16<<20)
	_, _ = rand.Read(random)
	bomb, err := codec.Gzip(make([]byte, 256<<20))
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		name  string
		blob  []byte
		size  int64
		step  string
		bound uint64
	}{
		{name: "descriptor over the limit", blob: []byte("x"), size: 1 << 40, step: "size", bound: 1 << 20},
		{name: "blob longer than its descriptor", blob: random, size: 100, step: "size", bound: 1 << 20},
		{name: "blob over the limit, descriptor honest", blob: random, size: -1, step: "size", bound: 1 << 20},
		{name: "gzip bomb", blob: bomb, size: -1, step: "decode", bound: 2*(limit+1) + uint64(len(bomb)) + 2<<20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := reg.Ref(fmt.Sprintf("acme/layer:case%d", i))
			putArtifact(t, ref, tc.blob, tc.size, codec.Digest(nil))
			var err error
			n := alloctest.Allocated(func() { _, err = c.Pull(ctx, ref) })
			refused(t, err, tc.step)
			if n > tc.bound {
				t.Fatalf("the refusal allocated %d bytes, the bound is %d", n, tc.bound)
			}
		})
	}
}

// The signatures of an artifact are counted before any is read: more than
// oci.MaxSignatures is a refusal of the artifact's signatures, for every
// reader (Signatures, Sign, Copy), and MaxSignatures are read.
func TestSignatureCountBound(t *testing.T) {
	ctx := t.Context()
	reg := ocitest.New(t)
	c := newClient(t)
	sigs := func(from, n int) []oci.Signature {
		var out []oci.Signature
		for i := from; i < from+n; i++ {
			out = append(out, oci.Signature{Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)), Signature: "c2lnbmF0dXJl"})
		}
		return out
	}
	ref := reg.Ref("acme/sample:v1")
	p := push(ctx, t, c, ref, "v1.0.0")
	a, err := c.Pull(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddSignatures(ctx, a.Repository, p.Digest, sigs(0, oci.MaxSignatures)); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Signatures(ctx, a); err != nil || len(got) != oci.MaxSignatures {
		t.Fatalf("%d signatures, %v; want %d", len(got), err, oci.MaxSignatures)
	}
	if err := c.AddSignatures(ctx, a.Repository, p.Digest, sigs(oci.MaxSignatures, 1)); err != nil {
		t.Fatal(err)
	}
	_, err = c.Signatures(ctx, a)
	refused(t, err, "size")
	signer, err := trust.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Sign(ctx, a, signer)
	refused(t, err, "size")
	_, err = c.Copy(ctx, ref, reg.Ref("acme/copy:v1"))
	refused(t, err, "size")
}

// A tag list page over oci.MaxTagListBytes is refused as its body passes
// the bound (a registry that lists is not trusted).
func TestTagListBound(t *testing.T) {
	const size = 64 << 20
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v2/acme/huge/tags/list" {
			w.WriteHeader(http.StatusOK) // the ping
			return
		}
		_, _ = io.WriteString(w, `{"name":"acme/huge","tags":["`)
		chunk := bytes.Repeat([]byte("x"), 32<<10)
		for left := size; left > 0; left -= len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		_, _ = io.WriteString(w, `"]}`)
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	c := newClient(t)
	var err error
	n := alloctest.Allocated(func() {
		_, _, err = c.Tags(t.Context(), "oci://"+strings.TrimPrefix(srv.URL, "http://")+"/acme/huge", 0)
	})
	refused(t, err, "size")
	if n > 8*oci.MaxTagListBytes {
		t.Fatalf("a refused tag list of %d bytes allocated %d bytes", size, n)
	}
}
