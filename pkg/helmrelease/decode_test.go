package helmrelease

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/installstrategy/installstrategy/internal/alloctest"
)

// releaseData encodes text as Helm does: base64 of gzip.
func releaseData(t testing.TB, text []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if _, err := zw.Write(text); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return []byte(base64.StdEncoding.EncodeToString(buf.Bytes()))
}

// A release Secret is written by whoever may write Secrets in the
// namespace: a gzip bomb in it is refused at the bound, not read whole.
func TestDecodeRefusesAGzipBomb(t *testing.T) {
	bomb := releaseData(t, bytes.Repeat([]byte{' '}, MaxReleaseBytes+(16<<20)))
	if len(bomb) > 1<<20 {
		t.Fatalf("the bomb is %d bytes, more than a Secret holds", len(bomb))
	}
	var err error
	n := alloctest.Allocated(func() { _, err = decode(bomb) })
	if err == nil || !strings.Contains(err.Error(), "decode release") {
		t.Fatalf("decode of %d bytes inflating past %d: %v, want a refusal", len(bomb), MaxReleaseBytes, err)
	}
	if n > alloctest.MaxPerInput {
		t.Errorf("refusing the bomb allocated %d bytes, want at most 256 MiB", n)
	}
}

func TestDecodeReadsARelease(t *testing.T) {
	rel, err := decode(releaseData(t, []byte(`{"name":"r","version":3,"manifest":"---\nkind: ConfigMap\n"}`)))
	if err != nil {
		t.Fatal(err)
	}
	if rel.Name != "r" || rel.Version != 3 || !strings.Contains(rel.Manifest, "ConfigMap") {
		t.Errorf("decoded %+v", rel)
	}
}

// FuzzDecodeRelease: any release Secret's data is refused or read within
// a bounded allocation.
func FuzzDecodeRelease(f *testing.F) {
	f.Add(releaseData(f, []byte(`{"name":"r","version":1,"manifest":""}`)))
	f.Add([]byte("H4sI"))
	f.Add([]byte(`{"name":"plain"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if n := alloctest.Allocated(func() { _, _ = decode(data) }); n > alloctest.MaxPerInput {
			t.Fatalf("decode of %d bytes allocated %d bytes", len(data), n)
		}
	})
}
