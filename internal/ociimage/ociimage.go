// Package ociimage builds container images from static Go binaries without
// Docker or a registry, the way ko does: one layer holding the binary (and
// the few files a runtime expects) on an empty base, a config with the
// entrypoint and a non-root user, written as a tarball that `ctr images
// import` and `docker load` take. Nothing is pulled.
//
// The image matches the Dockerfile's (distroless/static:nonroot): the
// binary at /NAME, user 65532:65532, no shell.
package ociimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// NonRoot is the user of the images, as in distroless' nonroot variant.
const NonRoot = "65532:65532"

// Spec describes one image.
type Spec struct {
	// Binary is the static binary to pack (CGO_ENABLED=0).
	Binary string
	// Path is where it lives in the image, e.g. /installstrategy-operator;
	// it is also the entrypoint.
	Path string
	// Args are appended to the entrypoint (the image's Cmd is empty).
	Args []string
	// User runs the entrypoint; "" means NonRoot.
	User string
	// Arch is the binary's GOARCH; "" means amd64.
	Arch string
	// Extras are more static binaries packed beside it (not entrypoints).
	Extras []File
}

// File is a binary of an image: Binary on disk, packed at Path.
type File struct {
	Binary string
	Path   string
}

// epoch is the time of every file and of the image: rebuilding the same
// binary gives the same digest.
var epoch = time.Unix(0, 0).UTC()

// Build returns the image of spec.
func Build(spec Spec) (v1.Image, error) {
	bins := []imageFile{}
	for _, f := range append([]File{{Binary: spec.Binary, Path: spec.Path}}, spec.Extras...) {
		data, err := os.ReadFile(f.Binary)
		if err != nil {
			return nil, fmt.Errorf("image of %s: %w", spec.Binary, err)
		}
		bins = append(bins, imageFile{name: path.Clean("/" + f.Path)[1:], mode: 0o755, body: data})
	}
	if spec.User == "" {
		spec.User = NonRoot
	}
	if spec.Arch == "" {
		spec.Arch = "amd64"
	}
	layerTar, err := layer(bins)
	if err != nil {
		return nil, fmt.Errorf("image of %s: layer: %w", spec.Binary, err)
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return nil, fmt.Errorf("image of %s: layer: %w", spec.Binary, err)
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return nil, fmt.Errorf("image of %s: %w", spec.Binary, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image of %s: config: %w", spec.Binary, err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", spec.Arch
	cf.Created = v1.Time{Time: epoch}
	cf.Config.Entrypoint = append([]string{spec.Path}, spec.Args...)
	cf.Config.Env = []string{"PATH=/"}
	cf.Config.WorkingDir = "/"
	cf.Config.User = spec.User
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image of %s: config: %w", spec.Binary, err)
	}
	return img, nil
}

// imageFile is a regular file of the layer.
type imageFile struct {
	name string
	mode int64
	body []byte
}

// layer is the image's only layer: the directories a runtime mounts over,
// /etc/passwd and /etc/group naming root and nonroot, and the binaries.
func layer(bins []imageFile) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"dev/", "proc/", "sys/", "etc/", "tmp/", "var/", "var/run/"} {
		mode := int64(0o755)
		if d == "tmp/" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: mode, ModTime: epoch}); err != nil {
			return nil, err
		}
	}
	files := append([]imageFile{
		{"etc/passwd", 0o644, []byte("root:x:0:0:root:/:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/:/sbin/nologin\n")},
		{"etc/group", 0o644, []byte("root:x:0:\nnonroot:x:65532:\n")},
	}, bins...)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.body)), ModTime: epoch}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteTarball writes img tagged with every ref (e.g. localhost/pause:local)
// as one tarball that `ctr images import` and `docker load` take.
func WriteTarball(file string, img v1.Image, refs ...string) error {
	if len(refs) == 0 {
		return fmt.Errorf("write image to %s: no tag", file)
	}
	tags := map[name.Reference]v1.Image{}
	for _, ref := range refs {
		tag, err := name.NewTag(ref)
		if err != nil {
			return fmt.Errorf("write image %s: %w", ref, err)
		}
		tags[tag] = img
	}
	if err := tarball.MultiRefWriteToFile(file, tags); err != nil {
		return fmt.Errorf("write image %s to %s: %w", refs[0], file, err)
	}
	return nil
}
