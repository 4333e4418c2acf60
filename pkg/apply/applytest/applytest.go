// Package applytest records the write requests a client makes, so tests can
// assert that a no-op resync writes nothing and in which order objects were
// written.
package applytest

import (
	"net/http"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
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

// Recorder remembers the write requests made through a config returned by
// Record.
type Recorder struct {
	mu     sync.Mutex
	writes []Write
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
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		t.r.mu.Lock()
		t.r.writes = append(t.r.writes, Write{Method: req.Method, Path: req.URL.Path, DryRun: strings.Contains(req.URL.RawQuery, "dryRun=")})
		t.r.mu.Unlock()
	}
	return t.next.RoundTrip(req)
}

// Writes returns the recorded write requests that were not dry runs, in
// order.
func (r *Recorder) Writes() []Write {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Write
	for _, w := range r.writes {
		if !w.DryRun {
			out = append(out, w)
		}
	}
	return out
}

// Reset forgets what was recorded.
func (r *Recorder) Reset() {
	r.mu.Lock()
	r.writes = nil
	r.mu.Unlock()
}
