package gobuild

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Build is a build of a main package the way Command builds it.
type Build struct {
	// Pkg is the package (an import path, or a path relative to Dir).
	Pkg string
	// Ldflags come after "-s -w" (e.g. -X stamps).
	Ldflags []string
	// Dir is where go runs ("" for the current folder): a package of
	// another module sets it.
	Dir string
	// Env is added after Env (e.g. GOWORK=off, GOOS).
	Env []string
}

// DefaultCacheDir is where Cached keeps binaries unless told otherwise:
// installstrategy/gobuild in the user's cache folder (beside the tools of
// hack/tools.sh).
func DefaultCacheDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "installstrategy", "gobuild"), nil
}

func (b Build) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = b.Dir
	cmd.Env = append(append(os.Environ(), Env...), b.Env...)
	return cmd
}

// Key is a content key of the binary b builds: the build ID of every
// package it links (go list -deps -export, which hashes each package's
// sources, its dependencies and the compiler's flags, and compiles what is
// stale), the Go version, the platform, the link flags and the
// environment. Two builds with the same key link the same packages the
// same way.
func (b Build) Key(ctx context.Context) (string, error) {
	cmd := b.command(ctx, "list", "-deps", "-export", "-trimpath", "-f", "{{.ImportPath}} {{.BuildID}}", b.Pkg)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list %s: %v\n%s", b.Pkg, err, stderr.String())
	}
	ver := b.command(ctx, "env", "GOVERSION", "GOOS", "GOARCH", "GOAMD64", "GOARM64", "CGO_ENABLED")
	env, err := ver.Output()
	if err != nil {
		return "", fmt.Errorf("go env: %v", err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "env %q\nldflags %q\nextra %q\n%s\n", env, b.Ldflags, b.Env, out)
	return hex.EncodeToString(h.Sum(nil))[:20], nil
}

// Cached returns the binary b builds, named name, from cacheDir (""
// DefaultCacheDir): it builds it only when the cache holds none of the
// same Key, into cacheDir/<key>/name. A binary is put there whole (built
// beside, then renamed), so a build interrupted or racing with another
// process leaves no half-written binary behind. Binaries of other keys are
// kept (remove the folder to reclaim the space).
func Cached(ctx context.Context, cacheDir, name string, b Build) (string, error) {
	if cacheDir == "" {
		var err error
		if cacheDir, err = DefaultCacheDir(); err != nil {
			return "", err
		}
	}
	key, err := b.Key(ctx)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cacheDir, key)
	out := filepath.Join(dir, name)
	if fi, err := os.Stat(out); err == nil && fi.Mode().IsRegular() {
		return out, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	built := filepath.Join(tmp, name)
	cmd := Command(ctx, built, b.Pkg, b.Ldflags...)
	cmd.Dir = b.Dir
	cmd.Env = append(cmd.Env, b.Env...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", b.Pkg, err, msg)
	}
	if err := os.Rename(built, out); err != nil {
		return "", err
	}
	return out, nil
}
