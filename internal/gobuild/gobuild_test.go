package gobuild

import (
	"debug/buildinfo"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// TestCommandBuildsAStaticStrippedBinary builds a small program with cgo
// imported (os/user uses it when cgo is on) and checks what a release
// has: the build settings recorded in the binary (CGO_ENABLED=0,
// -trimpath), on linux no ELF interpreter (static) and no symbol table
// (stripped), and the -X stamp.
func TestCommandBuildsAStaticStrippedBinary(t *testing.T) {
	dir := t.TempDir()
	src := "package main\n\nimport (\n\t\"fmt\"\n\t\"os/user\"\n)\n\nvar stamp = \"unset\"\n\nfunc main() {\n\t_, _ = user.Current()\n\tfmt.Println(stamp)\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/stamped\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "stamped")
	cmd := Command(t.Context(), out, ".", "-X", "main.stamp=set")
	cmd.Dir = dir
	cmd.Env = append(cmd.Env, "GOWORK=off", "GOFLAGS=-mod=mod")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, msg)
	}
	info, err := buildinfo.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	// (-trimpath keeps -ldflags out of the recorded settings.)
	if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
		t.Errorf("build settings %v, want CGO_ENABLED=0 and -trimpath=true", settings)
	}
	if runtime.GOOS == "linux" {
		f, err := elf.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Error("the binary has an interpreter: dynamically linked (cgo)")
			}
		}
		if s := f.Section(".symtab"); s != nil {
			t.Error("the binary has a symbol table: not stripped")
		}
	}
	got, err := exec.Command(out).Output()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "set\n" {
		t.Errorf("the program printed %q, want the stamp \"set\"", got)
	}
}
