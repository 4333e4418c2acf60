// Package oci owns strategies as OCI artifacts: pushing a strategy's
// manifests text to a registry, resolving a tag to a digest with one
// manifest HEAD, pulling and checking an artifact, copying it (with its
// signatures) to a mirror, and cosign-compatible signatures that bind the
// artifact's digest to the product, version and identifier it claims.
//
// An artifact is an OCI image manifest with artifactType ArtifactType, an
// empty JSON config of media type ConfigMediaType, and one layer of media
// type LayerMediaType holding the gzip-compressed manifests text (the
// same bytes for the same text). The manifest's annotations name the
// product, version, registry, identifier and the text's digest (the
// codec.Native*Annotation keys), so `crane manifest` or `oras manifest
// fetch` shows what an artifact is without downloading its layer.
//
// Signatures are cosign's keyed image signatures, stored the way cosign
// stores them: an image tagged "sha256-<hex>.sig" in the same repository,
// each layer a simple-signing payload (media type
// simpleSigningMediaType) with the base64 signature in the layer
// annotation signatureAnnotation. The payload's "optional" section carries
// the trust.Statement fields, so `cosign verify --key cosign.pub
// --insecure-ignore-tlog -a installstrategy.io/version=v1.2.0 REF`
// checks the same binding.
package oci

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
)

// Media types of a strategy artifact.
const (
	// ArtifactType is the manifest's artifactType.
	ArtifactType = "application/vnd.installstrategy.strategy.v1"
	// ConfigMediaType is the media type of the manifest's config, an empty
	// JSON object (registries without artifactType support still tell a
	// strategy by it).
	ConfigMediaType = "application/vnd.installstrategy.strategy.config.v1+json"
	// LayerMediaType is the media type of the one layer: the manifests
	// text, gzip-compressed.
	LayerMediaType = "application/vnd.installstrategy.strategy.manifests.v1+gzip"
	// layerTitle is the layer's org.opencontainers.image.title.
	layerTitle = "manifests.yaml"
)

// Scheme starts every reference this package takes: oci://HOST/REPO:TAG
// or oci://HOST/REPO@sha256:HEX.
const Scheme = "oci://"

// ErrNotStrategy: the reference names something that is not a strategy
// artifact (another artifact type, an image, an index).
var ErrNotStrategy = errors.New("not a strategy artifact")

// ErrNotFound: the registry has no manifest (or signature) at the
// reference.
var ErrNotFound = errors.New("not found")

// IsReference reports whether s is an oci:// reference.
func IsReference(s string) bool { return strings.HasPrefix(s, Scheme) }

// Options configure a Client. The zero value pulls anonymously over
// HTTPS (plain HTTP for loopback registries, as go-containerregistry
// does) and refuses texts over codec.DefaultMaxDecodedBytes.
type Options struct {
	// Keychain finds credentials for a registry; nil means anonymous.
	// authn.DefaultKeychain reads the docker config and its credential
	// helpers, as docker, cosign and crane do.
	Keychain authn.Keychain
	// Transport carries the requests; nil means remote.DefaultTransport.
	Transport http.RoundTripper
	// Insecure allows plain HTTP to any registry.
	Insecure bool
	// UserAgent is sent with every request; "" means go-containerregistry's.
	UserAgent string
	// MaxDecodedBytes refuses texts larger than this; 0 means
	// codec.DefaultMaxDecodedBytes.
	MaxDecodedBytes int64
	// RequestTimeout bounds each read of a registry (GET, HEAD), its
	// body's included; 0 means DefaultRequestTimeout.
	RequestTimeout time.Duration
}

// Client reads and writes strategy artifacts. It is safe for concurrent
// use, and reuses its connections and registry tokens across calls (a
// resolve of a known repository is one HEAD request).
type Client struct {
	opts   Options
	puller *remote.Puller
	pusher *remote.Pusher
}

// New returns a Client.
func New(opts Options) (*Client, error) {
	var base []remote.Option
	if opts.Keychain != nil {
		base = append(base, remote.WithAuthFromKeychain(opts.Keychain))
	}
	tr := opts.Transport
	if tr == nil {
		tr = remote.DefaultTransport
	}
	timeout := opts.RequestTimeout
	if timeout <= 0 {
		timeout = DefaultRequestTimeout
	}
	base = append(base, remote.WithTransport(boundedTransport{next: timeoutTransport{next: tr, timeout: timeout}}))
	if opts.UserAgent != "" {
		base = append(base, remote.WithUserAgent(opts.UserAgent))
	}
	puller, err := remote.NewPuller(base...)
	if err != nil {
		return nil, fmt.Errorf("oci client: %w", err)
	}
	pusher, err := remote.NewPusher(base...)
	if err != nil {
		return nil, fmt.Errorf("oci client: %w", err)
	}
	return &Client{opts: opts, puller: puller, pusher: pusher}, nil
}

// Parse parses an oci:// reference.
func (c *Client) Parse(ref string) (name.Reference, error) {
	r, _, err := c.parse(ref, false)
	return r, err
}

// parse parses an oci:// reference; with bare, a repository without tag or
// digest is returned as repo (and r nil).
func (c *Client) parse(ref string, bare bool) (r name.Reference, repo name.Repository, err error) {
	if !IsReference(ref) {
		return nil, repo, fmt.Errorf("%s: not an OCI reference (want oci://HOST/REPOSITORY:TAG or oci://HOST/REPOSITORY@sha256:DIGEST)", ref)
	}
	rest := strings.TrimPrefix(ref, Scheme)
	nopts := c.nameOpts()
	// A reference must name its registry: oci://nginx:1 is more likely
	// a mistake than Docker Hub.
	if i := strings.IndexByte(rest, '/'); i < 0 || !strings.ContainsAny(rest[:i], ".:") && rest[:i] != "localhost" {
		return nil, repo, fmt.Errorf("%s: the reference names no registry host (want oci://HOST/REPOSITORY:TAG)", ref)
	}
	r, err = name.ParseReference(rest, append(nopts, name.StrictValidation)...)
	if err == nil {
		return r, repo, nil
	}
	if repo, rerr := name.NewRepository(rest, append(nopts, name.StrictValidation)...); rerr == nil {
		if bare {
			return nil, repo, nil
		}
		return nil, repo, fmt.Errorf("%s: the reference names no tag or digest (want :TAG or @sha256:DIGEST)", ref)
	}
	return nil, repo, fmt.Errorf("%s: %w", ref, err)
}

func (c *Client) remote(ctx context.Context) []remote.Option {
	return []remote.Option{remote.WithContext(ctx), remote.Reuse(c.puller), remote.Reuse(c.pusher)}
}

// Resolve returns the digest of the manifest ref names, with one manifest
// HEAD request (no manifest or layer is downloaded). A digest reference
// is checked to exist the same way.
func (c *Client) Resolve(ctx context.Context, ref string) (string, error) {
	r, err := c.Parse(ref)
	if err != nil {
		return "", err
	}
	d, err := remote.Head(r, c.remote(ctx)...)
	if err != nil {
		return "", refError(ref, "resolve", err)
	}
	return d.Digest.String(), nil
}

// refError names the reference and the step, and tells a missing manifest
// (ErrNotFound) from other failures.
func refError(ref, step string, err error) error {
	var te *transport.Error
	if errors.As(err, &te) && te.StatusCode == http.StatusNotFound {
		return fmt.Errorf("%s: %s: %w (%v)", ref, step, ErrNotFound, err)
	}
	return fmt.Errorf("%s: %s: %w", ref, step, err)
}

// Meta is what a strategy artifact's manifest annotations say of it.
type Meta struct {
	// Product, Version, Registry and Identifier are the strategy's.
	Product, Version, Registry, Identifier string
	// Digest is "sha256:<hex>" of the decoded manifests text.
	Digest string
	// DecodedBytes is the size of the decoded text.
	DecodedBytes int
}

const (
	ociVersionAnnotation = "org.opencontainers.image.version"
	ociTitleAnnotation   = "org.opencontainers.image.title"
)

func (m Meta) annotations() map[string]string {
	a := map[string]string{
		metakeys.ProductAnnotation:     m.Product,
		metakeys.VersionAnnotation:     m.Version,
		metakeys.DigestAnnotation:      m.Digest,
		metakeys.DecodedSizeAnnotation: strconv.Itoa(m.DecodedBytes),
		ociVersionAnnotation:           m.Version,
		ociTitleAnnotation:             m.Product,
	}
	if m.Registry != "" {
		a[metakeys.RegistryAnnotation] = m.Registry
	}
	if m.Identifier != "" {
		a[metakeys.IdentifierAnnotation] = m.Identifier
	}
	return a
}

func metaOf(a map[string]string) Meta {
	n, _ := strconv.Atoi(a[metakeys.DecodedSizeAnnotation])
	return Meta{Product: a[metakeys.ProductAnnotation], Version: a[metakeys.VersionAnnotation],
		Registry: a[metakeys.RegistryAnnotation], Identifier: a[metakeys.IdentifierAnnotation],
		Digest: a[metakeys.DigestAnnotation], DecodedBytes: n}
}

// DefaultProduct is the product a repository's artifacts are taken to be
// of unless told otherwise: the repository's last path element
// (ghcr.io/acme/kubevirt holds kubevirt).
func DefaultProduct(r name.Reference) string { return path.Base(r.Context().RepositoryStr()) }
