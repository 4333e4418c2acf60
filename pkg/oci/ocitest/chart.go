package ocitest

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/registry"
)

// PackChart packages the chart folder dir as helm package does and
// returns the archive.
func PackChart(t testing.TB, dir string) []byte {
	t.Helper()
	c, err := loader.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	path, err := chartutil.Save(c, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tgz, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return tgz
}

// PushChart pushes a packaged chart to ref (oci://HOST/REPO/CHART:TAG on
// a plain-HTTP registry) with Helm's own registry client, as helm push
// does but under any tag (strict mode off), and returns the manifest
// digest.
func PushChart(t testing.TB, tgz []byte, ref string) string {
	t.Helper()
	rc, err := registry.NewClient(registry.ClientOptPlainHTTP(), registry.ClientOptWriter(io.Discard),
		registry.ClientOptCredentialsFile(filepath.Join(t.TempDir(), "config.json")))
	if err != nil {
		t.Fatal(err)
	}
	res, err := rc.Push(tgz, strings.TrimPrefix(ref, "oci://"), registry.PushOptStrictMode(false))
	if err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	return res.Manifest.Digest
}
