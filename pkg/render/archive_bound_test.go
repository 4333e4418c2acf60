package render_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/installstrategy/installstrategy/internal/alloctest"
	"github.com/installstrategy/installstrategy/pkg/oci/ocitest"
	"github.com/installstrategy/installstrategy/pkg/render"
	"github.com/installstrategy/installstrategy/pkg/render/helmchart"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// file is one entry of a test archive.
type file struct {
	name string
	data []byte
}

// tgz packs files as a chart archive of the chart name (each file under
// name/, as helm package writes them).
func tgz(t testing.TB, name string, files ...file) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name + "/" + f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func chartYAML(name string) file {
	return file{"Chart.yaml", []byte("apiVersion: v2\nname: " + name + "\nversion: 1.0.0\n")}
}

// nested is a chart whose subchart archive holds a subchart archive, depth
// levels down, each level with a file of pad bytes.
func nested(t testing.TB, depth, pad int) []byte {
	t.Helper()
	var sub []byte
	for i := depth; i >= 0; i-- {
		name := fmt.Sprintf("c%d", i)
		files := []file{chartYAML(name), {"files/pad", make([]byte, pad)}}
		if sub != nil {
			files = append(files, file{fmt.Sprintf("charts/c%d.tgz", i+1), sub})
		}
		sub = tgz(t, name, files...)
	}
	return sub
}

// A chart archive is refused before Helm's loader reads it when its
// decompressed bytes pass render.MaxArchiveBytes (one large file, many
// small ones, or nested archives each under the bound and together over
// it) or its archives nest deeper than render.MaxArchiveDepth, on every
// path that loads an archive: the operator's render (HelmArchive, which the
// render helper runs too), a .tgz file and an oci:// chart given to the
// plugin. A refusal costs the readers, not the archive. Helm alone loads
// each of these (100 MiB per archive, nesting unbounded).
func TestChartArchiveBomb(t *testing.T) {
	many := []file{chartYAML("many")}
	for i := range render.MaxArchiveBytes / 512 {
		many = append(many, file{fmt.Sprintf("files/f%d", i), nil})
	}
	// The check's readers cost a few hundred KiB a level; the tar reader
	// allocates a header per entry (garbage at once), a few hundred bytes
	// for each 512 bytes of the bound.
	const readers = 4 << 20
	for _, tc := range []struct {
		name    string
		archive []byte
		bound   uint64
	}{
		{"one file of twice the bound", tgz(t, "big", chartYAML("big"), file{"files/zeros", make([]byte, 2*render.MaxArchiveBytes)}), readers},
		{"a tar header per 512 bytes of the bound", tgz(t, "many", many...), render.MaxArchiveBytes},
		{"nested archives each under the bound", nested(t, 3, render.MaxArchiveBytes/3), readers},
		{"archives nested too deep", nested(t, render.MaxArchiveDepth+1, 0), readers},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := render.CheckArchive(tc.archive); !errors.As(err, new(*trust.RefusedError)) || !errors.Is(err, trust.ErrTooLarge) {
				t.Fatalf("CheckArchive: %v, want a refusal", err)
			}
			var err error
			n := alloctest.Allocated(func() {
				_, err = render.HelmArchive(t.Context(), "bomb", tc.archive, nil, render.HelmOptions{})
			})
			if !errors.As(err, new(*trust.RefusedError)) {
				t.Fatalf("HelmArchive: %v, want a refusal", err)
			}
			if n > tc.bound {
				t.Fatalf("the refusal allocated %d bytes, the bound is %d", n, tc.bound)
			}
			path := filepath.Join(t.TempDir(), "bomb-1.0.0.tgz")
			if err := os.WriteFile(path, tc.archive, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := helmchart.Helm(t.Context(), path, render.HelmOptions{}); !errors.As(err, new(*trust.RefusedError)) {
				t.Fatalf("helmchart.Helm of a file: %v, want a refusal", err)
			}
		})
	}
	// Pulled: Helm's push loads the chart (up to its own 100 MiB), so
	// the pushed bomb is one Helm takes.
	t.Run("pulled from a registry", func(t *testing.T) {
		reg := ocitest.New(t)
		bomb := nested(t, 2, render.MaxArchiveBytes/2)
		ocitest.PushChart(t, bomb, "oci://"+reg.Host()+"/charts/c0:1.0.0")
		_, err := helmchart.Helm(t.Context(), "oci://"+reg.Host()+"/charts/c0:1.0.0", render.HelmOptions{PlainHTTP: true})
		if !errors.As(err, new(*trust.RefusedError)) {
			t.Fatalf("helmchart.Helm of oci://: %v, want a refusal", err)
		}
	})
	// Under the bounds, the same shapes load.
	if err := render.CheckArchive(nested(t, render.MaxArchiveDepth, 1024)); err != nil {
		t.Fatalf("an archive nested %d deep: %v", render.MaxArchiveDepth, err)
	}
	if _, err := render.LoadArchive("ok", nested(t, 2, 1<<20)); err != nil {
		t.Fatalf("a chart of three small archives: %v", err)
	}
}

// FuzzHelmArchive loads arbitrary bytes as a chart archive through
// render.LoadArchive (the bounds, then Helm's loader). Nothing may panic,
// and no input may allocate more than alloctest.MaxPerInput.
func FuzzHelmArchive(f *testing.F) {
	f.Add(ocitest.PackChart(f, "testdata/hooks"))
	f.Add(nested(f, 2, 64))
	f.Add(nested(f, render.MaxArchiveDepth+1, 0))
	f.Add(tgz(f, "big", chartYAML("big"), file{"files/zeros", make([]byte, render.MaxArchiveBytes+1)}))
	f.Add([]byte("\x1f\x8b\x08\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, archive []byte) {
		if n := alloctest.Allocated(func() { _, _ = render.LoadArchive("fuzz", archive) }); n > alloctest.MaxPerInput {
			t.Fatalf("loading allocated %d bytes, the bound is %d", n, alloctest.MaxPerInput)
		}
	})
}
