// Package kubevirtdata gives tests the real KubeVirt install strategies kept
// in shared/testdata/kubevirt beside the repository (or in the folder named
// by INSTALLSTRATEGY_KUBEVIRT_TESTDATA).
package kubevirtdata

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/installstrategy/installstrategy/internal/shareddata"
)

// Versions are the KubeVirt releases whose strategies are available.
var Versions = []string{"v1.8.4", "v1.9.0"}

// Dir returns the folder holding the real strategies. It fails the test when
// the folder cannot be found: these files are part of the project's inputs.
func Dir(tb testing.TB) string {
	tb.Helper()
	return shareddata.Dir(tb, "kubevirt", "INSTALLSTRATEGY_KUBEVIRT_TESTDATA")
}

// Read returns one file of a version, e.g. Read(t, "v1.9.0", "manifests.yaml").
func Read(tb testing.TB, version, suffix string) []byte {
	tb.Helper()
	data, err := os.ReadFile(Path(tb, version, suffix))
	if err != nil {
		tb.Fatalf("kubevirt testdata: %v", err)
	}
	return data
}

// Path returns the path of one file of a version.
func Path(tb testing.TB, version, suffix string) string {
	tb.Helper()
	return filepath.Join(Dir(tb), "kubevirt-"+version+"."+suffix)
}

// ID returns the deployment identifier KubeVirt computed for a version.
func ID(tb testing.TB, version string) string {
	tb.Helper()
	return strings.TrimSpace(string(Read(tb, version, "id")))
}
