package v1alpha1_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/installstrategy/installstrategy/internal/testtier"
)

// TestGeneratedFilesUpToDate runs controller-gen (pinned in
// hack/tools/controller-gen) exactly as `make generate manifests` does, into
// a temporary folder, and fails when a committed generated file differs:
// the DeepCopy methods, the CRD or the RBAC role.
func TestGeneratedFilesUpToDate(t *testing.T) {
	testtier.Heavy(t) // builds and runs controller-gen
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	tool := exec.CommandContext(t.Context(), "go", "tool", "-n", "controller-gen")
	tool.Dir = filepath.Join(root, "hack", "tools", "controller-gen")
	bin, err := tool.Output()
	if err != nil {
		t.Fatalf("build controller-gen: %v\n%s", err, stderrOf(err))
	}
	out := t.TempDir()
	gen := exec.CommandContext(t.Context(), strings.TrimSpace(string(bin)),
		"object", "crd", "rbac:roleName=installstrategy-operator", "paths=./api/...",
		"output:object:stdout",
		"output:crd:artifacts:config="+filepath.Join(out, "crd"),
		"output:rbac:artifacts:config="+filepath.Join(out, "rbac"))
	gen.Dir = root
	deepcopy, err := gen.Output()
	if err != nil {
		t.Fatalf("controller-gen: %v\n%s", err, stderrOf(err))
	}
	for _, c := range []struct {
		committed string
		want      []byte
	}{
		{"api/v1alpha1/zz_generated.deepcopy.go", deepcopy},
		{"config/crd/bases/installstrategy.io_installations.yaml", read(t, filepath.Join(out, "crd", "installstrategy.io_installations.yaml"))},
		{"config/rbac/role.yaml", read(t, filepath.Join(out, "rbac", "role.yaml"))},
	} {
		if got := read(t, filepath.Join(root, c.committed)); !bytes.Equal(got, c.want) {
			t.Errorf("%s is stale: run `make generate manifests` and commit the result", c.committed)
		}
	}
	if entries, err := os.ReadDir(filepath.Join(out, "crd")); err != nil || len(entries) != 1 {
		t.Errorf("controller-gen wrote %d CRDs (err %v), want exactly the Installation CRD", len(entries), err)
	}
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func stderrOf(err error) []byte {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.Stderr
	}
	return nil
}
