// Command krew writes the krew plugin manifest (installstrategy.yaml, krew's
// Plugin kind) for a release folder made by hack/release.sh: one platform
// entry per kubectl-installstrategy_VERSION_OS_ARCH.tar.gz archive listed in
// SHA256SUMS, with the archive's download URL, its sha256 (computed here and
// checked against SHA256SUMS) and an os/arch selector.
//
//	go run ./hack/krew --dir _output/release --version v0.1.0
package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Manifest is krew's Plugin (krew.googlecontainertools.github.com/v1alpha2),
// the fields a plugin index entry uses.
type Manifest struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   Metadata `json:"metadata"`
	Spec       Spec     `json:"spec"`
}

// Metadata names the plugin: `kubectl krew install installstrategy`.
type Metadata struct {
	Name string `json:"name"`
}

// Spec is the plugin's description and its platforms.
type Spec struct {
	Version          string     `json:"version"`
	Homepage         string     `json:"homepage"`
	ShortDescription string     `json:"shortDescription"`
	Description      string     `json:"description"`
	Platforms        []Platform `json:"platforms"`
}

// Platform is one archive and the machines it is for.
type Platform struct {
	Selector Selector   `json:"selector"`
	URI      string     `json:"uri"`
	Sha256   string     `json:"sha256"`
	Files    []FileSpec `json:"files"`
	Bin      string     `json:"bin"`
}

// Selector matches krew's os and arch labels.
type Selector struct {
	MatchLabels map[string]string `json:"matchLabels"`
}

// FileSpec copies a file out of the archive.
type FileSpec struct {
	From string `json:"from"`
	To   string `json:"to"`
}

const (
	plugin   = "kubectl-installstrategy"
	homepage = "https://github.com/installstrategy/installstrategy"
)

// semver is what krew accepts as a version: vMAJOR.MINOR.PATCH[-PRE].
var semver = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

func main() {
	dir := flag.String("dir", "_output/release", "the release folder: archives and SHA256SUMS")
	version := flag.String("version", "", "the release version, e.g. v0.1.0")
	baseURL := flag.String("base-url", homepage+"/releases/download/{version}", "where the archives are downloaded from; {version} is replaced")
	flag.Parse()
	m, err := generate(*dir, *version, strings.ReplaceAll(*baseURL, "{version}", *version))
	if err == nil {
		err = write(filepath.Join(*dir, "installstrategy.yaml"), m)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "krew:", err)
		os.Exit(1)
	}
}

// generate builds the manifest from dir's SHA256SUMS and archives.
func generate(dir, version, baseURL string) (*Manifest, error) {
	if !semver.MatchString(version) {
		return nil, fmt.Errorf("version %q: krew wants vMAJOR.MINOR.PATCH[-PRERELEASE]", version)
	}
	sums, err := readSums(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		return nil, err
	}
	prefix, suffix := plugin+"_"+version+"_", ".tar.gz"
	var platforms []Platform
	names := make([]string, 0, len(sums))
	for name := range sums {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		osArch, ok := strings.CutPrefix(name, prefix)
		if !ok || !strings.HasSuffix(osArch, suffix) {
			continue // the operator's archives, or another version's
		}
		goos, arch, ok := strings.Cut(strings.TrimSuffix(osArch, suffix), "_")
		if !ok || goos == "" || arch == "" {
			return nil, fmt.Errorf("SHA256SUMS: %s: want %sOS_ARCH%s", name, prefix, suffix)
		}
		sum, err := fileSHA256(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		if sum != sums[name] {
			return nil, fmt.Errorf("%s: sha256 is %s, SHA256SUMS says %s", name, sum, sums[name])
		}
		platforms = append(platforms, Platform{
			Selector: Selector{MatchLabels: map[string]string{"os": goos, "arch": arch}},
			URI:      strings.TrimSuffix(baseURL, "/") + "/" + name,
			Sha256:   sum,
			Files:    []FileSpec{{From: plugin, To: "."}, {From: "LICENSE", To: "."}},
			Bin:      plugin,
		})
	}
	if len(platforms) == 0 {
		return nil, fmt.Errorf("SHA256SUMS in %s lists no %s*%s archive", dir, prefix, suffix)
	}
	return &Manifest{
		APIVersion: "krew.googlecontainertools.github.com/v1alpha2",
		Kind:       "Plugin",
		Metadata:   Metadata{Name: "installstrategy"},
		Spec: Spec{
			Version:          version,
			Homepage:         homepage,
			ShortDescription: "Decode, diff, verify and apply KubeVirt-style install strategies",
			Description: "Works with install strategies: the complete, versioned set of manifests a\n" +
				"KubeVirt-style operator stores gzip+base64 in a ConfigMap. Decode, inspect,\n" +
				"diff and verify them (KubeVirt's own included), publish them in chunks, and\n" +
				"plan or apply them with the operator's ordered, rollout-checked pipeline.\n",
			Platforms: platforms,
		},
	}, nil
}

// readSums reads a sha256sum file: "<hex>  <name>" lines.
func readSums(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %w", err)
	}
	sums := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		sum, name, ok := strings.Cut(text, "  ")
		name = strings.TrimPrefix(name, "*")
		if !ok || len(sum) != 64 || name == "" {
			return nil, fmt.Errorf("%s line %d: want \"<sha256>  <file>\"", path, line)
		}
		sums[name] = sum
	}
	if len(sums) == 0 {
		return nil, errors.New(path + ": empty")
	}
	return sums, sc.Err()
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func write(path string, m *Manifest) error {
	b, err := yaml.Marshal(m)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
