package oci_test

import (
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"

	"github.com/installstrategy/installstrategy/internal/alloctest"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/oci/ocitest"
)

// FuzzPull serves arbitrary bytes from a loopback registry as a strategy
// artifact's layer (under a manifest that names it, or under manifest,
// when it is not empty, as the manifest itself) and pulls it. Nothing may
// panic, no pull may allocate more than alloctest.MaxPerInput, and a pull
// that succeeds returns a text within the limit whose digest is the one
// its manifest records.
func FuzzPull(f *testing.F) {
	const limit = 1 << 20
	good := text("v1.0.0")
	gz, _ := codec.Gzip(good)
	f.Add([]byte(nil), gz, codec.Digest(good))
	bomb, _ := codec.Gzip(make([]byte, 4*limit))
	f.Add([]byte(nil), bomb, codec.Digest(nil))
	f.Add([]byte(nil), []byte("not gzip"), codec.Digest(nil))
	d, _ := staticLayer(gz).Digest()
	f.Add(manifestOf(v1.Descriptor{MediaType: oci.LayerMediaType, Size: int64(len(gz)), Digest: d}, codec.Digest(good)), gz, "")
	f.Add(manifestOf(v1.Descriptor{MediaType: oci.LayerMediaType, Size: 1 << 40, Digest: d}, codec.Digest(good)), gz, "")
	f.Add([]byte(`{"schemaVersion":2,"layers":[`), gz, "")

	reg := ocitest.New(f)
	c, err := oci.New(oci.Options{MaxDecodedBytes: limit})
	if err != nil {
		f.Fatal(err)
	}
	ctx := f.Context()
	ref := reg.Ref("acme/fuzz:latest")
	r, err := name.ParseReference(reg.Host() + "/acme/fuzz:latest")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, manifest, layer []byte, textDigest string) {
		reg.Take() // the registry's request log grows with every input
		l := staticLayer(layer)
		if err := remote.WriteLayer(r.Context(), l); err != nil {
			t.Fatal(err)
		}
		if len(manifest) == 0 {
			ld, _ := l.Digest()
			manifest = manifestOf(v1.Descriptor{MediaType: oci.LayerMediaType, Size: int64(len(layer)), Digest: ld}, textDigest)
		}
		if err := remote.Put(r, rawManifest(manifest)); err != nil {
			return // the registry refused it: nothing to pull
		}
		var a *oci.Artifact
		n := alloctest.Allocated(func() { a, err = c.Pull(ctx, ref) })
		if n > alloctest.MaxPerInput {
			t.Fatalf("the pull allocated %d bytes, the bound is %d", n, alloctest.MaxPerInput)
		}
		if err != nil {
			return
		}
		if len(a.Text) > limit || codec.Digest(a.Text) != a.Meta.Digest {
			t.Fatalf("pulled %d bytes hashing to %s, the manifest records %s", len(a.Text), codec.Digest(a.Text), a.Meta.Digest)
		}
	})
}

func staticLayer(b []byte) v1.Layer { return static.NewLayer(b, oci.LayerMediaType) }
