package helmchart_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"helm.sh/helm/v4/pkg/registry"

	"github.com/installstrategy/installstrategy/internal/alloctest"
	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/oci/ocitest"
	"github.com/installstrategy/installstrategy/pkg/render"
	"github.com/installstrategy/installstrategy/pkg/render/helmchart"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// registryConfig points Helm's registry config (and docker's, Helm's
// fallback) at files of the test, holding the credentials for host when
// user is set.
func registryConfig(t *testing.T, host, user, password string) {
	t.Helper()
	dir := t.TempDir()
	auths := map[string]any{}
	if user != "" {
		auths[host] = map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + password))}
	}
	b, err := json.Marshal(map[string]any{"auths": auths})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HELM_REGISTRY_CONFIG", path)
	t.Setenv("DOCKER_CONFIG", t.TempDir())
}

// An oci:// chart is pulled with the credentials of Helm's registry
// config and rendered: by its tag, or by a tag-less reference and
// --version (an exact version; a range or neither is refused naming
// --version); a tag whose chart is not --version is refused; without the
// credentials the registry refuses the pull.
func TestHelmOCIChart(t *testing.T) {
	ctx := t.Context()
	reg := ocitest.New(t, ocitest.BasicAuth("helm", "s3cret"))
	tgz := ocitest.PackChart(t, filepath.Join("..", "testdata", "hooks"))
	rc, err := registry.NewClient(registry.ClientOptPlainHTTP(), registry.ClientOptWriter(io.Discard),
		registry.ClientOptBasicAuth("helm", "s3cret"), registry.ClientOptCredentialsFile(filepath.Join(t.TempDir(), "config.json")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Push(tgz, reg.Host()+"/charts/hooks:1.2.3", registry.PushOptStrictMode(false)); err != nil {
		t.Fatal(err)
	}
	registryConfig(t, reg.Host(), "helm", "s3cret")
	opts := render.HelmOptions{Namespace: "demo", PlainHTTP: true}
	for _, tc := range []struct{ ref, version string }{
		{reg.Ref("charts/hooks:1.2.3"), ""},
		{reg.Ref("charts/hooks:1.2.3"), "^1.2.0"},
		{reg.Ref("charts/hooks"), "1.2.3"},
	} {
		o := opts
		o.ChartVersion = tc.version
		res, err := helmchart.Helm(ctx, tc.ref, o)
		if err != nil {
			t.Fatalf("%s --version %q: %v", tc.ref, tc.version, err)
		}
		if res.Chart.Name != "hooks" || res.Chart.Version != "1.2.3" || !strings.Contains(string(res.Manifests), "name: hooks-setup") {
			t.Errorf("%s --version %q rendered %s %s:\n%s", tc.ref, tc.version, res.Chart.Name, res.Chart.Version, res.Manifests)
		}
	}
	for _, tc := range []struct{ ref, version, want string }{
		{reg.Ref("charts/hooks"), "^1.2.0", `--version "^1.2.0" is not a version`},
		{reg.Ref("charts/hooks"), "", "--version VERSION"},
		{reg.Ref("charts/hooks:1.2.3"), "2.0.0", "--version asks for 2.0.0"},
	} {
		o := opts
		o.ChartVersion = tc.version
		if _, err := helmchart.Helm(ctx, tc.ref, o); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.ref) {
			t.Errorf("%s --version %q: %v, want an error naming the chart and %q", tc.ref, tc.version, err, tc.want)
		}
	}
	registryConfig(t, reg.Host(), "", "")
	if _, err := helmchart.Helm(ctx, reg.Ref("charts/hooks:1.2.3"), opts); err == nil || !strings.Contains(err.Error(), "401") && !strings.Contains(err.Error(), "UNAUTHORIZED") {
		t.Errorf("a pull without the credentials: %v, want the registry's refusal", err)
	}
}

// rawManifest is a manifest given as bytes, for remote.Put.
type rawManifest []byte

func (m rawManifest) RawManifest() ([]byte, error)        { return m, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

// A registry that serves an oversized manifest (streamed, no
// Content-Length) or a chart layer over render.MaxArchiveBytes (said by
// its descriptor, or more bytes than its descriptor says) is refused with
// a *trust.RefusedError before the bytes over the bound are read: the
// manifest costs about its bound, the oversized layer is never requested,
// the lying one costs its descriptor's size. Helm's downloader read each.
func TestHelmOCIChartBounds(t *testing.T) {
	ctx := t.Context()
	var served atomic.Int64
	h := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	const hugeBlob = "sha256:" + "ab00000000000000000000000000000000000000000000000000000000000000"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch {
		case strings.HasPrefix(req.URL.Path, "/v2/charts/huge/manifests/"):
			w.Header().Set("Content-Type", string(types.OCIManifestSchema1))
			_, _ = io.WriteString(w, `{"schemaVersion":2,"annotations":{"a":"`)
			chunk := []byte(strings.Repeat("x", 32<<10))
			for range (16 * oci.MaxManifestBytes) / len(chunk) {
				n, err := w.Write(chunk)
				served.Add(int64(n))
				if err != nil {
					return
				}
			}
		case strings.HasSuffix(req.URL.Path, "/blobs/"+hugeBlob):
			served.Add(1 << 40) // never to be asked for
			http.Error(w, "no", http.StatusTeapot)
		default:
			h.ServeHTTP(w, req)
		}
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	registryConfig(t, host, "", "")

	config := static.NewLayer([]byte(`{"name":"lying","version":"1.0.0","apiVersion":"v2"}`), oci.ChartConfigMediaType)
	small := static.NewLayer([]byte(strings.Repeat("y", 4096)), oci.ChartLayerMediaType)
	put := func(tag string, layer v1.Descriptor) {
		r, err := name.ParseReference(host + "/charts/lying:" + tag)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range []v1.Layer{config, small} {
			if err := remote.WriteLayer(r.Context(), l); err != nil {
				t.Fatal(err)
			}
		}
		cd, _ := config.Digest()
		cs, _ := config.Size()
		m, err := json.Marshal(v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1,
			Config: v1.Descriptor{MediaType: oci.ChartConfigMediaType, Size: cs, Digest: cd}, Layers: []v1.Descriptor{layer}})
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Put(r, rawManifest(m)); err != nil {
			t.Fatal(err)
		}
	}
	sd, _ := small.Digest()
	put("oversized", v1.Descriptor{MediaType: oci.ChartLayerMediaType, Size: render.MaxArchiveBytes + 1, Digest: v1.Hash{Algorithm: "sha256", Hex: strings.TrimPrefix(hugeBlob, "sha256:")}})
	put("longer", v1.Descriptor{MediaType: oci.ChartLayerMediaType, Size: 100, Digest: sd})

	for _, tc := range []struct {
		name, ref string
		bound     uint64
	}{
		{"a manifest 16 times its bound", "oci://" + host + "/charts/huge:1.0.0", 4 * oci.MaxManifestBytes},
		{"a layer over the bound", "oci://" + host + "/charts/lying:oversized", 1 << 20},
		{"a layer longer than its descriptor", "oci://" + host + "/charts/lying:longer", 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			served.Store(0)
			var err error
			n := alloctest.Allocated(func() {
				_, err = helmchart.Helm(ctx, tc.ref, render.HelmOptions{PlainHTTP: true})
			})
			var r *trust.RefusedError
			if !errors.As(err, &r) || !errors.Is(err, trust.ErrTooLarge) || !strings.Contains(err.Error(), tc.ref) {
				t.Fatalf("%v (%T), want a size refusal naming %s", err, err, tc.ref)
			}
			if n > tc.bound {
				t.Errorf("the refusal allocated %d bytes, the bound is %d", n, tc.bound)
			}
			if s := served.Load(); s > 8*oci.MaxManifestBytes {
				t.Errorf("the registry served %d bytes before the refusal", s)
			}
		})
	}
}
