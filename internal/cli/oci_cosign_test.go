package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/installstrategy/installstrategy/internal/testtier"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
)

// The real cosign CLI (hack/tools/cosign) and the plugin agree on signed
// strategy artifacts, both ways, with a cosign generate-key-pair key
// (encrypted) and no transparency log: cosign verify accepts what publish
// --key signed (and checks the statement's fields as annotations) and
// refuses an unsigned artifact; verify --key accepts cosign sign's
// signature when its -a annotations bind the digest to the product,
// version and text digest, and refuses a bare one as bound to no identity,
// and one bound to another version; sign adds to the signatures cosign
// stored, and both tools see all of them. Every request that is not to the
// loopback registry goes to a proxy that is not there, so neither side
// reaches a transparency log or any other network.
func TestOCIInteroperatesWithCosign(t *testing.T) {
	testtier.Heavy(t) // runs the cosign binary
	bin, dir, key, pub := cosignGenerateKeyPair(t)
	for _, v := range []string{"HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"} {
		t.Setenv(v, "http://127.0.0.1:9")
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	// Trust material of one's own: cosign verify then does not ask
	// Sigstore's TUF repository for its trusted root (it would, and fall
	// back to these when that fails); no transparency log is used anyway.
	t.Setenv("SIGSTORE_REKOR_PUBLIC_KEY", pub)
	offline := func(what, out string) {
		t.Helper()
		if strings.Contains(out, "proxyconnect") || strings.Contains(out, "TUF") {
			t.Errorf("%s reached for the network:\n%s", what, out)
		}
	}
	host := newRegistry(t)

	type pushed struct{ ref, textDigest string }
	push := func(version string, args ...string) pushed {
		t.Helper()
		plain := writeFile(t, "manifests.yaml", ociStrategy(version))
		out := mustRun(t, nil, append([]string{"publish", plain, "oci://" + host + "/acme/sample:" + version, "--version", version, "-o", "json"}, args...)...)
		var info ArtifactInfo
		if err := json.Unmarshal([]byte(out), &info); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return pushed{info.Reference, info.TextDigest}
	}
	cosignVerify := func(ref string, args ...string) (string, error) {
		t.Helper()
		out, err := runCosign(t, bin, dir, append([]string{"verify", "--key", pub, "--insecure-ignore-tlog=true", "--offline=true", "--allow-http-registry=true"}, append(args, ref)...)...)
		offline("cosign verify", out)
		return out, err
	}
	cosignSign := func(ref string, args ...string) {
		t.Helper()
		out, err := runCosign(t, bin, dir, append([]string{"sign", "--key", key, "--tlog-upload=false", "--yes", "--allow-http-registry=true"}, append(args, ref)...)...)
		if err != nil {
			t.Fatalf("cosign sign %s: %v\n%s", ref, err, out)
		}
		offline("cosign sign", out)
	}
	annotations := func(version, textDigest string) []string {
		return []string{"-a", metakeys.ProductAnnotation + "=sample", "-a", metakeys.VersionAnnotation + "=" + version, "-a", metakeys.DigestAnnotation + "=" + textDigest}
	}

	// publish --key signs; cosign verifies, the statement's fields included.
	signed := push("v1.0.0", "--key", key)
	if out, err := cosignVerify(signed.ref, annotations("v1.0.0", signed.textDigest)...); err != nil || !strings.Contains(out, `"installstrategy.io/version":"v1.0.0"`) {
		t.Errorf("cosign verify of publish --key's signature: %v\n%s", err, out)
	}
	if out, err := cosignVerify(signed.ref, "-a", metakeys.VersionAnnotation+"=v9.0.0"); err == nil {
		t.Errorf("cosign verify -a version=v9.0.0 accepts a signature for v1.0.0:\n%s", out)
	}
	unsigned := push("v2.0.0")
	if out, err := cosignVerify(unsigned.ref); err == nil {
		t.Errorf("cosign verify accepts an unsigned artifact:\n%s", out)
	}

	// cosign signs with the annotations: verify --key accepts it.
	cosignSign(unsigned.ref, annotations("v2.0.0", unsigned.textDigest)...)
	code, out, errOut := run(t, nil, "verify", "oci://"+unsigned.ref, "--key", pub, "--version", "v2.0.0")
	if code != 0 || !strings.Contains(out, "OK    statement: signed by "+pub+" for sample v2.0.0") {
		t.Errorf("verify --key of cosign sign -a's signature: exit %d\n%s%s", code, out, errOut)
	}

	// A bare cosign signature verifies, but binds the digest to nothing.
	bare := push("v3.0.0")
	cosignSign(bare.ref)
	code, out, _ = run(t, nil, "verify", "oci://"+bare.ref, "--key", pub)
	if code != 1 || !strings.Contains(out, "OK    signature: signed by "+pub) ||
		!strings.Contains(out, "FAIL  statement: not bound to an identity") ||
		!strings.Contains(out, strings.Join(annotations("v3.0.0", bare.textDigest), " ")) {
		t.Errorf("verify --key of a bare cosign signature: exit %d, want 1, not bound to an identity, with the -a flags to sign it with\n%s", code, out)
	}
	// sign adds a bound signature beside cosign's bare one (in the
	// signature image cosign wrote): verify takes it, cosign sees both.
	mustRun(t, nil, "sign", "oci://"+bare.ref, "--key", key)
	code, out, _ = run(t, nil, "verify", "oci://"+bare.ref, "--key", pub)
	if code != 0 || !strings.Contains(out, "(2 of 2 stored signatures verify)") || !strings.Contains(out, "OK    statement: signed by "+pub+" for sample v3.0.0") {
		t.Errorf("verify --key with a bare and a bound signature: exit %d\n%s", code, out)
	}
	if out, err := cosignVerify(bare.ref); err != nil || strings.Count(out, `"critical"`) != 2 {
		t.Errorf("cosign verify of cosign's and sign's signatures: %v\n%s", err, out)
	}

	// Annotations for another version than the artifact claims.
	wrong := push("v4.0.0")
	cosignSign(wrong.ref, annotations("v5.0.0", wrong.textDigest)...)
	code, out, _ = run(t, nil, "verify", "oci://"+wrong.ref, "--key", pub)
	if code != 1 || !strings.Contains(out, "FAIL  statement: untrusted strategy: signed identity does not match: signed by "+pub+" for sample v5.0.0") {
		t.Errorf("verify --key of a cosign signature for another version: exit %d\n%s", code, out)
	}
}
