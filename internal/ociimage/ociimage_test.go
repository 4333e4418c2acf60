package ociimage_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/installstrategy/installstrategy/internal/ociimage"
)

// TestImageLayout writes an image and reads it back from its tarball: the
// tag, the entrypoint with its arguments, the non-root user, the binary's
// bytes and mode at its path, and the same digest on a rebuild.
func TestImageLayout(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "app")
	content := []byte("#!/not/really/a/binary\n")
	if err := os.WriteFile(bin, content, 0o755); err != nil {
		t.Fatal(err)
	}
	extra := filepath.Join(dir, "helper")
	extraContent := []byte("#!/not/really/a/helper\n")
	if err := os.WriteFile(extra, extraContent, 0o755); err != nil {
		t.Fatal(err)
	}
	spec := ociimage.Spec{Binary: bin, Path: "/app", Args: []string{"--serve"}, Extras: []ociimage.File{{Binary: extra, Path: "/bin/helper"}}}
	img, err := ociimage.Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "app.tar")
	const ref = "localhost/app:v1"
	if err := ociimage.WriteTarball(file, img, ref); err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	back, err := tarball.ImageFromPath(file, &tag)
	if err != nil {
		t.Fatalf("read %s back as %s: %v", file, ref, err)
	}
	cf, err := back.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{"/app", "--serve"}) || cf.Config.User != ociimage.NonRoot || cf.OS != "linux" {
		t.Errorf("config: entrypoint %q user %q os %q", cf.Config.Entrypoint, cf.Config.User, cf.OS)
	}
	layers, err := back.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d, %v: want one", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	found, foundExtra := false, false
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch h.Name {
		case "app":
			data, _ := io.ReadAll(tr)
			found = bytes.Equal(data, content) && h.Mode == 0o755
		case "bin/helper":
			data, _ := io.ReadAll(tr)
			foundExtra = bytes.Equal(data, extraContent) && h.Mode == 0o755
		}
	}
	if !found {
		t.Error("the layer has no executable app with the binary's bytes")
	}
	if !foundExtra {
		t.Error("the layer has no executable bin/helper with the extra's bytes")
	}
	again, err := ociimage.Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("rebuild digest %s, first %s: want the same", d2, d1)
	}
}
