package cli

import (
	"regexp"
	"strings"
	"testing"
)

var publishedRE = regexp.MustCompile(`^configmap/(\S+) published in `)

// TestClusterOCIApplyPlanPublish: apply and plan take an artifact as they
// take a file, its identity the artifact's (no --version); publish stores
// it in the cluster from the registry, where verify checks it; pushed back
// from the cluster (cm/NAME) it is the same artifact, digest and all.
func TestClusterOCIApplyPlanPublish(t *testing.T) {
	_, _, ns := smallProduct(t)
	host := newRegistry(t)
	args := func(a ...string) []string { return append(a, clusterArgs(ns)...) }
	v1 := writeFile(t, "v1.yaml", smallStrategy(ns, "v1"))
	ref := "oci://" + host + "/acme/small:v1"
	pinned := strings.TrimSpace(mustRun(t, nil, "push", v1, ref, "--version", "v1", "--registry", "example.com"))

	code, out, errOut := run(t, nil, args("apply", ref)...)
	if code != 0 || !strings.Contains(out, "5 created") {
		t.Fatalf("apply oci://: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := run(t, nil, args("plan", "oci://"+pinned)...); code != 0 {
		t.Fatalf("plan oci://...@sha256 after its apply: exit %d, want 0 (nothing to do)\n%s%s", code, out, errOut)
	}

	out = mustRun(t, nil, args("publish", ref)...)
	m := publishedRE.FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, ": v1 example.com,") {
		t.Fatalf("publish oci:// into the cluster: %q", out)
	}
	if out := mustRun(t, nil, args("verify", "cm/"+m[1])...); !strings.Contains(out, "OK    digest: sha256:") {
		t.Errorf("verify of the published strategy:\n%s", out)
	}
	again := strings.TrimSpace(mustRun(t, nil, args("push", "cm/"+m[1], "oci://"+host+"/acme/small:again")...))
	if again[strings.Index(again, "@"):] != pinned[strings.Index(pinned, "@"):] {
		t.Errorf("registry → cluster → registry: %s, first pushed as %s", again, pinned)
	}
}
