// Package gobuild builds Go main packages the way installstrategy ships its
// binaries (hack/release.sh, the Dockerfile, internal/images): static
// (CGO_ENABLED=0), -trimpath, stripped (-ldflags "-s -w"). The benchmarks
// that measure a program's time and memory build it this way too, ours and
// the peers alike (Helm's and KubeVirt's releases are static as well): a
// binary linked with cgo is dynamically linked and, once Go's plugin package
// is in it (kustomize brings it), exports every symbol, which costs the
// plugin about 25 MB of resident memory that no released binary has
// (docs/PERFORMANCE.md).
package gobuild

import (
	"context"
	"os"
	"os/exec"
	"strings"
)

// Env is the environment Command adds to the current one.
var Env = []string{"CGO_ENABLED=0"}

// Command returns `go build` of pkg into out as a release builds it, with
// ldflags (e.g. -X stamps) after "-s -w". The caller sets Dir for a package
// of another module and may add to Env (GOOS, GOARCH).
func Command(ctx context.Context, out, pkg string, ldflags ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", strings.Join(append([]string{"-s", "-w"}, ldflags...), " "), "-o", out, pkg)
	cmd.Env = append(os.Environ(), Env...)
	return cmd
}
