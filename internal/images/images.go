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
	"path/filepath"
	"runtime"
	"strings"

	"github.com/installstrategy/installstrategy/internal/gobuild"
	"github.com/installstrategy/installstrategy/internal/ociimage"
)

// OperatorBinary is the operator's path in its image (as in the
// Dockerfile).
const OperatorBinary = "/installstrategy-operator"

// HelmRendererBinary is the operator's chart renderer in its image,
// beside the operator (where it looks first).
const HelmRendererBinary = "/installstrategy-helm-render"

// Options say what to build.
type Options struct {
	// Root is the module's root folder; "" means the current folder.
	Root string
	// Image is the operator image's reference, e.g.
	// ghcr.io/installstrategy/installstrategy-operator:v1.2.0; "" builds
	// no operator image.
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
	// SampleRegistry, when set, also builds the sample product's component
	// image for SampleVersions (see Build).
	SampleRegistry string
	SampleVersions []string
}

// Built is one image written.
type Built struct {
	// Ref is its reference (tags, comma-separated).
	Ref string
	// Tarball is its file.
	Tarball string
	// Digest is the image's (manifest) digest.
	Digest string
}

// SampleComponents are the sample product's components (image names)
// that run hack/sample-component.
var SampleComponents = []string{"sample-api", "sample-controller", "sample-handler"}

// SampleComponentBinary is the sample component's path in its image.
const SampleComponentBinary = "/sample-component"

// Build builds the operator image (OutDir/installstrategy-operator.tar)
// when Image is set and, when SampleRegistry is set, the sample product's component image
// (OutDir/sample-components.tar, one image tagged
// SampleRegistry/COMPONENT:VERSION for every component and version).
func Build(ctx context.Context, o Options) ([]Built, error) {
	if o.OutDir == "" || (o.Image == "" && o.SampleRegistry == "") {
		return nil, fmt.Errorf("build images: OutDir and Image or SampleRegistry are required")
	}
	if o.Arch == "" {
		o.Arch = runtime.GOARCH
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("build images: %w", err)
	}
	const buildinfo = "github.com/installstrategy/installstrategy/internal/buildinfo"
	ldflags := []string{"-X", "main.version=" + o.ProductVersion}
	for k, v := range map[string]string{"version": o.Version, "commit": o.Commit, "date": o.Date} {
		if v != "" {
			ldflags = append(ldflags, "-X", buildinfo+"."+k+"="+v)
		}
	}
	var out []Built
	if o.Image != "" {
		op, err := o.image(ctx, binary{"./cmd/installstrategy-operator", OperatorBinary}, []binary{{"./cmd/installstrategy-helm-render", HelmRendererBinary}}, ldflags, "installstrategy-operator", o.Image)
		if err != nil {
			return nil, err
		}
		out = append(out, op)
	}
	if o.SampleRegistry == "" {
		return out, nil
	}
	var refs []string
	for _, c := range SampleComponents {
		for _, v := range o.SampleVersions {
			refs = append(refs, o.SampleRegistry+"/"+c+":"+v)
		}
	}
	sample, err := o.image(ctx, binary{"./hack/sample-component", SampleComponentBinary}, nil, nil, "sample-components", refs...)
	if err != nil {
		return nil, err
	}
	return append(out, sample), nil
}

// binary is a package built into an image at path.
type binary struct{ pkg, path string }

// image builds main (the entrypoint) and extras and writes their image,
// tagged refs, to OutDir/file.tar.
func (o Options) image(ctx context.Context, main binary, extras []binary, ldflags []string, file string, refs ...string) (Built, error) {
	build := func(b binary) (string, error) {
		bin := filepath.Join(o.OutDir, filepath.Base(b.path)+".linux-"+o.Arch)
		cmd := gobuild.Command(ctx, bin, b.pkg, ldflags...)
		cmd.Dir = o.Root
		cmd.Env = append(cmd.Env, "GOOS=linux", "GOARCH="+o.Arch)
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("build images: go build %s: %w: %s", b.pkg, err, bytes.TrimSpace(out))
		}
		return bin, nil
	}
	bin, err := build(main)
	if err != nil {
		return Built{}, err
	}
	spec := ociimage.Spec{Binary: bin, Path: main.path, Arch: o.Arch}
	for _, x := range extras {
		xbin, err := build(x)
		if err != nil {
			return Built{}, err
		}
		spec.Extras = append(spec.Extras, ociimage.File{Binary: xbin, Path: x.path})
	}
	return o.pack(spec, file, refs...)
}

// Prebuilt packs a static binary built elsewhere as the entrypoint, at
// path, of an image tagged refs, into OutDir/file.tar, the way the
// project's own images are packed: KubeVirt's virt-operator, built from
// its release tag (../shared/tools/virtoperator/build.sh), at
// /usr/bin/virt-operator as KubeVirt's image has it, for the real node.
func Prebuilt(o Options, bin, path, file string, refs ...string) (Built, error) {
	if o.OutDir == "" || len(refs) == 0 {
		return Built{}, fmt.Errorf("pack %s: OutDir and a reference are required", bin)
	}
	if o.Arch == "" {
		o.Arch = runtime.GOARCH
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return Built{}, fmt.Errorf("pack %s: %w", bin, err)
	}
	return o.pack(ociimage.Spec{Binary: bin, Path: path, Arch: o.Arch}, file, refs...)
}

// pack writes the image of spec, tagged refs, to OutDir/file.tar.
func (o Options) pack(spec ociimage.Spec, file string, refs ...string) (Built, error) {
	img, err := ociimage.Build(spec)
	if err != nil {
		return Built{}, fmt.Errorf("build images: %w", err)
	}
	tarball := filepath.Join(o.OutDir, file+".tar")
	if err := ociimage.WriteTarball(tarball, img, refs...); err != nil {
		return Built{}, fmt.Errorf("build images: %w", err)
	}
	d, err := img.Digest()
	if err != nil {
		return Built{}, fmt.Errorf("build images: digest of %s: %w", refs[0], err)
	}
	return Built{Ref: strings.Join(refs, ", "), Tarball: tarball, Digest: d.String()}, nil
}

// VirtOperatorBinary is virt-operator's path in KubeVirt's image.
const VirtOperatorBinary = "/usr/bin/virt-operator"

// VirtOperators packs every dir/virt-operator-TAG (KubeVirt's
// virt-operator built from release TAG) as registry/virt-operator:TAG,
// into OutDir/virt-operator-TAG.tar each.
func VirtOperators(o Options, dir, registry string) ([]Built, error) {
	bins, err := filepath.Glob(filepath.Join(dir, "virt-operator-v*"))
	if err != nil || len(bins) == 0 {
		return nil, fmt.Errorf("pack virt-operator: no virt-operator-TAG binary in %s (../shared/tools/virtoperator/build.sh builds them)", dir)
	}
	var out []Built
	for _, bin := range bins {
		tag := strings.TrimPrefix(filepath.Base(bin), "virt-operator-")
		b, err := Prebuilt(o, bin, VirtOperatorBinary, "virt-operator-"+tag, strings.TrimSuffix(registry, "/")+"/virt-operator:"+tag)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}
