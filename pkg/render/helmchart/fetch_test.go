package helmchart

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	repo "helm.sh/helm/v4/pkg/repo/v1"
)

var repoTestdata = filepath.Join("..", "testdata", "helmflags", "repo")

// Every download is bounded, whether the server says its length or not,
// and the error names the URL and the bound.
func TestDownloadBounded(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 2048)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/streamed.tgz" {
			for i := 0; i < 4; i++ { // no Content-Length: chunked
				_, _ = w.Write(body[:512])
				w.(http.Flusher).Flush()
			}
			return
		}
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	ctx := t.Context()
	for _, path := range []string{"/sized.tgz", "/streamed.tgz"} {
		_, err := download(ctx, srv.URL+path, nil, 1024)
		if err == nil || !strings.Contains(err.Error(), "download "+srv.URL+path) || !strings.Contains(err.Error(), "1024-byte bound") {
			t.Errorf("%s: %v, want the bound's error naming the URL", path, err)
		}
		if got, err := download(ctx, srv.URL+path, nil, 2048); err != nil || len(got) != 2048 {
			t.Errorf("%s at the bound: %d bytes, %v", path, len(got), err)
		}
	}

	files := httptest.NewServer(http.FileServer(http.Dir(repoTestdata)))
	defer files.Close()
	_, _, err := fromRepoURL(ctx, files.URL, "echo", "", 600) // index.yaml is 810 bytes
	if err == nil || !strings.Contains(err.Error(), files.URL+"/index.yaml") || !strings.Contains(err.Error(), "600-byte bound") {
		t.Errorf("an index over the bound: %v", err)
	}
	_, _, err = fromRepoURL(ctx, files.URL, "echo", "", 900) // the archive is 978 bytes
	if err == nil || !strings.Contains(err.Error(), files.URL+"/echo-1.1.0.tgz") {
		t.Errorf("an archive over the bound: %v", err)
	}
}

// An archive that is not the one the index names (its digest) is refused.
func TestIndexDigestChecked(t *testing.T) {
	other, err := os.ReadFile(filepath.Join(repoTestdata, "echo-1.1.0.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	files := http.FileServer(http.Dir(repoTestdata))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/echo-1.0.0.tgz" {
			_, _ = w.Write(other)
			return
		}
		files.ServeHTTP(w, r)
	}))
	defer srv.Close()
	_, _, err = fromRepoURL(t.Context(), srv.URL, "echo", "1.0.0", maxDownloadBytes)
	if err == nil || !strings.Contains(err.Error(), srv.URL+"/echo-1.0.0.tgz") || !strings.Contains(err.Error(), "the repository index says") {
		t.Errorf("a substituted archive: %v", err)
	}
	if _, _, err := fromRepoURL(t.Context(), srv.URL, "echo", "1.1.0", maxDownloadBytes); err != nil {
		t.Errorf("the archive the index names: %v", err)
	}
}

// A repository's credentials go to its own host and port only, unless it
// says pass_credentials_all, as Helm's getter decides.
func TestCredentialsStayWithTheRepository(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()
	ctx := t.Context()
	own := &repo.Entry{Name: "r", URL: srv.URL, Username: "me", Password: "secret"}
	elsewhere := &repo.Entry{Name: "r", URL: "http://charts.example.com", Username: "me", Password: "secret"}
	passAll := &repo.Entry{Name: "r", URL: "http://charts.example.com", Username: "me", Password: "secret", PassCredentialsAll: true}
	for _, e := range []*repo.Entry{own, elsewhere, passAll} {
		if _, err := download(ctx, srv.URL+"/c.tgz", e, 1024); err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != 3 || seen[0] == "" || seen[1] != "" || seen[2] == "" {
		t.Errorf("Authorization headers %q: want sent to the repository's host, not elsewhere, and everywhere with pass_credentials_all", seen)
	}
}
