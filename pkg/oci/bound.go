package oci

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/installstrategy/installstrategy/pkg/trust"
)

// What a registry may make a pull read. Each bound refuses before the
// bytes over it are read, with a *trust.RefusedError at step "size".
const (
	// MaxManifestBytes bounds a manifest a registry serves (the
	// distribution spec asks registries to accept 4 MiB;
	// go-containerregistry alone would read 100 MiB and parse it).
	MaxManifestBytes = 4 << 20
	// MaxSignatures bounds the signatures counted for one artifact (cosign
	// sets none; an artifact signed by every key of a rotation has a few).
	MaxSignatures = 50
	// MaxTagListBytes bounds one page of a repository's tag list (about
	// 50,000 tags of 80 characters).
	MaxTagListBytes = 4 << 20
)

// DefaultRequestTimeout bounds each read of a registry (GET, HEAD), from
// its sending to the end of its body's read: a registry that stalls (never
// answers, or stops sending a body) costs a caller this much per request,
// never a reconcile for good. A 64 MiB blob passes it at 1.1 MB/s.
const DefaultRequestTimeout = time.Minute

// timeoutTransport gives each read a deadline that runs until its
// response's body is closed (as http.Client.Timeout does; remote's
// options take a transport, not a client).
type timeoutTransport struct {
	next    http.RoundTripper
	timeout time.Duration
}

func (t timeoutTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		// Uploads (push, sign, copy: the plugin's, to the user's own
		// registry) take as long as their bytes need.
		return t.next.RoundTrip(req)
	}
	ctx, cancel := context.WithTimeout(req.Context(), t.timeout)
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelBody ends its request's deadline when it is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// boundedTransport refuses a manifest over MaxManifestBytes: by its
// Content-Length before its body is read, or as its body passes the bound.
// Blobs are bounded by readBlob, error bodies by go-containerregistry.
type boundedTransport struct{ next http.RoundTripper }

// isTagListPath reports whether p is /v2/NAME/tags/list.
func isTagListPath(p string) bool {
	return strings.HasPrefix(p, "/v2/") && strings.HasSuffix(p, "/tags/list")
}

// isManifestPath reports whether p is /v2/NAME/manifests/REFERENCE.
func isManifestPath(p string) bool {
	return strings.HasPrefix(p, "/v2/") && strings.HasSuffix(path.Dir(p), "/manifests")
}

func (t boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || req.Method != http.MethodGet || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	what, limit := "manifest", int64(MaxManifestBytes)
	switch {
	case isManifestPath(req.URL.Path):
	case isTagListPath(req.URL.Path):
		what, limit = "tag list", MaxTagListBytes
	default:
		return resp, nil
	}
	if resp.ContentLength > limit {
		resp.Body.Close()
		return nil, tooLarge(req, what, fmt.Sprintf("%d bytes", resp.ContentLength), limit)
	}
	resp.Body = &boundedBody{ReadCloser: resp.Body, left: limit, limit: limit, what: what, req: req}
	return resp, nil
}

func tooLarge(req *http.Request, what, size string, limit int64) error {
	return &trust.RefusedError{Step: "size", Err: fmt.Errorf("%w: the %s at %s is %s, the bound is %d", trust.ErrTooLarge, what, req.URL.Redacted(), size, limit)}
}

// boundedBody reads at most left bytes of a manifest and fails on more.
type boundedBody struct {
	io.ReadCloser
	left, limit int64
	what        string
	req         *http.Request
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	if int64(n) > b.left {
		return 0, tooLarge(b.req, b.what, "over the bound", b.limit)
	}
	b.left -= int64(n)
	return n, err
}

// readBlob downloads the blob d of repo, refusing one the descriptor says
// is over limit before a byte is read, and reading no more than the
// descriptor's size and one byte: the bytes must be its size and digest.
// Every blob a pull reads (a strategy's layer, a chart's config and
// archive, a signature's payload) is read here.
func (c *Client) readBlob(ctx context.Context, ref string, repo name.Repository, d v1.Descriptor, limit int64) ([]byte, error) {
	if d.Size > limit || d.Size < 0 {
		return nil, fmt.Errorf("%s: blob %s: %w", ref, d.Digest, &trust.RefusedError{Step: "size",
			Err: fmt.Errorf("%w: the manifest says %d bytes, over the limit of %d", trust.ErrTooLarge, d.Size, limit)})
	}
	layer, err := remote.Layer(repo.Digest(d.Digest.String()), c.remote(ctx)...)
	if err != nil {
		return nil, refError(ref, "pull blob "+d.Digest.String(), err)
	}
	rc, err := layer.Compressed()
	if err != nil {
		return nil, refError(ref, "pull blob "+d.Digest.String(), err)
	}
	defer rc.Close()
	b := make([]byte, d.Size+1)
	n, err := io.ReadFull(rc, b)
	switch {
	case err == nil:
		return nil, fmt.Errorf("%s: blob %s: %w", ref, d.Digest, &trust.RefusedError{Step: "size",
			Err: fmt.Errorf("%w: more than the %d bytes the manifest says", trust.ErrTooLarge, d.Size)})
	case err != io.ErrUnexpectedEOF && err != io.EOF:
		// go-containerregistry's reader fails a digest mismatch at
		// the blob's end: the check below says it plainly.
		if int64(n) != d.Size {
			return nil, refError(ref, "pull blob "+d.Digest.String(), err)
		}
	}
	b = b[:n]
	if int64(n) != d.Size {
		return nil, fmt.Errorf("%s: blob %s: %d bytes, the manifest says %d", ref, d.Digest, n, d.Size)
	}
	if sum, _, _ := v1.SHA256(bytes.NewReader(b)); sum != d.Digest {
		return nil, fmt.Errorf("%s: blob %s: the bytes hash to %s", ref, d.Digest, sum)
	}
	return b, nil
}
