// Package shareddata finds the project's shared test inputs: the folder
// shared/testdata/SUB beside the repository (found by walking up from the
// working directory to go.mod), or the folder an environment variable names.
package shareddata

import (
	"os"
	"path/filepath"
	"testing"
)

// Dir returns shared/testdata/sub, or $env when set. It fails the test when
// the folder cannot be found: these files are part of the project's inputs.
func Dir(tb testing.TB, sub, env string) string {
	tb.Helper()
	if d := os.Getenv(env); d != "" {
		return d
	}
	wd, err := os.Getwd()
	if err != nil {
		tb.Fatalf("%s testdata: %v", sub, err)
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			cand := filepath.Join(filepath.Dir(dir), "shared", "testdata", sub)
			if _, err := os.Stat(cand); err == nil {
				return cand
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	tb.Fatalf("%s testdata: shared/testdata/%s not found beside the repository (from %s); set %s", sub, sub, wd, env)
	return ""
}
