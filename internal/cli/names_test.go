package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// hostileObjects are objects named as an attacker would, built directly
// (Parse refuses them): every writer must keep them inside its folder
// whatever reaches it.
func hostileStrategy() *strategy.Strategy {
	mk := func(apiVersion, kind, ns, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"data": map[string]any{"k": "v"}}}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	return &strategy.Strategy{Objects: []*unstructured.Unstructured{
		mk("v1", "ConfigMap", "ns", "/../../../victim"),
		mk("v1", "ConfigMap", "..", "../victim"),
		mk("v1", "../../victim", "", "x"),
		mk("../../v1", "Thing", "", "x"),
		mk("example.com/..", "Thing", "", "x"),
		mk("v1", "ConfigMap", "ns", "/abs/victim"),
		mk("v1", "ConfigMap", "ns", "a\x00b"),
		mk("v1", "ConfigMap", "ns", strings.Repeat("long", 200)),
		mk("v1", "ConfigMap", "ns", "ｖｉｃｔｉｍ"),
		mk("v1", "ConfigMap", "ns", "."),
		mk("v1", "ConfigMap", "ns", ".."),
	}}
}

// onlyInside fails when anything but dir changed in parent.
func onlyInside(t *testing.T, parent, dir string) {
	t.Helper()
	entries, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if filepath.Join(parent, e.Name()) != dir && e.Name() != "victim" {
			t.Errorf("written outside the folder: %s", e.Name())
		}
	}
	if data, _ := os.ReadFile(filepath.Join(parent, "victim")); string(data) != "precious" {
		t.Errorf("victim overwritten: %q", data)
	}
}

// Finding 7: decode --output-dir (and get, which shares it) keeps every
// file in the folder, kind included, one file per object.
func TestDecodeOutputDirConfinesHostileNames(t *testing.T) {
	parent := t.TempDir()
	if err := os.WriteFile(filepath.Join(parent, "victim"), []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, "out", "deep")
	s := hostileStrategy()
	files, err := objectFiles(s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writeFolder(dir, files, false); err != nil {
		t.Fatal(err)
	}
	onlyInside(t, parent, filepath.Join(parent, "out"))
	entries, _ := os.ReadDir(dir)
	if len(entries) != len(s.Objects)+1 { // and the index
		t.Errorf("%d files for %d objects: %v", len(entries), len(s.Objects), entries)
	}
}

// Names that escape alike do not overwrite each other: decode refuses.
func TestDecodeRefusesCollidingNames(t *testing.T) {
	s := hostileStrategy()
	twin := s.Objects[0].DeepCopy()
	twin.SetName(strings.ToUpper(twin.GetName()))
	s.Objects = append(s.Objects, twin)
	if _, err := objectFiles(s); err == nil || !strings.Contains(err.Error(), "two objects map to one file name") {
		t.Fatalf("got %v", err)
	}
}

// Finding 3: the external diff's folders hold every file, whatever the
// objects' names.
func TestExternalDiffConfinesHostileNames(t *testing.T) {
	parent := t.TempDir()
	t.Setenv("TMPDIR", filepath.Join(parent, "tmp"))
	if err := os.Mkdir(filepath.Join(parent, "tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(parent, "victim"), []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The program lists what it was given: one file per object a side.
	var out, errOut bytes.Buffer
	a := hostileStrategy()
	err := externalDiff(t.Context(), Streams{Out: &out, ErrOut: &errOut}, "ls -1A", a, &strategy.Strategy{}, false)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	onlyInside(t, parent, filepath.Join(parent, "tmp"))
	if n := strings.Count(out.String(), "\n"); n < len(a.Objects)+2 {
		t.Errorf("%d lines for %d objects:\n%s", n, len(a.Objects), out.String())
	}
	twin := a.Objects[0].DeepCopy()
	twin.SetName(strings.ToUpper(twin.GetName()))
	a.Objects = append(a.Objects, twin)
	if err := externalDiff(t.Context(), Streams{Out: &out, ErrOut: &errOut}, "true", a, a, false); err == nil {
		t.Error("two objects written to one file")
	}
}

// pull --output-file writes the file named, nothing else.
func TestWriteOutputWritesTheFileNamed(t *testing.T) {
	dir := t.TempDir()
	o := &options{streams: Streams{Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}}
	if err := o.writeOutput(filepath.Join(dir, "a.yaml"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := o.writeOutput(dir+"/", []byte("x")); err == nil {
		t.Error("wrote to a folder's path")
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "a.yaml")); string(data) != "x" {
		t.Errorf("%q", data)
	}
}

// Finding 8: a Secret on one side only is masked in the external diff
// (kubectl diff -u -N shows the added file whole), data and stringData,
// whichever side holds it; so is a data field that is not a map.
func TestExternalDiffMasksOneSidedSecrets(t *testing.T) {
	t.Setenv("KUBECTL_EXTERNAL_DIFF", "diff -u -N")
	withSecret := writeFile(t, "with.yaml", secretStrategy("ns", "hunter2", "tok-1234"))
	without := writeFile(t, "without.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: ns\ndata:\n  mode: fast\n")
	for _, args := range [][]string{{without, withSecret}, {withSecret, without}} {
		code, out, errOut := run(t, nil, append([]string{"diff"}, args...)...)
		if code != 1 {
			t.Fatalf("diff %v: exit %d\n%s\n%s", args, code, out, errOut)
		}
		assertNoSecret(t, "external diff", out, "hunter2", "tok-1234")
		if !strings.Contains(out, "password: '*** (") || !strings.Contains(out, "token: '*** (") {
			t.Errorf("no masked values:\n%s", out)
		}
	}
	odd := writeFile(t, "odd.yaml", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: odd\n  namespace: ns\nstringData: plain-hunter2\n")
	code, out, _ := run(t, nil, "diff", without, odd)
	if code != 1 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	assertNoSecret(t, "external diff", out, "plain-hunter2")
}
