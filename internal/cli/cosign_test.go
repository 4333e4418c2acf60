package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/installstrategy/installstrategy/internal/kubevirtdata"
	"github.com/installstrategy/installstrategy/internal/testtier"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
)

// cosign returns the cosign CLI pinned in hack/tools/cosign.
func cosign(t *testing.T) string { return goTool(t, "cosign") }

// goTool returns the CLI name pinned in the module hack/tools/NAME, built
// (once, into the Go build cache) by `go tool`.
func goTool(t *testing.T, name string) string {
	t.Helper()
	cmd := exec.Command("go", "tool", "-n", name)
	cmd.Dir = filepath.Join("..", "..", "hack", "tools", name)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("build %s (hack/tools/%s): %v", name, name, err)
	}
	return strings.TrimSpace(string(out))
}

func runCosign(t *testing.T, bin, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), PasswordEnv+"=pw", "HOME="+dir, "SIGSTORE_NO_CACHE=true")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// cosignGenerateKeyPair builds cosign and makes an encrypted key pair with cosign
// generate-key-pair in a new folder (the password in $COSIGN_PASSWORD): it
// returns the binary, the folder and the key files.
func cosignGenerateKeyPair(t *testing.T) (bin, dir, key, pub string) {
	t.Helper()
	bin, dir = cosign(t), t.TempDir()
	if out, err := runCosign(t, bin, dir, "generate-key-pair"); err != nil {
		t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
	}
	t.Setenv(PasswordEnv, "pw")
	return bin, dir, filepath.Join(dir, "cosign.key"), filepath.Join(dir, "cosign.pub")
}

// The real cosign CLI and sign/verify agree, both ways: cosign
// verify-blob accepts the signature `sign` wrote (with a key from cosign
// generate-key-pair, encrypted) over the decoded text and refuses it over a
// changed text; verify --key accepts a signature made by cosign sign-blob.
func TestSignInteroperatesWithCosign(t *testing.T) {
	testtier.Heavy(t) // runs the cosign binary
	bin, dir, key, pub := cosignGenerateKeyPair(t)

	in := writeFile(t, "cm.yaml", string(kubevirtdata.Read(t, "v1.8.4", "configmap.yaml")))
	code, signed, errOut := run(t, nil, "sign", in, "--key", key)
	if code != 0 {
		t.Fatalf("sign: exit %d %s", code, errOut)
	}
	signedPath := writeFile(t, "signed.yaml", signed)
	cms, err := codec.ReadConfigMaps("signed", []byte(signed))
	if err != nil {
		t.Fatal(err)
	}
	sig := writeFile(t, "manifests.sig", cms[0].Annotations[metakeys.SignatureAnnotation])
	_, text, _ := run(t, nil, "decode", signedPath)
	textPath := writeFile(t, "manifests.yaml", text)
	if out, err := runCosign(t, bin, dir, "verify-blob", "--key", pub, "--signature", sig, "--insecure-ignore-tlog=true", textPath); err != nil || !strings.Contains(out, "Verified OK") {
		t.Errorf("cosign verify-blob of sign's signature: %v\n%s", err, out)
	}
	changed := writeFile(t, "changed.yaml", strings.Replace(text, "virt-api", "virt-apj", 1))
	if out, err := runCosign(t, bin, dir, "verify-blob", "--key", pub, "--signature", sig, "--insecure-ignore-tlog=true", changed); err == nil {
		t.Errorf("cosign verify-blob accepts a changed text:\n%s", out)
	}

	// The other way: cosign signs the decoded text, verify checks the
	// ConfigMap carrying that signature.
	sig2 := filepath.Join(dir, "cosign.sig")
	if out, err := runCosign(t, bin, dir, "sign-blob", "--key", key, "--tlog-upload=false", "--yes", "--output-signature", sig2, textPath); err != nil {
		t.Fatalf("cosign sign-blob: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(sig2)
	if err != nil {
		t.Fatal(err)
	}
	cm := cms[0].DeepCopy()
	cm.Annotations[metakeys.SignatureAnnotation] = strings.TrimSpace(string(raw))
	delete(cm.Annotations, metakeys.SignatureKeyAnnotation)
	y, _ := codec.MarshalYAML(cm)
	if code, out, errOut := run(t, nil, "verify", writeFile(t, "cosigned.yaml", string(y)), "--key", pub); code != 0 || !strings.Contains(out, "OK    signature") {
		t.Errorf("verify --key of cosign sign-blob's signature: exit %d\n%s%s", code, out, errOut)
	}
}
