package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// fleetTraffic is what a registry served one client: requests by kind and
// response body bytes.
type fleetTraffic struct {
	requests int
	// heads are manifest HEADs of a strategy tag or digest (the polls).
	heads int
	// manifests are manifest GETs of a strategy artifact.
	manifests int
	// signatures are requests of a signature tag (sha256-….sig), HEAD or
	// GET, and otherBlobs every blob but a strategy layer (signature
	// payloads, configs).
	signatures, otherBlobs int
	// layers are GETs of a strategy layer; layerBytes their bytes.
	layers     int
	layerBytes int64
	// bytes is every response body byte.
	bytes int64
}

func (t fleetTraffic) minus(o fleetTraffic) fleetTraffic {
	return fleetTraffic{requests: t.requests - o.requests, heads: t.heads - o.heads, manifests: t.manifests - o.manifests,
		signatures: t.signatures - o.signatures, otherBlobs: t.otherBlobs - o.otherBlobs, layers: t.layers - o.layers,
		layerBytes: t.layerBytes - o.layerBytes, bytes: t.bytes - o.bytes}
}

// fleetRegistry is go-containerregistry's in-memory registry on loopback
// (what ocitest.Registry serves), counting what it serves to each client
// by the first word of its User-Agent.
type fleetRegistry struct {
	*httptest.Server
	mu      sync.Mutex
	clients map[string]*fleetTraffic
	// layerDigests are the strategy layers ("sha256:…") published.
	layerDigests map[string]bool
	// reads are each client's requests other than manifest HEADs, as
	// "+SECONDS METHOD PATH" from the registry's start.
	reads map[string][]string
	start time.Time
}

func newFleetRegistry(tb testing.TB) *fleetRegistry {
	tb.Helper()
	r := &fleetRegistry{clients: map[string]*fleetTraffic{}, layerDigests: map[string]bool{}, reads: map[string][]string{}, start: time.Now()}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		cw := &countingWriter{ResponseWriter: w}
		h.ServeHTTP(cw, req)
		r.count(req, cw.n)
	}))
	tb.Cleanup(r.Close)
	return r
}

// countingWriter counts the body bytes written.
type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.n += int64(n)
	return n, err
}

func (r *fleetRegistry) count(req *http.Request, n int64) {
	client, _, _ := strings.Cut(req.UserAgent(), " ")
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.clients[client]
	if t == nil {
		t = &fleetTraffic{}
		r.clients[client] = t
	}
	t.requests++
	t.bytes += n
	p := req.URL.Path
	if req.Method != http.MethodHead || !strings.Contains(p, "/manifests/") {
		r.reads[client] = append(r.reads[client], fmt.Sprintf("+%.3fs %s %s", time.Since(r.start).Seconds(), req.Method, p))
	}
	switch i := strings.LastIndex(p, "/manifests/"); {
	case i >= 0 && strings.HasSuffix(p, ".sig"):
		t.signatures++
	case i >= 0 && req.Method == http.MethodHead:
		t.heads++
	case i >= 0:
		t.manifests++
	case strings.Contains(p, "/blobs/") && r.layerDigests[p[strings.LastIndexByte(p, '/')+1:]]:
		t.layers++
		t.layerBytes += n
	case strings.Contains(p, "/blobs/"):
		t.otherBlobs++
	}
}

// served is what the registry served client so far.
func (r *fleetRegistry) served(client string) fleetTraffic {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t := r.clients[client]; t != nil {
		return *t
	}
	return fleetTraffic{}
}

// readsOf is client's requests other than manifest HEADs so far.
func (r *fleetRegistry) readsOf(client string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reads[client])
}

// Host is the registry's HOST:PORT.
func (r *fleetRegistry) Host() string { return strings.TrimPrefix(r.URL, "http://") }

// Ref is oci://HOST:PORT/path.
func (r *fleetRegistry) Ref(path string) string { return "oci://" + r.Host() + "/" + path }

// fleetPublisher is the User-Agent of the test's own pushes (not counted
// as either side's traffic).
const fleetPublisher = "fleet-publisher"

// fleetProductName is the product of the fleet's artifacts (the last
// element of acme/sample, what the Installations expect).
const fleetProductName = "sample"

// fleetRelease is a signed release of the fleet's product in the
// registry, under its own version tag.
type fleetRelease struct {
	version    string
	text       []byte
	meta       oci.Meta
	digest     string // the manifest's
	layerBytes int64
}

// fleetText is testenv.NamespacedProduct at version without a namespace
// in it: the namespaced objects land in each Installation's namespace
// (apply.DefaultNamespaces), so one artifact serves every namespace.
func fleetText(tb testing.TB, version string) ([]byte, oci.Meta) {
	tb.Helper()
	s := testenv.NamespacedProduct(tb, "fleet", version)
	for _, o := range s.Objects {
		o.SetNamespace("")
		subjects, ok, _ := unstructured.NestedSlice(o.Object, "subjects")
		if !ok {
			continue
		}
		for _, sub := range subjects {
			delete(sub.(map[string]any), "namespace")
		}
		if err := unstructured.SetNestedSlice(o.Object, subjects, "subjects"); err != nil {
			tb.Fatal(err)
		}
	}
	text, err := s.Serialize()
	if err != nil {
		tb.Fatal(err)
	}
	return text, oci.Meta{Product: fleetProductName, Version: version, Registry: s.Identity.Registry, Identifier: s.Identity.Identifier}
}

// publishFleet pushes and signs each version of the fleet's product under
// acme/sample:VERSION and records its layer as a strategy layer.
func publishFleet(ctx context.Context, tb testing.TB, reg *fleetRegistry, c *oci.Client, signer *trust.Signer, versions ...string) []fleetRelease {
	tb.Helper()
	var out []fleetRelease
	for _, v := range versions {
		text, meta := fleetText(tb, v)
		ref := reg.Ref("acme/sample:" + v)
		p, err := c.Push(ctx, ref, text, meta)
		if err != nil {
			tb.Fatal(err)
		}
		a, err := c.Pull(ctx, ref)
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := c.Sign(ctx, a, signer); err != nil {
			tb.Fatal(err)
		}
		desc, err := remote.Get(mustRef(tb, strings.TrimPrefix(ref, oci.Scheme)), remote.WithContext(ctx), remote.WithUserAgent(fleetPublisher))
		if err != nil {
			tb.Fatal(err)
		}
		m, err := v1.ParseManifest(bytes.NewReader(desc.Manifest))
		if err != nil {
			tb.Fatal(err)
		}
		reg.mu.Lock()
		for _, l := range m.Layers {
			reg.layerDigests[l.Digest.String()] = true
		}
		reg.mu.Unlock()
		out = append(out, fleetRelease{version: v, text: text, meta: meta, digest: p.Digest, layerBytes: p.LayerBytes})
	}
	return out
}

// moveTag points acme/sample:stable at release (a manifest PUT; the blobs
// are there).
func moveTag(ctx context.Context, tb testing.TB, reg *fleetRegistry, c *oci.Client, rel fleetRelease) {
	tb.Helper()
	p, err := c.Push(ctx, reg.Ref("acme/sample:stable"), rel.text, rel.meta)
	if err != nil {
		tb.Fatal(err)
	}
	if p.Digest != rel.digest {
		tb.Fatalf("stable moved to %s, want %s of %s", p.Digest, rel.digest, rel.version)
	}
}

func mustRef(tb testing.TB, s string) name.Reference {
	tb.Helper()
	r, err := name.ParseReference(s)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// fluxBaseline is the baseline of BenchmarkOCIFleet: what Flux's
// source-controller does for n OCIRepository objects of one tag with
// cosign verification, with go-containerregistry as Flux uses it: every
// interval each source resolves the tag with one manifest HEAD
// (crane.Digest); when the digest differs from the source's last, the
// source verifies the signature (the .sig manifest and its payload
// layers, as cosign reads them) and pulls the artifact (its manifest and
// its layer), for itself: sources share nothing.
type fluxBaseline struct {
	tag      name.Reference
	opts     []remote.Option
	interval time.Duration

	polls atomic.Int64
	mu    sync.Mutex
	at    []string // each source's digest
	err   error
}

// fluxUserAgent is the baseline's User-Agent.
const fluxUserAgent = "flux-baseline"

func newFluxBaseline(tb testing.TB, reg *fleetRegistry, n int, interval time.Duration) *fluxBaseline {
	tb.Helper()
	puller, err := remote.NewPuller(remote.WithUserAgent(fluxUserAgent))
	if err != nil {
		tb.Fatal(err)
	}
	return &fluxBaseline{tag: mustRef(tb, reg.Host()+"/acme/sample:stable"), opts: []remote.Option{remote.Reuse(puller)}, interval: interval, at: make([]string, n)}
}

// run polls with every source, their first polls spread over one
// interval, until ctx ends.
func (f *fluxBaseline) run(ctx context.Context) {
	var wg sync.WaitGroup
	for i := range f.at {
		wg.Go(func() {
			delay := f.interval * time.Duration(i) / time.Duration(len(f.at))
			for {
				select {
				case <-ctx.Done():
					return
				case <-time.After(delay):
				}
				delay = f.interval
				if err := f.poll(ctx, i); err != nil && ctx.Err() == nil {
					f.mu.Lock()
					f.err = err
					f.mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
}

func (f *fluxBaseline) poll(ctx context.Context, i int) error {
	opts := append([]remote.Option{remote.WithContext(ctx)}, f.opts...)
	d, err := remote.Head(f.tag, opts...)
	if err != nil {
		return err
	}
	f.polls.Add(1)
	f.mu.Lock()
	last := f.at[i]
	f.mu.Unlock()
	if d.Digest.String() == last {
		return nil
	}
	// Verify: the signature image of the digest, its payload layers.
	sig := f.tag.Context().Tag(strings.Replace(d.Digest.String(), ":", "-", 1) + ".sig")
	img, err := remote.Image(sig, opts...)
	if err != nil {
		return fmt.Errorf("signature of %s: %w", d.Digest, err)
	}
	if err := readLayers(img); err != nil {
		return err
	}
	// Pull: the manifest by digest, its layer.
	if img, err = remote.Image(f.tag.Context().Digest(d.Digest.String()), opts...); err != nil {
		return err
	}
	if err := readLayers(img); err != nil {
		return err
	}
	f.mu.Lock()
	f.at[i] = d.Digest.String()
	f.mu.Unlock()
	return nil
}

// readLayers downloads every layer of img.
func readLayers(img v1.Image) error {
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// waitAt waits until every source has pulled digest.
func (f *fluxBaseline) waitAt(ctx context.Context, tb testing.TB, digest string) {
	tb.Helper()
	testenv.WaitFor(ctx, tb, "every baseline source at "+digest, func(context.Context) (bool, string, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		at := 0
		for _, d := range f.at {
			if d == digest {
				at++
			}
		}
		return at == len(f.at), fmt.Sprintf("%d of %d", at, len(f.at)), f.err
	})
}
