package codec

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/installstrategy/installstrategy/internal/alloctest"
)

// withTrailer returns a copy of the gzip stream gz whose trailer claims
// size decoded bytes.
func withTrailer(gz []byte, size uint32) []byte {
	out := append([]byte(nil), gz...)
	binary.LittleEndian.PutUint32(out[len(out)-4:], size)
	return out
}

// Gunzip never buffers more than the limit and one byte, whatever the gzip
// trailer claims: a trailer that lies upward costs what the input can
// really expand to, a bomb whose trailer claims the limit (or nothing)
// costs at most the doubling of a buffer up to limit+1, and an honest
// trailer still sizes the buffer once.
func TestGunzipCost(t *testing.T) {
	const limit = 16 << 20
	const slack = 1 << 20 // the gzip reader's own state
	small := gz([]byte(strings.Repeat("kind: ConfigMap\n", 64)))
	bomb := gz(make([]byte, 2*limit))
	honest := []byte(strings.Repeat("apiVersion: v1\nkind: ConfigMap\n", limit/64))
	for _, tc := range []struct {
		name    string
		in      []byte
		wantErr string // "" for a text
		max     uint64
	}{
		{name: "small text, trailer claims 4 GiB", in: withTrailer(small, 1<<32-1), wantErr: "checksum", max: slack},
		{name: "small text, trailer claims the limit", in: withTrailer(small, limit), wantErr: "checksum", max: slack},
		{name: "bomb, trailer claims the limit", in: withTrailer(bomb, limit), wantErr: "exceeds the limit", max: limit + 1 + slack},
		{name: "bomb, trailer claims nothing", in: withTrailer(bomb, 0), wantErr: "exceeds the limit", max: 2*(limit+1) + slack},
		{name: "bomb, trailer claims 4 GiB", in: withTrailer(bomb, 1<<32-1), wantErr: "exceeds the limit", max: limit + 1 + slack},
		{name: "honest text of half the limit", in: gz(honest), max: uint64(len(honest)) + 1 + slack},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var text []byte
			var err error
			n := alloctest.Allocated(func() { text, err = Gunzip(tc.in, limit) })
			if tc.wantErr == "" && err != nil {
				t.Fatal(err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
			}
			if tc.wantErr == "exceeds the limit" && !errors.As(err, new(*limitError)) {
				t.Fatalf("error %T is not the limit's", err)
			}
			if n > tc.max {
				t.Fatalf("allocated %d bytes, the bound is %d", n, tc.max)
			}
			if cap(text) > limit+1 {
				t.Fatalf("buffer of %d bytes, over limit+1", cap(text))
			}
		})
	}
}
