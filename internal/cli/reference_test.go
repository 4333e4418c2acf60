package cli

import (
	"bytes"
	"os"
	"testing"
)

// TestReference keeps docs/CLI.md equal to what the commands say of
// themselves.
func TestReference(t *testing.T) {
	var b bytes.Buffer
	if err := WriteReference(&b); err != nil {
		t.Fatal(err)
	}
	const path = "../../docs/CLI.md"
	if *update {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Fatal("docs/CLI.md is out of date: run go test ./internal/cli -run TestReference -update")
	}
}
