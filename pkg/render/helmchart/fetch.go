package helmchart

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"helm.sh/helm/v4/pkg/helmpath"
	repo "helm.sh/helm/v4/pkg/repo/v1"
)

// maxDownloadBytes bounds every download of a chart reference: a
// repository's index.yaml and a chart archive alike. A chart larger than
// the largest strategy text a ConfigMap is decoded to (pkg/codec's
// DefaultMaxDecodedBytes, 64 MiB) could not be stored anyway; Helm's own
// getter reads whatever it is sent.
const maxDownloadBytes = 64 << 20

// isURL reports whether ref is a chart's http(s) URL, as helm takes one.
func isURL(ref string) bool {
	return strings.HasPrefix(ref, "https://") || strings.HasPrefix(ref, "http://")
}

// download reads url with the repository entry's credentials and TLS
// settings (a nil entry: none), at most max bytes, into memory. The
// credentials go only to the repository's own host and port, unless the
// entry says pass_credentials_all, as Helm's getter decides. Errors name
// the URL.
func download(ctx context.Context, target string, entry *repo.Entry, max int64) ([]byte, error) {
	fail := func(err error) ([]byte, error) { return nil, fmt.Errorf("download %s: %w", redact(target), err) }
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, http.NoBody)
	if err != nil {
		return fail(err)
	}
	req.Header.Set("User-Agent", "kubectl-installstrategy (Helm v4 libraries)")
	client := &http.Client{}
	if entry != nil {
		transport, err := entryTransport(entry)
		if err != nil {
			return fail(err)
		}
		client.Transport = transport
		if entry.Username != "" && entry.Password != "" {
			base, err := url.Parse(entry.URL)
			if err != nil {
				return fail(fmt.Errorf("repository URL %s: %w", redact(entry.URL), err))
			}
			if entry.PassCredentialsAll || (base.Scheme == req.URL.Scheme && base.Host == req.URL.Host) {
				req.SetBasicAuth(entry.Username, entry.Password)
			}
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fail(fmt.Errorf("the server answered %s", resp.Status))
	}
	if resp.ContentLength > max {
		return fail(fmt.Errorf("%d bytes, over the %d-byte bound", resp.ContentLength, max))
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return fail(err)
	}
	if int64(len(data)) > max {
		return fail(fmt.Errorf("over the %d-byte bound", max))
	}
	return data, nil
}

// redact drops a URL's user information from messages.
func redact(target string) string {
	u, err := url.Parse(target)
	if err != nil || u.User == nil {
		return target
	}
	return u.Redacted()
}

// entryTransport is an HTTP transport with a repository entry's TLS
// settings (CA file, client certificate, insecure_skip_tls_verify), as
// Helm's getter builds one.
func entryTransport(e *repo.Entry) (*http.Transport, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if e.CAFile == "" && e.CertFile == "" && !e.InsecureSkipTLSVerify {
		return t, nil
	}
	cfg := &tls.Config{InsecureSkipVerify: e.InsecureSkipTLSVerify} //nolint:gosec // the user's repository setting, as Helm honours it
	if e.CAFile != "" {
		pem, err := os.ReadFile(e.CAFile)
		if err != nil {
			return nil, fmt.Errorf("repository %s: caFile: %w", e.Name, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("repository %s: caFile %s holds no PEM certificate", e.Name, e.CAFile)
		}
		cfg.RootCAs = pool
	}
	if e.CertFile != "" && e.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(e.CertFile, e.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("repository %s: certFile/keyFile: %w", e.Name, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	t.TLSClientConfig = cfg
	return t, nil
}

// loadIndex parses a repository index (bounded bytes) with Helm's loader.
func loadIndex(data []byte, source string) (*repo.IndexFile, error) {
	dir, err := os.MkdirTemp("", "installstrategy-index-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	p := filepath.Join(dir, "index.yaml")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		return nil, err
	}
	idx, err := repo.LoadIndexFile(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return idx, nil
}

// chartInIndex finds chart at version (a version or a range; empty: the
// newest stable) in idx and returns its archive's absolute URL and the
// digest the index gives it ("" for none).
func chartInIndex(idx *repo.IndexFile, base, chart, version, source string) (string, string, error) {
	what := fmt.Sprintf("chart %q", chart)
	if version != "" {
		what += fmt.Sprintf(" version %q", version)
	}
	cv, err := idx.Get(chart, version)
	if err != nil {
		return "", "", fmt.Errorf("%s not found in %s", what, source)
	}
	if len(cv.URLs) == 0 {
		return "", "", fmt.Errorf("%s in %s has no downloadable URLs", what, source)
	}
	u, err := repo.ResolveReferenceURL(base, cv.URLs[0])
	if err != nil {
		return "", "", fmt.Errorf("%s in %s: its URL %q: %w", what, source, cv.URLs[0], err)
	}
	return u, cv.Digest, nil
}

// downloadChart downloads a chart archive an index names and checks it
// against the index's digest when it gives one (Helm uses the digest only
// to find the archive in its cache; an archive that is not the one the
// index names is refused here).
func downloadChart(ctx context.Context, target, digest string, entry *repo.Entry, max int64) ([]byte, string, error) {
	archive, err := download(ctx, target, entry, max)
	if err != nil {
		return nil, target, err
	}
	if digest != "" {
		sum := sha256.Sum256(archive)
		if got := hex.EncodeToString(sum[:]); got != strings.TrimPrefix(digest, "sha256:") {
			return nil, target, fmt.Errorf("download %s: its sha256 digest is %s, the repository index says %s", redact(target), got, digest)
		}
	}
	return archive, target, nil
}

// fromRepoURL downloads chart (a name) of the repository at repoURL
// (helm --repo): its index.yaml is read fresh, as Helm does, and the
// chart's archive after it; both bounded by max.
func fromRepoURL(ctx context.Context, repoURL, chart, version string, max int64) ([]byte, string, error) {
	if !isURL(repoURL) {
		return nil, "", fmt.Errorf("--repo %s: want an http:// or https:// chart repository URL", repoURL)
	}
	if strings.Contains(chart, "/") {
		return nil, "", fmt.Errorf("--repo %s: the chart is a name in that repository, not %s", repoURL, chart)
	}
	indexURL, err := repo.ResolveReferenceURL(repoURL, "index.yaml")
	if err != nil {
		return nil, "", fmt.Errorf("--repo %s: %w", repoURL, err)
	}
	data, err := download(ctx, indexURL, nil, max)
	if err != nil {
		return nil, "", fmt.Errorf("--repo %s: is it a chart repository? %w", repoURL, err)
	}
	idx, err := loadIndex(data, indexURL)
	if err != nil {
		return nil, "", err
	}
	u, digest, err := chartInIndex(idx, repoURL, chart, version, "repository "+repoURL)
	if err != nil {
		return nil, "", err
	}
	return downloadChart(ctx, u, digest, nil, max)
}

// fromRepository downloads REPO/CHART: REPO is a repository of the user's
// Helm repositories config (helm repo add) and its index is the one helm
// repo update cached, as helm install reads them; the archive is
// downloaded with the repository's credentials and TLS settings, bounded
// by max.
func fromRepository(ctx context.Context, repoConfig, repoCache, ref, version string, max int64) ([]byte, string, error) {
	name, chart, _ := strings.Cut(ref, "/")
	rf, err := repo.LoadFile(repoConfig)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, "", fmt.Errorf("chart %s: Helm repositories config %s: %w", ref, repoConfig, err)
	}
	var entry *repo.Entry
	if rf != nil {
		entry = rf.Get(name)
	}
	if entry == nil {
		return nil, "", fmt.Errorf("chart %s: no such chart folder or archive, and no repository %q in %s (helm repo add %s URL)", ref, name, repoConfig, name)
	}
	indexPath := filepath.Join(repoCache, helmpath.CacheIndexFile(name))
	st, err := os.Stat(indexPath)
	if err != nil {
		return nil, "", fmt.Errorf("chart %s: no cached index of repository %s (try 'helm repo update'): %w", ref, name, err)
	}
	if st.Size() > max {
		return nil, "", fmt.Errorf("chart %s: the cached index %s is %d bytes, over the %d-byte bound", ref, indexPath, st.Size(), max)
	}
	idx, err := repo.LoadIndexFile(indexPath)
	if err != nil {
		return nil, "", fmt.Errorf("chart %s: the cached index of repository %s: %w", ref, name, err)
	}
	u, digest, err := chartInIndex(idx, entry.URL, chart, version, fmt.Sprintf("repository %s (%s)", name, redact(entry.URL)))
	if err != nil {
		return nil, "", err
	}
	return downloadChart(ctx, u, digest, entry, max)
}
