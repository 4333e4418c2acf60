package gobuild

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestCachedBuildsOncePerKey: Cached builds a program once; asked again it
// returns the same binary untouched; a change of a source file builds
// another one, which runs the new code; other link flags give another key.
func TestCachedBuildsOncePerKey(t *testing.T) {
	src, cache := t.TempDir(), t.TempDir()
	write := func(msg string) {
		t.Helper()
		prog := "package main\n\nimport \"fmt\"\n\nvar stamp = \"\"\n\nfunc main() { fmt.Println(\"" + msg + "\" + stamp) }\n"
		if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(prog), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module example.com/cached\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	write("one")
	b := Build{Pkg: ".", Dir: src, Env: []string{"GOWORK=off", "GOFLAGS=-mod=mod"}}
	run := func(b Build, want string) string {
		t.Helper()
		bin, err := Cached(t.Context(), cache, "cached", b)
		if err != nil {
			t.Fatal(err)
		}
		got, err := exec.Command(bin).Output()
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want+"\n" {
			t.Fatalf("%s printed %q, want %q", bin, got, want)
		}
		return bin
	}
	first := run(b, "one")
	old := time.Unix(1e9, 0)
	if err := os.Chtimes(first, old, old); err != nil {
		t.Fatal(err)
	}
	if again := run(b, "one"); again != first {
		t.Fatalf("same sources: %s, then %s", first, again)
	}
	if fi, err := os.Stat(first); err != nil || !fi.ModTime().Equal(old) {
		t.Fatalf("the cached binary was built again (%v, %v)", fi.ModTime(), err)
	}
	write("two")
	if second := run(b, "two"); second == first {
		t.Fatal("a changed source gave the cached binary of the old one")
	}
	// Other link flags, another key (not built: the flags reach the
	// linker through Command, whose own test checks them).
	stamped := b
	stamped.Ldflags = []string{"-X", "main.stamp=+"}
	k1, err := b.Key(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	k2, err := stamped.Key(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if k1 == k2 {
		t.Errorf("link flags %q and none give the same key %s", stamped.Ldflags, k1)
	}
	entries, err := os.ReadDir(cache)
	if err != nil || len(entries) != 2 {
		t.Fatalf("cache holds %d entries (%v), want 2 keys", len(entries), err)
	}
}
