// Package images builds the project's container images without Docker:
// the Go binary (CGO_ENABLED=0, -trimpath, stamped like `make build`) packed
// by internal/ociimage into a tarball per image, tagged as asked. `make
// images` runs it (hack/images); the tarballs load into the local cluster's
// real node (`localcluster load`), into Docker (`docker load`) or any
// containerd (`ctr images import`). The image matches the Dockerfile's.
package images

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/installstrategy/installstrategy/internal/ociimage"
)

// OperatorBinary is the operator's path in its image (as in the
// Dockerfile).
const OperatorBinary = "/installstrategy-operator"

// Options say what to build.
type Options struct {
	// Root is the module's root folder; "" means the current folder.
	Root string
	// Image is the operator image's reference, e.g.
	// ghcr.io/installstrategy/installstrategy-operator:v1.2.0; required.
	Image string
	// ProductVersion is the operator's main.version, the product version
	// it dumps (the Dockerfile's VERSION build argument); "" is a
	// development build that dumps any version.
	ProductVersion string
	// Version, Commit and Date stamp internal/buildinfo (--version).
	Version, Commit, Date string
	// OutDir receives the tarballs; required.
	OutDir string
	// Arch is the GOARCH; "" means this machine's.
	Arch string
}

// Built is one image written.
type Built struct {
	// Ref is its reference (tag).
	Ref string
	// Tarball is its file.
	Tarball string
	// Digest is the image's (manifest) digest.
	Digest string
}

// Build builds the operator image and writes its tarball to
// OutDir/installstrategy-operator.tar.
func Build(ctx context.Context, o Options) ([]Built, error) {
	if o.Image == "" || o.OutDir == "" {
		return nil, fmt.Errorf("build images: Image and OutDir are required")
	}
	if o.Arch == "" {
		o.Arch = runtime.GOARCH
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("build images: %w", err)
	}
	bin := filepath.Join(o.OutDir, "installstrategy-operator.linux-"+o.Arch)
	const buildinfo = "github.com/installstrategy/installstrategy/internal/buildinfo"
	ldflags := []string{"-s", "-w", "-X", "main.version=" + o.ProductVersion}
	for k, v := range map[string]string{"version": o.Version, "commit": o.Commit, "date": o.Date} {
		if v != "" {
			ldflags = append(ldflags, "-X", buildinfo+"."+k+"="+v)
		}
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", strings.Join(ldflags, " "), "-o", bin, "./cmd/installstrategy-operator")
	cmd.Dir = o.Root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+o.Arch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build images: go build ./cmd/installstrategy-operator: %w: %s", err, bytes.TrimSpace(out))
	}
	img, err := ociimage.Build(ociimage.Spec{Binary: bin, Path: OperatorBinary, Arch: o.Arch})
	if err != nil {
		return nil, fmt.Errorf("build images: %w", err)
	}
	tarball := filepath.Join(o.OutDir, "installstrategy-operator.tar")
	if err := ociimage.WriteTarball(tarball, o.Image, img); err != nil {
		return nil, fmt.Errorf("build images: %w", err)
	}
	d, err := img.Digest()
	if err != nil {
		return nil, fmt.Errorf("build images: digest of %s: %w", o.Image, err)
	}
	return []Built{{Ref: o.Image, Tarball: tarball, Digest: d.String()}}, nil
}
