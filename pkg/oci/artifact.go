package oci

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// emptyConfig is the config blob of every artifact.
var emptyConfig = []byte("{}")

// rawManifest is a manifest given as bytes, for remote.Put.
type rawManifest struct {
	body      []byte
	mediaType types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.body, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mediaType, nil }

// Pushed describes an artifact written to a registry.
type Pushed struct {
	// Reference is REPOSITORY@DIGEST of the artifact (without the scheme).
	Reference string
	// Digest is the manifest's "sha256:" digest.
	Digest string
	// LayerBytes is the size of the compressed text.
	LayerBytes int64
}

// Push stores a manifests text at ref (a tag, or a digest that must then
// be the artifact's) with meta's annotations. meta.Digest and
// meta.DecodedBytes are computed from the text. The same text and meta
// always give the same digest.
func (c *Client) Push(ctx context.Context, ref string, text []byte, meta Meta) (Pushed, error) {
	r, err := c.Parse(ref)
	if err != nil {
		return Pushed{}, err
	}
	if meta.Product == "" || meta.Version == "" {
		return Pushed{}, fmt.Errorf("%s: push: the artifact needs a product and a version", ref)
	}
	meta.Digest, meta.DecodedBytes = codec.Digest(text), len(text)
	gz, err := codec.Gzip(text)
	if err != nil {
		return Pushed{}, fmt.Errorf("%s: push: %w", ref, err)
	}
	config := static.NewLayer(emptyConfig, ConfigMediaType)
	layer := static.NewLayer(gz, LayerMediaType)
	cd, _ := config.Digest()
	ld, _ := layer.Digest()
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  ArtifactType,
		Config:        v1.Descriptor{MediaType: ConfigMediaType, Size: int64(len(emptyConfig)), Digest: cd},
		Layers: []v1.Descriptor{{MediaType: LayerMediaType, Size: int64(len(gz)), Digest: ld,
			Annotations: map[string]string{ociTitleAnnotation: layerTitle}}},
		Annotations: meta.annotations(),
	}
	body, err := json.Marshal(m)
	if err != nil {
		return Pushed{}, fmt.Errorf("%s: push: %w", ref, err)
	}
	digest, _, _ := v1.SHA256(bytes.NewReader(body))
	if d, ok := r.(name.Digest); ok && d.DigestStr() != digest.String() {
		return Pushed{}, fmt.Errorf("%s: push: the artifact's digest is %s, not the one the reference names", ref, digest)
	}
	opts := c.remote(ctx)
	for _, l := range []v1.Layer{config, layer} {
		if err := remote.WriteLayer(r.Context(), l, opts...); err != nil {
			return Pushed{}, refError(ref, "push blob", err)
		}
	}
	if err := remote.Put(r, rawManifest{body: body, mediaType: types.OCIManifestSchema1}, opts...); err != nil {
		return Pushed{}, refError(ref, "push manifest", err)
	}
	return Pushed{Reference: r.Context().Digest(digest.String()).String(), Digest: digest.String(), LayerBytes: int64(len(gz))}, nil
}

// Artifact is a strategy artifact read from a registry, checked: its
// manifest is a strategy's, its layer matches the manifest's digest, and
// its text matches the digest the manifest records.
type Artifact struct {
	// Reference is REPOSITORY@DIGEST (without the scheme).
	Reference string
	// Repository is the artifact's repository, e.g. "ghcr.io/acme/kubevirt".
	Repository string
	// Digest is the manifest's "sha256:" digest: what signatures name.
	Digest string
	// Meta is what the manifest's annotations say.
	Meta Meta
	// Text is the decoded manifests text.
	Text []byte
	// LayerBytes is the size of the compressed text.
	LayerBytes int64
}

// Pull reads the artifact ref names (a tag is resolved by the manifest
// GET itself) and checks it; nothing of an artifact that fails a check
// is returned.
func (c *Client) Pull(ctx context.Context, ref string) (*Artifact, error) {
	r, err := c.Parse(ref)
	if err != nil {
		return nil, err
	}
	opts := c.remote(ctx)
	desc, err := remote.Get(r, opts...)
	if err != nil {
		return nil, refError(ref, "pull manifest", err)
	}
	m, err := strategyManifest(desc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	limit := c.opts.MaxDecodedBytes
	if limit <= 0 {
		limit = codec.DefaultMaxDecodedBytes
	}
	ld := m.Layers[0]
	gz, err := c.readBlob(ctx, ref, r.Context(), ld, limit)
	if err != nil {
		return nil, err
	}
	text, err := codec.Gunzip(gz, limit)
	if err != nil {
		return nil, fmt.Errorf("%s: layer %s: %w", ref, ld.Digest, &trust.RefusedError{Step: "decode", Err: err})
	}
	meta := metaOf(m.Annotations)
	if got := codec.Digest(text); meta.Digest != got {
		return nil, fmt.Errorf("%s: the text hashes to %s, the manifest records %q: %w", ref, got, meta.Digest, codec.ErrDigestMismatch)
	}
	return &Artifact{Reference: r.Context().Digest(desc.Digest.String()).String(), Repository: r.Context().String(),
		Digest: desc.Digest.String(), Meta: meta, Text: text, LayerBytes: ld.Size}, nil
}

// strategyManifest returns the manifest of a strategy artifact, or an
// error wrapping ErrNotStrategy that says what the descriptor is instead.
func strategyManifest(desc *remote.Descriptor) (*v1.Manifest, error) {
	switch desc.MediaType {
	case types.OCIManifestSchema1, types.DockerManifestSchema2:
	default:
		return nil, fmt.Errorf("%w: media type %s (an index or an old manifest; want an OCI manifest of artifact type %s)", ErrNotStrategy, desc.MediaType, ArtifactType)
	}
	m, err := v1.ParseManifest(bytes.NewReader(desc.Manifest))
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if m.ArtifactType != ArtifactType && m.Config.MediaType != ConfigMediaType {
		what := m.ArtifactType
		if what == "" {
			what = string(m.Config.MediaType)
		}
		return nil, fmt.Errorf("%w: artifact type %s (want %s)", ErrNotStrategy, what, ArtifactType)
	}
	return oneLayer(m, LayerMediaType, ErrNotStrategy)
}

// oneLayer keeps the manifest's one layer of mediaType, or returns an
// error wrapping notKind when it has none or several.
func oneLayer(m *v1.Manifest, mediaType types.MediaType, notKind error) (*v1.Manifest, error) {
	var layers []v1.Descriptor
	for _, l := range m.Layers {
		if l.MediaType == mediaType {
			layers = append(layers, l)
		}
	}
	if len(layers) != 1 {
		return nil, fmt.Errorf("%w: %d layers of media type %s, want 1", notKind, len(layers), mediaType)
	}
	m.Layers = layers
	return m, nil
}
