package cli

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/installstrategy/installstrategy/internal/kubevirtdata"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// newRegistry starts a registry on loopback (go-containerregistry's, the
// protocol of distribution) and returns its HOST:PORT.
func newRegistry(t *testing.T) string {
	t.Helper()
	s := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

// exampleRegistry serves the registries the verbs' examples name
// (ghcr.io/acme and registry.internal:5000/mirror) from one loopback
// registry holding KubeVirt's v1.9.0 strategy in both, signed with the
// key cosign.key it writes into dir (with cosign.pub); it returns the
// rewrite of an example's line to that registry.
func exampleRegistry(t *testing.T, dir string) func(string) string {
	t.Helper()
	host := newRegistry(t)
	s, err := trust.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "cosign.key")
	for name, data := range map[string][]byte{"cosign.key": s.PrivatePEM(), "cosign.pub": s.PublicPEM()} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cm := writeFile(t, "kubevirt-v1.9.0.configmap.yaml", string(kubevirtdata.Read(t, "v1.9.0", "configmap.yaml")))
	for _, repo := range []string{"acme/kubevirt:v1.9.0", "mirror/kubevirt:v1.9.0"} {
		mustRun(t, nil, "publish", cm, "oci://"+host+"/"+repo, "--key", key)
	}
	return strings.NewReplacer("oci://ghcr.io/", "oci://"+host+"/", "oci://registry.internal:5000/", "oci://"+host+"/").Replace
}

// ociStrategy is a small strategy of two objects, as a manifests text in
// canonical form.
func ociStrategy(version string) string {
	return "---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: sa\n  namespace: sample\n" +
		"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: sample\ndata:\n  version: " + version + "\n"
}

// canonical is the canonical form of a manifests text, as publish pushes it.
func canonical(t *testing.T, text string) string {
	t.Helper()
	code, cm, errOut := run(t, []byte(text), "encode", "-", "--version", "v0")
	if code != 0 {
		t.Fatalf("encode: exit %d %s", code, errOut)
	}
	code, out, errOut := run(t, []byte(cm), "decode", "-")
	if code != 0 {
		t.Fatalf("decode: exit %d %s", code, errOut)
	}
	return out
}

// keyPair writes a new signing key and its public key as PEM files.
func keyPair(t *testing.T, name string) (key, pub string) {
	t.Helper()
	s, err := trust.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, name+".key", string(s.PrivatePEM())), writeFile(t, name+".pub", string(s.PublicPEM()))
}

// mustRun runs the plugin and fails the test unless it exits 0; it
// returns standard output.
func mustRun(t *testing.T, stdin []byte, args ...string) string {
	t.Helper()
	code, out, errOut := run(t, stdin, args...)
	if code != 0 {
		t.Fatalf("%s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// TestOCIPublishPullRoundTrip: a strategy ConfigMap pushed to a registry
// pulls back as the same ConfigMap (and its text as the same text); a
// manifests text pushed with push (publish's alias) pulls back as itself,
// by tag and by the digest publish printed; -o json describes the push.
func TestOCIPublishPullRoundTrip(t *testing.T) {
	host := newRegistry(t)
	text := canonical(t, ociStrategy("v1.0.0"))
	cm := mustRun(t, []byte(text), "encode", "-", "-n", "sample", "--name", "sample-v1", "--version", "v1.0.0",
		"--registry", "quay.io/acme", "--identifier", "id-v1")
	cmFile := writeFile(t, "cm.yaml", cm)

	ref := "oci://" + host + "/acme/sample:v1.0.0"
	code, out, errOut := run(t, nil, "publish", cmFile, ref)
	if code != 0 {
		t.Fatalf("publish: exit %d %s", code, errOut)
	}
	pinned := strings.TrimSpace(out)
	if !strings.HasPrefix(pinned, host+"/acme/sample@sha256:") || strings.Count(out, "\n") != 1 {
		t.Fatalf("publish printed %q, want the one reference HOST/REPOSITORY@sha256:...", out)
	}
	if !strings.Contains(errOut, "pushed sample v1.0.0 quay.io/acme id-v1 to "+ref) {
		t.Errorf("publish summary: %q", errOut)
	}
	if got := mustRun(t, nil, "pull", ref, "-n", "sample", "--name", "sample-v1"); got != cm {
		t.Fatalf("pull gave another ConfigMap than was published:\n%s", firstLineDiff(got, cm))
	}
	if got := mustRun(t, nil, "pull", "oci://"+pinned, "-o", "text"); got != text {
		t.Fatalf("pull -o text by digest:\n%s", firstLineDiff(got, text))
	}
	// decode and pull -o text agree; --output-file writes the same bytes.
	if got := mustRun(t, nil, "decode", "oci://"+pinned); got != text {
		t.Fatalf("decode oci://:\n%s", firstLineDiff(got, text))
	}
	file := filepath.Join(t.TempDir(), "pulled.yaml")
	if out := mustRun(t, nil, "pull", ref, "-n", "sample", "--name", "sample-v1", "--output-file", file); out != "" {
		t.Errorf("pull --output-file wrote to standard output: %q", out)
	}
	if got, err := os.ReadFile(file); err != nil || string(got) != cm {
		t.Fatalf("pull --output-file: %v\n%s", err, firstLineDiff(string(got), cm))
	}
	// The same strategy pushed again has the same digest.
	if again := strings.TrimSpace(mustRun(t, nil, "publish", cmFile, ref)); again != pinned {
		t.Errorf("the same strategy pushed twice: %s, then %s", pinned, again)
	}

	// A manifests text, with push and -o json.
	plain := writeFile(t, "manifests.yaml", text)
	ref2 := "oci://" + host + "/acme/other:v2"
	code, out, errOut = run(t, nil, "push", plain, ref2, "--version", "v2", "--product", "sample", "-o", "json")
	if code != 0 {
		t.Fatalf("push -o json: exit %d %s", code, errOut)
	}
	var info struct {
		Kind string `json:"kind"`
		ArtifactInfo
	}
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if info.Kind != "PublishedArtifact" || info.Product != "sample" || info.Version != "v2" || info.Tag != "v2" ||
		info.TextDigest != codec.Digest([]byte(text)) || !strings.HasSuffix(info.Reference, "@"+info.Digest) {
		t.Fatalf("push -o json: %+v", info)
	}
	if got := mustRun(t, nil, "pull", ref2, "-o", "text"); got != text {
		t.Fatalf("pushed text pulls back as:\n%s", firstLineDiff(got, text))
	}
	if info.Signatures != 0 {
		t.Errorf("push -o json of an unsigned artifact: %d signatures", info.Signatures)
	}
	// -f FILE is the argument: the same artifact.
	if again := strings.TrimSpace(mustRun(t, nil, "push", "-f", plain, ref2, "--version", "v2", "--product", "sample")); again != info.Reference {
		t.Errorf("push -f: %s, push FILE: %s", again, info.Reference)
	}
	// Without a version there is nothing to push.
	if code, _, errOut := run(t, nil, "push", plain, ref2); code != 2 || !strings.Contains(errOut, "needs a version") {
		t.Errorf("push without a version: exit %d %s", code, errOut)
	}
}

// TestOCISignVerify: publish --key signs what it pushed and verify --key
// accepts it; another key, no signature, another product or version, and
// a text that does not match the digest its manifest records are refused
// with exit 1 and the reason; sign oci:// signs an artifact in place.
func TestOCISignVerify(t *testing.T) {
	host := newRegistry(t)
	key, pub := keyPair(t, "release")
	_, otherPub := keyPair(t, "other")
	plain := writeFile(t, "manifests.yaml", ociStrategy("v1.0.0"))
	signed := "oci://" + host + "/acme/sample:v1.0.0"
	if _, errOut := mustRunErr(t, "publish", plain, signed, "--version", "v1.0.0", "--identifier", "id1", "--key", key); !strings.Contains(errOut, "signed with key") {
		t.Errorf("publish --key summary: %s", errOut)
	}
	// Pushed again, the same artifact keeps its signature.
	var again ArtifactInfo
	if err := json.Unmarshal([]byte(mustRun(t, nil, "publish", plain, signed, "--version", "v1.0.0", "--identifier", "id1", "-o", "json")), &again); err != nil || again.Signatures != 1 {
		t.Errorf("the signed artifact pushed again: %v, %d signatures, want 1", err, again.Signatures)
	}
	code, out, errOut := run(t, nil, "verify", signed, "--key", pub, "--version", "v1.0.0")
	if code != 0 || !strings.Contains(out, "OK    signature: signed by "+pub) || !strings.Contains(out, "OK    statement: signed by "+pub+" for sample v1.0.0 id1") {
		t.Fatalf("verify --key: exit %d\n%s%s", code, out, errOut)
	}

	unsigned := "oci://" + host + "/acme/sample:v1.1.0"
	mustRun(t, nil, "publish", plain, unsigned, "--version", "v1.1.0", "--identifier", "id1")
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"another key", []string{"verify", signed, "--key", otherPub}, "FAIL  signature: signature 1: signed by a key that is not trusted"},
		{"unsigned", []string{"verify", unsigned, "--key", pub}, "FAIL  signature: not signed"},
		{"another product", []string{"verify", signed, "--key", pub, "--product", "kubevirt"}, `FAIL  statement: untrusted strategy: signed by ` + pub + `: signed identity does not match: signed for product "sample", want "kubevirt"`},
		{"another version", []string{"verify", signed, "--key", pub, "--version", "v1.1.0"}, `signed for version "v1.0.0", want "v1.1.0"`},
	} {
		code, out, errOut := run(t, nil, c.args...)
		if code != 1 || !strings.Contains(out, c.want) || !strings.Contains(errOut, "verification failed") {
			t.Errorf("%s: exit %d, want 1 and %q:\n%s%s", c.name, code, c.want, out, errOut)
		}
	}
	// Without --key the artifact's integrity and parse are checked.
	if out := mustRun(t, nil, "verify", unsigned); !strings.Contains(out, "OK    digest: sha256:") || !strings.Contains(out, "OK    parse: 2 objects") {
		t.Errorf("verify without --key:\n%s", out)
	}

	// sign oci:// signs it where it is.
	if out := mustRun(t, nil, "sign", unsigned, "--key", key); !strings.Contains(out, "signed with key") {
		t.Errorf("sign oci://: %s", out)
	}
	mustRun(t, nil, "verify", unsigned, "--key", pub, "--version", "v1.1.0")

	// A manifest whose recorded text digest is not its text's: the
	// artifact is refused whatever signs it.
	bad := "oci://" + host + "/acme/sample:tampered"
	retag(t, strings.TrimPrefix(signed, "oci://"), strings.TrimPrefix(bad, "oci://"), metakeys.DigestAnnotation, "sha256:"+strings.Repeat("0", 64))
	code, out, _ = run(t, nil, "verify", bad, "--key", pub)
	if code != 1 || !strings.Contains(out, "FAIL  digest: "+bad+": the text hashes to sha256:") {
		t.Errorf("tampered digest: exit %d\n%s", code, out)
	}
	if code, _, errOut := run(t, nil, "inspect", bad); code != 1 || !strings.Contains(errOut, bad) || !strings.Contains(errOut, "digest") {
		t.Errorf("inspect of a tampered artifact: exit %d %s", code, errOut)
	}
}

// mustRunErr is mustRun that also returns standard error.
func mustRunErr(t *testing.T, args ...string) (string, string) {
	t.Helper()
	code, out, errOut := run(t, nil, args...)
	if code != 0 {
		t.Fatalf("%s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out, errOut
}

// retag writes the manifest at src, with annotation key set to value, at
// dst (what someone with write access to the registry can do).
func retag(t *testing.T, src, dst, key, value string) {
	t.Helper()
	sr, err := name.ParseReference(src)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(sr)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(desc.Manifest, &m); err != nil {
		t.Fatal(err)
	}
	m["annotations"].(map[string]any)[key] = value
	body, _ := json.Marshal(m)
	dr, err := name.ParseReference(dst)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Put(dr, rawManifest{body: body, mediaType: desc.MediaType}); err != nil {
		t.Fatal(err)
	}
}

// TestOCICopyToMirror: copy brings an artifact and its signature to a
// second registry (a bare repository keeps the tag), where verify accepts
// it with the same key; a copy of an unsigned artifact has no signature.
func TestOCICopyToMirror(t *testing.T) {
	src, mirror := newRegistry(t), newRegistry(t)
	key, pub := keyPair(t, "release")
	plain := writeFile(t, "manifests.yaml", ociStrategy("v1.0.0"))
	ref := "oci://" + src + "/acme/sample:v1.0.0"
	pinned := strings.TrimSpace(mustRun(t, nil, "publish", plain, ref, "--version", "v1.0.0", "--key", key))
	out, errOut := mustRunErr(t, "copy", ref, "oci://"+mirror+"/mirror/sample")
	digest := pinned[strings.Index(pinned, "@"):]
	if strings.TrimSpace(out) != mirror+"/mirror/sample"+digest {
		t.Fatalf("copy printed %q, want the mirror's reference with the same digest %s", out, digest)
	}
	if want := "copied " + ref + " to " + mirror + "/mirror/sample:v1.0.0 with 1 signature"; !strings.Contains(errOut, want) {
		t.Errorf("copy summary %q, want %q", errOut, want)
	}
	code, out, errOut := run(t, nil, "verify", "oci://"+mirror+"/mirror/sample:v1.0.0", "--key", pub, "--version", "v1.0.0")
	if code != 0 || !strings.Contains(out, "OK    statement: signed by") {
		t.Fatalf("verify of the mirror's copy: exit %d\n%s%s", code, out, errOut)
	}
	// -o json; an unsigned artifact copies without signatures.
	mustRun(t, nil, "publish", plain, "oci://"+src+"/acme/sample:v1.1.0", "--version", "v1.1.0")
	out = mustRun(t, nil, "copy", "oci://"+src+"/acme/sample:v1.1.0", "oci://"+mirror+"/mirror/sample:latest", "-o", "json")
	var info ArtifactInfo
	if err := json.Unmarshal([]byte(out), &info); err != nil || info.Signatures != 0 || info.Tag != "latest" || info.Source != "oci://"+src+"/acme/sample:v1.1.0" {
		t.Fatalf("copy -o json: %v %+v", err, info)
	}
	if code, out, _ := run(t, nil, "verify", "oci://"+mirror+"/mirror/sample:latest", "--key", pub); code != 1 || !strings.Contains(out, "FAIL  signature: not signed") {
		t.Errorf("unsigned copy: exit %d\n%s", code, out)
	}
}

// TestOCIInspectDiff: inspect shows an artifact's reference, product and
// signatures (golden, the registry's address replaced); diff compares
// artifacts with each other and with files.
func TestOCIInspectDiff(t *testing.T) {
	host := newRegistry(t)
	key, _ := keyPair(t, "release")
	v1 := writeFile(t, "v1.yaml", ociStrategy("v1.0.0"))
	v2 := writeFile(t, "v2.yaml", ociStrategy("v2.0.0"))
	a := "oci://" + host + "/acme/sample:v1.0.0"
	b := "oci://" + host + "/acme/sample:v2.0.0"
	mustRun(t, nil, "publish", v1, a, "--version", "v1.0.0", "--registry", "quay.io/acme", "--identifier", "id1", "--key", key)
	mustRun(t, nil, "publish", v2, b, "--version", "v2.0.0")
	for _, format := range []string{"table", "json"} {
		out := mustRun(t, nil, "inspect", a, "-o", format)
		golden(t, "inspect-oci-"+format, strings.ReplaceAll(out, host, "REGISTRY"))
	}
	code, out, errOut := run(t, nil, "diff", a, b)
	if code != 1 || !strings.Contains(out, "identity: v1.0.0 quay.io/acme id1 -> v2.0.0") || !strings.Contains(out, ".data.version v1.0.0 → v2.0.0") {
		t.Fatalf("diff of two artifacts: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := run(t, nil, "diff", "--summary", v1, a); code != 0 || !strings.Contains(out, "changed 0, unchanged 2") {
		t.Fatalf("diff of a file and its artifact: exit %d\n%s%s", code, out, errOut)
	}
}

// TestOCIBadArtifacts: what is not a strategy artifact, or not there, is
// an error naming the reference (exit 1; 2 for diff).
func TestOCIBadArtifacts(t *testing.T) {
	host := newRegistry(t)
	img, err := random.Image(100, 1)
	if err != nil {
		t.Fatal(err)
	}
	r, err := name.ParseReference(host + "/acme/image:v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
	image := "oci://" + host + "/acme/image:v1"
	missing := "oci://" + host + "/acme/missing:v1"
	plain := writeFile(t, "manifests.yaml", ociStrategy("v1"))
	key, _ := keyPair(t, "release")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"pull", image}, 1, image + ": not a strategy artifact: artifact type application/vnd.docker.container.image.v1+json"},
		{[]string{"inspect", image}, 1, "not a strategy artifact"},
		{[]string{"verify", image}, 1, "not a strategy artifact"},
		{[]string{"copy", image, "oci://" + host + "/mirror/image"}, 1, "not a strategy artifact"},
		{[]string{"pull", missing}, 1, missing + ": pull manifest: not found"},
		{[]string{"diff", plain, missing}, 2, missing + ": pull manifest: not found"},
		{[]string{"sign", missing, "--key", key}, 1, missing + ": pull manifest: not found"},
	} {
		code, out, errOut := run(t, nil, c.args...)
		if code != c.code || !strings.HasPrefix(errOut, "error: ") || !strings.Contains(errOut, c.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%s: exit %d, want %d and one line saying %q:\n%s%s", strings.Join(c.args, " "), code, c.code, c.want, out, errOut)
		}
		if out != "" {
			t.Errorf("%s: wrote to standard output: %q", strings.Join(c.args, " "), out)
		}
	}
	// Nothing was written to the mirror.
	if _, err := remote.Head(mustRef(t, host+"/mirror/image:v1")); err == nil {
		t.Error("copy of an image wrote it")
	}
}

func mustRef(t *testing.T, s string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// rawManifest is a manifest given as bytes, for remote.Put.
type rawManifest struct {
	body      []byte
	mediaType types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.body, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mediaType, nil }

// TestOCIRegistryCredentials: a registry that wants a password is reached
// with the credentials of the docker config ($DOCKER_CONFIG, as docker
// login writes it); without them the push is refused with the registry's
// answer, naming the reference.
func TestOCIRegistryCredentials(t *testing.T) {
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "robot" || p != "s3cret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	host := strings.TrimPrefix(s.URL, "http://")
	ref := "oci://" + host + "/acme/sample:v1"
	plain := writeFile(t, "manifests.yaml", ociStrategy("v1"))

	t.Setenv("DOCKER_CONFIG", t.TempDir()) // no credentials
	code, _, errOut := run(t, nil, "push", plain, ref, "--version", "v1")
	if code != 1 || !strings.Contains(errOut, ref+": push blob: ") || !strings.Contains(errOut, "401 Unauthorized") {
		t.Fatalf("push without credentials: exit %d %s", code, errOut)
	}
	config := t.TempDir()
	auth := base64.StdEncoding.EncodeToString([]byte("robot:s3cret"))
	if err := os.WriteFile(filepath.Join(config, "config.json"), []byte(`{"auths":{"`+host+`":{"auth":"`+auth+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", config)
	mustRun(t, nil, "push", plain, ref, "--version", "v1")
	if got := mustRun(t, nil, "pull", ref, "-o", "text"); got != canonical(t, ociStrategy("v1")) {
		t.Fatalf("pull with credentials:\n%s", got)
	}
}
