package cli

import (
	"regexp"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var publishedRE = regexp.MustCompile(`^configmap/(\S+) published in `)

// TestClusterOCIApplyPlanPublish: apply and plan take an artifact as they
// take a file, its identity the artifact's (no --version); by tag, apply
// needs a trust decision, by digest it is pinned; publish stores
// it in the cluster from the registry, where verify checks it; pushed back
// from the cluster (cm/NAME) it is the same artifact, digest and all.
func TestClusterOCIApplyPlanPublish(t *testing.T) {
	_, _, ns := smallProduct(t)
	host := newRegistry(t)
	args := func(a ...string) []string { return append(a, clusterArgs(ns)...) }
	v1 := writeFile(t, "v1.yaml", smallStrategy(ns, "v1"))
	ref := "oci://" + host + "/acme/small:v1"
	pinned := strings.TrimSpace(mustRun(t, nil, "push", v1, ref, "--version", "v1", "--registry", "example.com"))

	// By tag, whoever may push to the repository or move the tag decides
	// what it is: apply takes it only with --key or --allow-unsigned.
	code, out, errOut := run(t, nil, args("apply", ref)...)
	if code == 0 || !strings.Contains(errOut, "--key") || !strings.Contains(errOut, "--allow-unsigned") || !strings.Contains(errOut, host+"/acme/small") {
		t.Fatalf("apply oci:// by tag without a trust decision: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = run(t, nil, args("apply", ref, "--allow-unsigned")...)
	if code != 0 || !strings.Contains(out, "5 created") || !strings.Contains(errOut, "without a signature") {
		t.Fatalf("apply oci:// --allow-unsigned: exit %d\n%s%s", code, out, errOut)
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

// TestApplyArtifactByTagWithKey: apply --key takes an artifact pulled by
// tag only when a signature by the key binds it to the product its
// repository names and to the identity it claims; a signed artifact of
// another product copied under the tag, an unsigned one, or one signed by
// another key is refused before anything is written. plan --key checks
// the same and plan without --key says the artifact is not verified.
func TestApplyArtifactByTagWithKey(t *testing.T) {
	env, ctx, ns := smallProduct(t)
	host := newRegistry(t)
	args := func(a ...string) []string { return append(a, clusterArgs(ns)...) }
	key, pub := keyPair(t, "vendor")
	_, otherPub := keyPair(t, "other")
	v1 := writeFile(t, "v1.yaml", smallStrategy(ns, "v1"))
	publish := func(ref, version string, extra ...string) {
		t.Helper()
		mustRun(t, nil, append([]string{"publish", v1, ref, "--version", version, "--registry", "example.com"}, extra...)...)
	}
	small := "oci://" + host + "/acme/small:v1"
	publish(small, "v1", "--key", key)
	// The same key signed another product of the vendor's; a tag mover
	// points acme/small:swapped at a copy of it.
	publish("oci://"+host+"/acme/other:v1", "v1", "--key", key)
	mustRun(t, nil, "copy", "oci://"+host+"/acme/other:v1", "oci://"+host+"/acme/small:swapped")
	publish("oci://"+host+"/acme/small:unsigned", "v2") // another digest than v1's

	for _, tt := range []struct{ what, ref, key, want string }{
		{"another product's artifact under the tag", "oci://" + host + "/acme/small:swapped", pub, "product"},
		{"an unsigned artifact", "oci://" + host + "/acme/small:unsigned", pub, "untrusted"},
		{"a signature by another key", small, otherPub, "untrusted"},
	} {
		for _, verb := range []string{"apply", "plan"} {
			// apply's error is exit 1, plan's 2 (its 1 means changes).
			code, out, errOut := run(t, nil, args(verb, tt.ref, "--key", tt.key)...)
			if code == 0 || verb == "plan" && code != 2 || !strings.Contains(errOut, tt.want) {
				t.Errorf("%s %s --key: exit %d, want an error naming %q\n%s%s", verb, tt.what, code, tt.want, out, errOut)
			}
		}
	}
	if _, err := env.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, "small", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a refused apply wrote the product: %v", err)
	}
	code, out, errOut := run(t, nil, args("plan", small)...)
	if code != 1 || !strings.Contains(errOut, "not verified") {
		t.Errorf("plan by tag without --key: exit %d, want 1 with a note that it is not verified\n%s%s", code, out, errOut)
	}
	code, out, errOut = run(t, nil, args("apply", small, "--key", pub)...)
	if code != 0 || !strings.Contains(out, "5 created") || !strings.Contains(errOut, "signed by") {
		t.Fatalf("apply --key of the vendor's artifact: exit %d\n%s%s", code, out, errOut)
	}
}
