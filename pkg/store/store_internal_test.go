package store

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/installstrategy/installstrategy/internal/alloctest"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

func TestSplit(t *testing.T) {
	tests := []struct {
		n, max int
		want   []int
	}{
		{10, 10, []int{10}},
		{11, 10, []int{6, 5}},
		{30, 10, []int{10, 10, 10}},
		{31, 10, []int{8, 8, 8, 7}},
		{1, 900 << 10, []int{1}},
	}
	for _, tt := range tests {
		data := strings.Repeat("x", tt.n)
		parts := split(data, tt.max)
		var sizes []int
		for _, p := range parts {
			sizes = append(sizes, len(p))
		}
		if strings.Join(parts, "") != data || len(sizes) != len(tt.want) {
			t.Fatalf("split(%d, %d) = %v, want %v", tt.n, tt.max, sizes, tt.want)
		}
		for i := range sizes {
			if sizes[i] != tt.want[i] || sizes[i] > tt.max {
				t.Fatalf("split(%d, %d) = %v, want %v", tt.n, tt.max, sizes, tt.want)
			}
		}
	}
}

func TestMatches(t *testing.T) {
	legacy := Entry{Identity: strategy.Identity{Version: "v1", Registry: "r"}}
	ided := Entry{Identity: strategy.Identity{Version: "v1", Registry: "r", Identifier: "abc"}}
	tests := []struct {
		name  string
		e     Entry
		id    strategy.Identity
		match bool
	}{
		{"identifier", ided, strategy.Identity{Identifier: "abc"}, true},
		{"other identifier, same version", ided, strategy.Identity{Version: "v1", Registry: "r", Identifier: "def"}, false},
		{"no identifier asked", ided, strategy.Identity{Version: "v1", Registry: "r"}, false},
		{"legacy by version and registry", legacy, strategy.Identity{Version: "v1", Registry: "r", Identifier: "abc"}, true},
		{"legacy other registry", legacy, strategy.Identity{Version: "v1", Registry: "q"}, false},
		{"legacy other version", legacy, strategy.Identity{Version: "v2", Registry: "r"}, false},
	}
	for _, tt := range tests {
		if got := tt.e.Matches(tt.id); got != tt.match {
			t.Errorf("%s: Matches = %v, want %v", tt.name, got, tt.match)
		}
	}
}

func TestNewer(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		a, b Entry
		want bool
	}{
		{Entry{Name: "a", Created: t0.Add(time.Second)}, Entry{Name: "b", Created: t0}, true},
		{Entry{Name: "b", Created: t0}, Entry{Name: "a", Created: t0.Add(time.Second)}, false},
		{Entry{Name: "b", Created: t0}, Entry{Name: "a", Created: t0}, true},
		{Entry{Name: "a", Created: t0}, Entry{Name: "b", Created: t0}, false},
	}
	for _, tt := range tests {
		if got := newer(tt.a, tt.b); got != tt.want {
			t.Errorf("newer(%s@%v, %s@%v) = %v", tt.a.Name, tt.a.Created, tt.b.Name, tt.b.Created, got)
		}
	}
}

func TestParseChunks(t *testing.T) {
	tests := []struct {
		raw     string
		wantErr string
	}{
		{`[{"name":"a","size":1,"digest":"sha256:00"}]`, ""},
		{`[]`, "lists no chunks"},
		{`{`, "unexpected end"},
		{`[{"name":"","digest":"sha256:00"}]`, "chunk 1"},
		{`[{"name":"a","digest":"md5:00"}]`, "chunk 1"},
	}
	for _, tt := range tests {
		_, err := parseChunks(tt.raw)
		if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("parseChunks(%s) error = %v, want %q", tt.raw, err, tt.wantErr)
		}
	}
}

// A head lists each chunk once, at most maxChunks of them, holding at most
// MaxEncodedBytes together: a head naming one chunk thousands of times
// (issue 39) made a reader fetch and join it thousands of times.
func TestParseChunksBounds(t *testing.T) {
	chunk := func(name string, size int) string {
		return `{"name":"` + name + `","size":` + strconv.Itoa(size) + `,"digest":"sha256:00"}`
	}
	list := func(items ...string) string { return "[" + strings.Join(items, ",") + "]" }
	many := func(n int, distinct bool) string {
		items := make([]string, n)
		for i := range items {
			name := "c"
			if distinct {
				name = "c" + strconv.Itoa(i)
			}
			items[i] = chunk(name, 10)
		}
		return list(items...)
	}
	big := make([]string, 100)
	for i := range big {
		big[i] = chunk("c"+strconv.Itoa(i), 1<<20)
	}
	for name, raw := range map[string]string{
		"one chunk listed 5000 times":  many(5000, false),
		"one chunk listed twice":       list(chunk("a", 10), chunk("b", 10), chunk("a", 10)),
		"more than MaxChunks chunks":   many(maxChunks+1, true),
		"parts above MaxEncodedBytes":  list(big...),
		"a part above the object size": list(chunk("a", 2<<20)),
		"a part of no bytes":           list(chunk("a", 0)),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := parseChunks(raw); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	if _, err := parseChunks(many(maxChunks, true)); err != nil {
		t.Fatalf("MaxChunks distinct chunks: %v", err)
	}
}

// FuzzParseChunks: a head's chunk list never makes parseChunks panic or
// accept a list beyond its bounds, and costs at most 256 MB.
func FuzzParseChunks(f *testing.F) {
	f.Add(`[{"name":"a","size":10,"digest":"sha256:00"}]`)
	f.Add(`[{"name":"a","size":10,"digest":"sha256:00"},{"name":"a","size":10,"digest":"sha256:00"}]`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, raw string) {
		var chunks []Chunk
		var err error
		if n := alloctest.Allocated(func() { chunks, err = parseChunks(raw) }); n > alloctest.MaxPerInput {
			t.Fatalf("%d bytes allocated", n)
		}
		if err != nil {
			return
		}
		seen, total := map[string]bool{}, 0
		for _, c := range chunks {
			if seen[c.Name] || c.Size <= 0 {
				t.Fatalf("accepted %s", raw)
			}
			seen[c.Name], total = true, total+c.Size
		}
		if len(chunks) > maxChunks || total > MaxEncodedBytes {
			t.Fatalf("accepted %d chunks of %d bytes", len(chunks), total)
		}
	})
}
