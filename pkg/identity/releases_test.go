package identity_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/installstrategy/installstrategy/pkg/identity"
)

// TestKubeVirtReleaseLines checks the KubeVirt algorithm against deployment
// IDs computed by KubeVirt's own code of the last patch release of each line
// from v1.5 (testdata/kubevirt-release-ids.json). They were produced by
// running the ID functions and config struct of each release's
// pkg/virt-operator/util/config.go (generateInstallStrategyID over the JSON
// config, its id cleared), unchanged, on these configurations; the same
// harness reproduces the IDs of the real v1.8.4 and v1.9.0 strategies in
// ../shared/testdata/kubevirt. The configurations cover plain ones, image
// prefixes, every kind of image field of the line (the synchronization
// controller from v1.6, virt-template from v1.8), image shasums (v1.5 and
// v1.6 only), additional properties (an empty imagePrefix and an empty key
// dropped) and pass-through env vars.
func TestKubeVirtReleaseLines(t *testing.T) {
	data, err := os.ReadFile("testdata/kubevirt-release-ids.json")
	if err != nil {
		t.Fatal(err)
	}
	var vectors []struct {
		Release string          `json:"release"`
		Config  json.RawMessage `json:"config"`
		ID      string          `json:"id"`
	}
	if err := json.Unmarshal(data, &vectors); err != nil {
		t.Fatal(err)
	}
	lines := map[string]int{}
	for _, v := range vectors {
		c, err := identity.ParseConfig(v.Config)
		if err != nil {
			t.Fatalf("%s: %v", v.Release, err)
		}
		line := v.Release[:strings.LastIndex(v.Release, ".")]
		if got := identity.KubeVirtReleaseLine(c.Version); got != line && !(line > "v1.8" && got == "v1.8") {
			t.Errorf("%s: version %s hashes as %s", v.Release, c.Version, got)
		}
		id, err := identity.KubeVirt.Identifier(c)
		if err != nil {
			t.Fatalf("%s %s: %v", v.Release, v.Config, err)
		}
		if id != v.ID {
			t.Errorf("%s %s: id %s, KubeVirt's is %s", v.Release, v.Config, id, v.ID)
		}
		lines[line]++
	}
	for _, line := range []string{"v1.5", "v1.6", "v1.7", "v1.8", "v1.9"} {
		if lines[line] < 3 {
			t.Errorf("%d vectors of %s, want at least 3", lines[line], line)
		}
	}

	// A field a line does not have is refused, not ignored.
	for _, tc := range []struct{ config, want string }{
		{`{"namespace":"kubevirt","kubeVirtVersion":"v1.7.4","virtOperatorSha":"sha256:aa"}`, `["virtOperatorSha"] are not fields of the deployment config of KubeVirt v1.7`},
		{`{"namespace":"kubevirt","kubeVirtVersion":"v1.5.3","virtSynchronizationControllerImage":"s:1"}`, "KubeVirt v1.5"},
		{`{"namespace":"kubevirt","kubeVirtVersion":"v1.6.0","virtTemplateApiserverImage":"t:1"}`, "KubeVirt v1.6"},
	} {
		c, err := identity.ParseConfig([]byte(tc.config))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := identity.KubeVirt.Identifier(c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want an error with %q, got %v", tc.config, tc.want, err)
		}
	}
	for version, line := range map[string]string{"v1.6.0-rc.1": "v1.6", "1.7.2": "v1.7", "v1.10.0": "v1.8", "v2.5.0": "v1.8", "devel": "v1.8", "": "v1.8", "v1.1.0": "v1.8"} {
		if got := identity.KubeVirtReleaseLine(version); got != line {
			t.Errorf("KubeVirtReleaseLine(%q) = %s, want %s", version, got, line)
		}
	}
}
