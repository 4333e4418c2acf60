package confine

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hostile are names an attacker would give an object.
var hostile = []string{
	"..", ".", "../../../.bashrc", "/etc/passwd", "a/b", `a\b`, `..\..\x`, "a\x00b", "\x00",
	"a\nb", "\x1b[2J", strings.Repeat("x", 5000), "ｅｔｃ", "a∕b", "a⁄b", "ä", "a%2Fb", "%", ".hidden", "-rf", "",
}

func TestEscapeGivesOneLocalComponent(t *testing.T) {
	seen := map[string]string{}
	for _, h := range hostile {
		e := Escape(h)
		if h != "" && (e == "" || !filepath.IsLocal(e) || filepath.Base(e) != e) {
			t.Errorf("Escape(%q) = %q: not one local component", h, e)
		}
		if e == "." || e == ".." || strings.HasPrefix(e, ".") || strings.ContainsAny(e, "/\\\x00") {
			t.Errorf("Escape(%q) = %q", h, e)
		}
		for _, r := range e {
			if r < 0x21 || r > 0x7e {
				t.Errorf("Escape(%q) = %q holds %q", h, e, r)
			}
		}
		if other, dup := seen[e]; dup {
			t.Errorf("Escape(%q) = Escape(%q) = %q", h, other, e)
		}
		seen[e] = h
	}
}

func TestNameBoundsLengthAndKeepsLongNamesApart(t *testing.T) {
	a := Name("_", ".yaml", "configmap", "ns", strings.Repeat("a", 300)+"1")
	b := Name("_", ".yaml", "configmap", "ns", strings.Repeat("a", 300)+"2")
	if len(a) > MaxName || len(b) > MaxName || a == b || !strings.HasSuffix(a, ".yaml") {
		t.Fatalf("%d %q\n%d %q", len(a), a, len(b), b)
	}
	if got := Name(".", "", "apps", "v1", "Deployment", "ns", "web"); got != "apps.v1.Deployment.ns.web" {
		t.Fatalf("plain parts escaped: %q", got)
	}
}

func TestNamesRefusesASecondOwner(t *testing.T) {
	var n Names
	if err := n.Add("role__Admin.yaml", "Role/admin-1"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"role__Admin.yaml", "role__admin.yaml", "ROLE__ADMIN.YAML"} {
		err := n.Add(name, "Role/other")
		if !errors.Is(err, ErrCollision) || !strings.Contains(err.Error(), "Role/admin-1") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Whatever the name, a Dir writes nothing outside its folder: hostile names
// are refused, and a symbolic link planted in the folder is replaced, not
// followed.
func TestDirWritesOnlyInside(t *testing.T) {
	parent := t.TempDir()
	inside := filepath.Join(parent, "out")
	d, err := Create(inside)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	victim := filepath.Join(parent, "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"../victim", victim, "..", ".", "", "a/b", "a\x00b", strings.Repeat("x", 300)} {
		if err := d.WriteFile(name, []byte("evil"), 0o644); err == nil {
			t.Errorf("WriteFile(%q) wrote", name)
		}
		if err := d.Remove(name); err == nil && name != "" {
			t.Errorf("Remove(%q) removed", name)
		}
	}
	if err := os.Symlink(victim, filepath.Join(inside, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteFile("link.yaml", []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(parent, filepath.Join(inside, "up")); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteFile("up/victim", []byte("evil"), 0o644); err == nil {
		t.Error("wrote through a link to the parent")
	}
	if data, _ := os.ReadFile(victim); string(data) != "precious" {
		t.Fatalf("victim overwritten: %q", data)
	}
	if data, _ := os.ReadFile(filepath.Join(inside, "link.yaml")); string(data) != "new" {
		t.Fatalf("link.yaml: %q", data)
	}
	if err := d.Remove("link.yaml"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(victim); err != nil {
		t.Fatalf("Remove followed the link: %v", err)
	}
}

func TestWriteFileReplacesAndLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.yaml")
	for _, content := range []string{"one", "two"} {
		if err := WriteFile(p, []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != content {
			t.Fatalf("got %q %v", got, err)
		}
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v", fi.Mode())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
	if err := WriteFile(filepath.Join(dir, "missing", "f"), []byte("x"), 0o644); err == nil {
		t.Fatal("want an error for a missing folder")
	}
	if err := WriteFile(dir+"/", []byte("x"), 0o644); err == nil {
		t.Fatal("want an error for a folder's path")
	}
}

func TestTempIsRemovedOnClose(t *testing.T) {
	d, err := Temp("confine-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.WriteFile("a", []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary folder left: %v", err)
	}
}
