package main

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/installstrategy/installstrategy/internal/testtier"
)

func writeArchive(t *testing.T, dir, name, content string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(content))
	return hex.EncodeToString(sum[:]) + "  " + name + "\n"
}

// TestGenerate: one platform per plugin archive of the version, each with
// its own sha256, URL and selector; the operator's archives are not the
// plugin's; a tampered archive or a version krew refuses is an error.
func TestGenerate(t *testing.T) {
	dir := t.TempDir()
	var sums string
	for _, p := range []string{"linux_amd64", "darwin_arm64"} {
		sums += writeArchive(t, dir, "kubectl-installstrategy_v1.2.3_"+p+".tar.gz", "plugin "+p)
		sums += writeArchive(t, dir, "installstrategy-operator_v1.2.3_"+p+".tar.gz", "operator "+p)
	}
	if err := os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(sums), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := generate(dir, "v1.2.3", "https://example.com/dl/v1.2.3/")
	if err != nil {
		t.Fatal(err)
	}
	if m.Kind != "Plugin" || m.Spec.Version != "v1.2.3" || len(m.Spec.Platforms) != 2 {
		t.Fatalf("manifest: %+v", m)
	}
	p := m.Spec.Platforms[0] // sorted by archive name: darwin first
	want := sha256.Sum256([]byte("plugin darwin_arm64"))
	if p.Selector.MatchLabels["os"] != "darwin" || p.Selector.MatchLabels["arch"] != "arm64" ||
		p.Sha256 != hex.EncodeToString(want[:]) || p.URI != "https://example.com/dl/v1.2.3/kubectl-installstrategy_v1.2.3_darwin_arm64.tar.gz" || p.Bin != "kubectl-installstrategy" {
		t.Fatalf("platform: %+v", p)
	}

	if _, err := generate(dir, "1.2.3", ""); err == nil || !strings.Contains(err.Error(), "krew wants") {
		t.Errorf("version without v: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kubectl-installstrategy_v1.2.3_linux_amd64.tar.gz"), []byte("tampered"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := generate(dir, "v1.2.3", ""); err == nil || !strings.Contains(err.Error(), "SHA256SUMS says") {
		t.Errorf("tampered archive: %v", err)
	}
}

// TestMakeRelease runs `make release` as CI does (for two platforms, not the
// default four), then installs the plugin
// from the linux/amd64 archive as krew would (the manifest's sha256 and
// files) and checks that it and the operator print the stamped version and
// commit, and that the binaries are stripped.
func TestMakeRelease(t *testing.T) {
	testtier.Heavy(t) // cross-compiles the release: minutes, not the unit tier
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Fatalf("this test runs the linux/amd64 archive; run it on linux/amd64 (got %s/%s)", runtime.GOOS, runtime.GOARCH)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "release")
	const version = "v0.0.0-releasetest"
	// Two of the four platforms of a release: the one the test runs and a
	// cross-built one (each platform costs a cold build of both binaries).
	cmd := exec.Command("make", "-C", root, "release", "RELEASE_DIR="+out, "RELEASE_VERSION="+version, "RELEASE_PLATFORMS=linux/amd64 darwin/arm64")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make release: %v\n%s", err, b)
	}
	commit, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}

	data, err := os.ReadFile(filepath.Join(out, "installstrategy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m Manifest
	if err := yaml.UnmarshalStrict(data, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Spec.Platforms) != 2 || m.Spec.Version != version {
		t.Fatalf("krew manifest: version %s, %d platforms, want 2", m.Spec.Version, len(m.Spec.Platforms))
	}
	sums, err := readSums(filepath.Join(out, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) != 4 {
		t.Fatalf("SHA256SUMS lists %d archives, want 4 (2 binaries x 2 platforms)", len(sums))
	}
	var linux *Platform
	for i, p := range m.Spec.Platforms {
		if p.Selector.MatchLabels["os"] == "linux" && p.Selector.MatchLabels["arch"] == "amd64" {
			linux = &m.Spec.Platforms[i]
		}
	}
	if linux == nil {
		t.Fatal("no linux/amd64 platform in the krew manifest")
	}
	archive := filepath.Join(out, filepath.Base(linux.URI))
	if sum, err := fileSHA256(archive); err != nil || sum != linux.Sha256 {
		t.Fatalf("%s: sha256 %s, manifest says %s (%v)", archive, sum, linux.Sha256, err)
	}
	bin := t.TempDir()
	for _, f := range linux.Files {
		untar(t, archive, f.From, filepath.Join(bin, f.To, f.From))
	}
	plugin := filepath.Join(bin, linux.Bin)
	b, err := exec.Command(plugin, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("%s version: %v", plugin, err)
	}
	var info struct{ Version, Commit, Date, Platform string }
	if err := json.Unmarshal(b, &info); err != nil {
		t.Fatalf("version -o json: %v\n%s", err, b)
	}
	if info.Version != version || info.Commit != strings.TrimSpace(string(commit)) || info.Date == "" || info.Platform != "linux/amd64" {
		t.Fatalf("plugin from the archive: %+v, want version %s and commit %s", info, version, commit)
	}
	if _, err := os.Stat(filepath.Join(bin, "LICENSE")); err != nil {
		t.Fatalf("the archive has no LICENSE: %v", err)
	}

	opArchive := filepath.Join(out, "installstrategy-operator_"+version+"_linux_amd64.tar.gz")
	operator := filepath.Join(bin, "installstrategy-operator")
	untar(t, opArchive, "installstrategy-operator", operator)
	b, err = exec.Command(operator, "--version").Output()
	if err != nil || !strings.HasPrefix(string(b), "installstrategy-operator "+version+" (commit "+strings.TrimSpace(string(commit))[:12]) {
		t.Fatalf("operator --version: %q %v", b, err)
	}
	// The operator's chart renderer ships in its tarball, stamped alike.
	helper := filepath.Join(bin, "installstrategy-helm-render")
	untar(t, opArchive, "installstrategy-helm-render", helper)
	b, err = exec.Command(helper, "--version").Output()
	if err != nil || !strings.HasPrefix(string(b), "installstrategy-helm-render "+version+" (commit "+strings.TrimSpace(string(commit))[:12]) {
		t.Fatalf("installstrategy-helm-render --version: %q %v", b, err)
	}
	for _, p := range []string{plugin, operator, helper} {
		f, err := elf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		if f.Section(".symtab") != nil {
			t.Errorf("%s is not stripped: it has a .symtab", filepath.Base(p))
		}
		f.Close()
	}
}

// untar extracts one file of a .tar.gz, executable.
func untar(t *testing.T, archive, name, dst string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			t.Fatalf("%s has no %s", archive, name)
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name != name {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		w, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(w, tr); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return
	}
}
