package oci_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/installstrategy/installstrategy/pkg/oci"
)

// stalledRegistry serves go-containerregistry's registry on loopback,
// except that every request under /v2/acme/stalled/ stalls: with
// headers, it answers them and one byte of body, then writes nothing
// more; without, it never answers. It stalls until the test ends.
func stalledRegistry(t *testing.T, headers bool) string {
	t.Helper()
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !strings.HasPrefix(req.URL.Path, "/v2/acme/stalled/") {
			h.ServeHTTP(w, req)
			return
		}
		if headers {
			w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
			w.Header().Set("Docker-Content-Digest", "sha256:"+strings.Repeat("0", 64))
			w.Header().Set("Content-Length", "1000")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte("{"))
			w.(http.Flusher).Flush()
		}
		select {
		case <-done:
		case <-req.Context().Done():
		}
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	return strings.TrimPrefix(srv.URL, "http://")
}

// A registry that stalls (never answers, or answers and then trickles
// nothing) cannot hold a caller for longer than the client's
// RequestTimeout: the operator's reconciles are few (4 by default), and a
// pull that never returns would hold one for good, each Installation
// naming such a registry (or a mirror, or a walk's tag list behind it)
// taking another, until none is left for any Installation. Each request
// ends at the bound, the caller's context still alive.
func TestStalledRegistryTimesOut(t *testing.T) {
	for _, tc := range []struct {
		name    string
		headers bool
		call    func(context.Context, *oci.Client, string) error
	}{
		{"resolve, no answer", false, func(ctx context.Context, c *oci.Client, ref string) error { _, err := c.Resolve(ctx, ref); return err }},
		{"pull, no answer", false, func(ctx context.Context, c *oci.Client, ref string) error { _, err := c.Pull(ctx, ref); return err }},
		{"pull, a body that stops", true, func(ctx context.Context, c *oci.Client, ref string) error { _, err := c.Pull(ctx, ref); return err }},
		{"chart pull, a body that stops", true, func(ctx context.Context, c *oci.Client, ref string) error {
			_, err := c.PullChart(ctx, ref, 4<<20)
			return err
		}},
		{"tags, no answer", false, func(ctx context.Context, c *oci.Client, ref string) error {
			_, _, err := c.Tags(ctx, ref, 1000)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := stalledRegistry(t, tc.headers)
			c, err := oci.New(oci.Options{RequestTimeout: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			// The caller's own deadline only ends the test should the
			// client wait for ever.
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			err = tc.call(ctx, c, "oci://"+host+"/acme/stalled:v1")
			if err == nil {
				t.Fatal("a stalled registry answered")
			}
			if ctx.Err() != nil {
				t.Fatalf("only the caller's deadline ended the request: %v", err)
			}
			if !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "deadline exceeded") {
				t.Errorf("error %v, want the request's deadline", err)
			}
		})
	}
}

// Uploads are not reads: a push (the plugin's publish, sign and copy, to
// the user's own registry) whose requests take longer than the bound
// still succeeds, and what it pushed is read back.
func TestSlowUploadIsNotCut(t *testing.T) {
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPut || req.Method == http.MethodPatch || req.Method == http.MethodPost {
			time.Sleep(300 * time.Millisecond) // longer than the read bound below
		}
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	c, err := oci.New(oci.Options{RequestTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ref := "oci://" + strings.TrimPrefix(srv.URL, "http://") + "/acme/slow:v1.0.0"
	if _, err := c.Push(t.Context(), ref, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: b\n"), oci.Meta{Product: "slow", Version: "v1.0.0"}); err != nil {
		t.Fatalf("push: %v", err)
	}
	if _, err := c.Pull(t.Context(), ref); err != nil {
		t.Fatalf("pull of what was pushed: %v", err)
	}
}
