package kinds_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The library (pkg/...) is what operator authors import: none of its
// packages may import the project's internal/ or hack/ packages (tests may),
// which Go would refuse them outside this module.
func TestPkgImportsNoInternalOrHack(t *testing.T) {
	const module = "github.com/installstrategy/installstrategy/"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"pkg/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 20 {
		t.Fatalf("go list listed %d packages: %q", len(lines), out)
	}
	for _, l := range lines {
		f := strings.Fields(l)
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, module+"internal/") || strings.HasPrefix(imp, module+"hack/") {
				t.Errorf("%s imports %s", f[0], imp)
			}
		}
	}
}
