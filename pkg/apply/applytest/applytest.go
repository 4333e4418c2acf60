// Package applytest records the requests a client makes, so tests can
// assert that a no-op resync writes nothing (and reads little), and in which
// order objects were written.
package applytest

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/installstrategy/installstrategy/pkg/apply"
)

// Write is one write request.
type Write struct {
	// Method is POST, PUT, PATCH or DELETE.
	Method string
	// Path is the URL path, e.g. /apis/apps/v1/namespaces/x/deployments/y.
	Path string
	// DryRun is true for server-side dry-run requests (not writes to the
	// cluster's state).
	DryRun bool
}

// Read is one read request (GET); a watch is a long-lived read, counted
// apart.
type Read struct {
	// Path is the URL path.
	Path string
	// Watch is true for watch requests (watch=true, or a /watch/ path).
	Watch bool
	// Query is the raw query (a list's label selector, for example).
	Query string
}

// Recorder remembers the requests made through a config returned by
// Record.
type Recorder struct {
	mu     sync.Mutex
	writes []Write
	reads  []Read
}

// Record returns a copy of cfg whose requests are recorded.
func Record(cfg *rest.Config) (*rest.Config, *Recorder) {
	r := &Recorder{}
	out := rest.CopyConfig(cfg)
	prev := out.WrapTransport
	out.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if prev != nil {
			rt = prev(rt)
		}
		return roundTripper{next: rt, r: r}
	}
	return out, r
}

type roundTripper struct {
	next http.RoundTripper
	r    *Recorder
}

func (t roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	t.r.mu.Lock()
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		t.r.writes = append(t.r.writes, Write{Method: req.Method, Path: req.URL.Path, DryRun: strings.Contains(req.URL.RawQuery, "dryRun=")})
	case http.MethodGet:
		watch := strings.Contains(req.URL.RawQuery, "watch=true") || strings.Contains(req.URL.RawQuery, "watch=1") || strings.Contains(req.URL.Path, "/watch/")
		t.r.reads = append(t.r.reads, Read{Path: req.URL.Path, Watch: watch, Query: req.URL.RawQuery})
	}
	t.r.mu.Unlock()
	return t.next.RoundTrip(req)
}

// Writes returns the recorded write requests that were not dry runs, in
// order.
func (r *Recorder) Writes() []Write {
	return filtered(r, func() []Write { return r.writes }, func(w Write) bool { return !w.DryRun })
}

// Reads returns the recorded read requests that were not watches, in
// order.
func (r *Recorder) Reads() []Read {
	return filtered(r, func() []Read { return r.reads }, func(x Read) bool { return !x.Watch })
}

// Watches returns the recorded watch requests, in order. (An informer's
// first list is a watch too where the API server streams it.)
func (r *Recorder) Watches() []Read {
	return filtered(r, func() []Read { return r.reads }, func(x Read) bool { return x.Watch })
}

// filtered returns the recorded requests (all, read under the lock) that
// keep passes.
func filtered[T any](r *Recorder, all func() []T, keep func(T) bool) []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []T
	for _, x := range all() {
		if keep(x) {
			out = append(out, x)
		}
	}
	return out
}

// Reset forgets what was recorded.
func (r *Recorder) Reset() {
	r.mu.Lock()
	r.writes, r.reads = nil, nil
	r.mu.Unlock()
}

// StartCache runs an informer cache of the cluster at cfg until the test
// ends (and fails the test if the cache ends with an error); it returns
// once the cache has started.
func StartCache(tb testing.TB, cfg *rest.Config) *apply.InformerCache {
	tb.Helper()
	c, err := apply.NewInformerCache(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	// Started (no informer yet, so nothing to sync) before reads come.
	if !c.Informers().WaitForCacheSync(ctx) {
		tb.Fatal("informer cache did not start")
	}
	tb.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			tb.Errorf("cache: %v", err)
		}
	})
	return c
}
