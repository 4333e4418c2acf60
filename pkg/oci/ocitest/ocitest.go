// Package ocitest runs an OCI registry on loopback for tests: the
// distribution protocol as go-containerregistry's registry serves it, in
// memory, with every request it served recorded so a test can count what
// a poll or a pull cost.
package ocitest

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
)

// Registry is a registry on loopback. Close (or the test's end) stops it.
type Registry struct {
	*httptest.Server
	mu             sync.Mutex
	reqs           []string
	user, password string
}

// Option configures a Registry.
type Option func(*Registry)

// BasicAuth makes the registry answer 401 with a Basic challenge to every
// request without these credentials, as a private registry does.
func BasicAuth(user, password string) Option {
	return func(r *Registry) { r.user, r.password = user, password }
}

// New starts a registry that stops when the test ends.
func New(t testing.TB, opts ...Option) *Registry {
	t.Helper()
	r := &Registry{}
	for _, o := range opts {
		o(r)
	}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.reqs = append(r.reqs, req.Method+" "+req.URL.Path)
		r.mu.Unlock()
		if r.user != "" {
			if u, p, ok := req.BasicAuth(); !ok || u != r.user || p != r.password {
				w.Header().Set("WWW-Authenticate", `Basic realm="ocitest"`)
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
				return
			}
		}
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(r.Close)
	return r
}

// Host is the registry's HOST:PORT.
func (r *Registry) Host() string { return strings.TrimPrefix(r.URL, "http://") }

// Ref is oci://HOST:PORT/path.
func (r *Registry) Ref(path string) string { return "oci://" + r.Host() + "/" + path }

// Take returns the requests served since the last call ("METHOD /path"),
// and forgets them.
func (r *Registry) Take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.reqs
	r.reqs = nil
	return out
}

// Count returns how many of reqs have the method and contain part.
func Count(reqs []string, method, part string) int {
	n := 0
	for _, q := range reqs {
		if strings.HasPrefix(q, method+" ") && strings.Contains(q, part) {
			n++
		}
	}
	return n
}
