package cli

import (
	"bytes"
	"crypto"
	"crypto/elliptic"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/installstrategy/installstrategy/internal/kubevirtdata"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// cosignKeyPair writes a key pair in the format of cosign generate-key-pair
// (an "ENCRYPTED SIGSTORE PRIVATE KEY" under password, a "PUBLIC KEY") and
// returns the paths of cosign.key and cosign.pub.
func cosignKeyPair(t *testing.T, password string) (string, string) {
	t.Helper()
	priv, pub, err := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), cryptoutils.StaticPasswordFunc([]byte(password)))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cosign.key"), priv, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cosign.pub"), pub, 0o644); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "cosign.key"), filepath.Join(dir, "cosign.pub")
}

// sign of KubeVirt's real v1.9.0 ConfigMap with a cosign key: the result is
// the same ConfigMap plus the signature, key and signed statement
// annotations; sigstore's
// verifier (the code of `cosign verify-blob --key`) accepts the signature
// over the decoded text; verify --key accepts it with the right key and
// refuses another key, a broken signature and a changed byte.
func TestSignAndVerify(t *testing.T) {
	t.Setenv(PasswordEnv, "s3cret")
	key, pub := cosignKeyPair(t, "s3cret")
	orig := kubevirtdata.Read(t, "v1.9.0", "configmap.yaml")
	in := writeFile(t, "cm.yaml", string(orig))
	code, out, errOut := run(t, nil, "sign", in, "--key", key)
	if code != 0 {
		t.Fatalf("sign: exit %d: %s", code, errOut)
	}
	signedPath := writeFile(t, "signed.yaml", out)
	cms, err := codec.ReadConfigMaps("signed", []byte(out))
	if err != nil {
		t.Fatal(err)
	}
	origCMs, _ := codec.ReadConfigMaps("orig", orig)
	signed := cms[0]
	sig := signed.Annotations[metakeys.SignatureAnnotation]
	if sig == "" || signed.Annotations[metakeys.SignatureKeyAnnotation] == "" {
		t.Fatalf("no signature annotations: %v", signed.Annotations)
	}
	// The signature, its key, and the signed statement of the identity
	// (pkg/trust.Sign).
	if signed.Annotations[metakeys.StatementAnnotation] == "" || signed.Annotations[metakeys.StatementSignatureAnnotation] == "" {
		t.Errorf("no signed statement: %v", signed.Annotations)
	}
	if signed.Data[codec.ManifestsKey] != origCMs[0].Data[codec.ManifestsKey] || len(signed.Annotations) != len(origCMs[0].Annotations)+4 {
		t.Error("sign changed more than the four signature annotations")
	}

	if code, out, _ := run(t, nil, "inspect", signedPath); code != 0 || !strings.Contains(out, "by key "+signed.Annotations[metakeys.SignatureKeyAnnotation]+" (not checked") {
		t.Errorf("inspect of a signed strategy: exit %d\n%s", code, out)
	}

	// What cosign verify-blob --key cosign.pub --signature SIG TEXT does.
	_, text, _ := run(t, nil, "decode", signedPath)
	pubPEM, _ := os.ReadFile(pub)
	pk, err := cryptoutils.UnmarshalPEMToPublicKey(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	v, err := signature.LoadVerifier(pk, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(sig)
	if err := v.VerifySignature(bytes.NewReader(raw), strings.NewReader(text)); err != nil {
		t.Errorf("sigstore's verifier refuses the signature over the decoded text: %v", err)
	}

	if code, out, errOut := run(t, nil, "verify", signedPath, "--key", pub); code != 0 || !strings.Contains(out, "OK    signature: signed by "+pub) ||
		!strings.Contains(out, "OK    statement: signed by "+pub+" for v1.9.0") {
		t.Errorf("verify --key: exit %d\n%s%s", code, out, errOut)
	}
	// The statement is what binds the signature to v1.9.0: without it a
	// warning, with another version in it a failure.
	stmt := signed.Annotations[metakeys.StatementAnnotation]
	bare := signed.DeepCopy()
	delete(bare.Annotations, metakeys.StatementAnnotation)
	delete(bare.Annotations, metakeys.StatementSignatureAnnotation)
	bareYAML, _ := codec.MarshalYAML(bare)
	if code, out, _ := run(t, nil, "verify", writeFile(t, "bare.yaml", string(bareYAML)), "--key", pub); code != 0 || !strings.Contains(out, "WARN  statement: signed without a statement") {
		t.Errorf("verify without a statement: exit %d\n%s", code, out)
	}
	other := signed.DeepCopy()
	other.Annotations[metakeys.KubeVirtVersionAnnotation] = "v1.9.1"
	otherYAML, _ := codec.MarshalYAML(other)
	if code, out, _ := run(t, nil, "verify", writeFile(t, "other.yaml", string(otherYAML)), "--key", pub); code != 1 || !strings.Contains(out, "FAIL  statement: signed identity does not match") {
		t.Errorf("verify of a ConfigMap relabelled v1.9.1 (statement %s): exit %d\n%s", stmt, code, out)
	}
	_, otherPub := cosignKeyPair(t, "x")
	if code, out, _ := run(t, nil, "verify", signedPath, "--key", otherPub); code != 1 || !strings.Contains(out, "FAIL  signature: ") {
		t.Errorf("verify with another key: exit %d\n%s", code, out)
	}
	// Either key of two will do.
	if code, out, _ := run(t, nil, "verify", signedPath, "--key", otherPub, "--key", pub); code != 0 {
		t.Errorf("verify with two keys: exit %d\n%s", code, out)
	}
	brokenSig := []byte(sig)
	brokenSig[20] ^= 1
	broken := strings.Replace(string(must(os.ReadFile(signedPath))), sig, string(brokenSig), 1)
	if code, out, _ := run(t, nil, "verify", writeFile(t, "broken.yaml", broken), "--key", pub); code != 1 || !strings.Contains(out, "FAIL  signature: ") {
		t.Errorf("verify of a broken signature: exit %d\n%s", code, out)
	}
	// One byte of the text changed, the annotations kept.
	changedText := strings.Replace(text, "virt-operator", "virt-0perator", 1)
	changed, err := codec.EncodeText([]byte(changedText), codec.EncodeOptions{Format: codec.FormatKubeVirt, Identity: codec.DescribeConfigMap(signed).Identity})
	if err != nil {
		t.Fatal(err)
	}
	changed.Annotations = signed.Annotations
	changedYAML, _ := codec.MarshalYAML(changed)
	if code, out, _ := run(t, nil, "verify", writeFile(t, "changed.yaml", string(changedYAML)), "--key", pub); code != 1 || !strings.Contains(out, "FAIL  signature: ") {
		t.Errorf("verify of a changed text: exit %d\n%s", code, out)
	}
	// Without --key, verify does not look at signatures.
	if code, _, _ := run(t, nil, "verify", writeFile(t, "changed.yaml", string(changedYAML))); code != 0 {
		t.Errorf("verify without --key: exit %d", code)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A wrong password, a public key given as --key and a manifests text are
// refused with a reason.
func TestSignRefuses(t *testing.T) {
	key, pub := cosignKeyPair(t, "right")
	in := writeFile(t, "cm.yaml", string(kubevirtdata.Read(t, "v1.8.4", "configmap.yaml")))
	t.Setenv(PasswordEnv, "wrong")
	if code, _, errOut := run(t, nil, "sign", in, "--key", key); code == 0 || !strings.Contains(errOut, "--key") {
		t.Errorf("wrong password: exit %d %s", code, errOut)
	}
	if code, _, errOut := run(t, nil, "sign", in, "--key", pub); code == 0 || !strings.Contains(errOut, "private key") {
		t.Errorf("public key as --key: exit %d %s", code, errOut)
	}
	s, _ := trust.GenerateKey()
	plain := writeFile(t, "plain.key", string(s.PrivatePEM()))
	text := writeFile(t, "text.yaml", "---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: a\n")
	if code, _, errOut := run(t, nil, "sign", text, "--key", plain); code == 0 || !strings.Contains(errOut, "encode it first") {
		t.Errorf("manifests text: exit %d %s", code, errOut)
	}
}

// publish --key signs while storing; sign cm/NAME signs a stored KubeVirt
// ConfigMap in place; verify cm/NAME --key checks both in the cluster.
func TestClusterSignPublishVerify(t *testing.T) {
	env := testenv.New(t)
	ctx := t.Context()
	ns := env.Namespace(ctx, t)
	s, _ := trust.GenerateKey()
	key := writeFile(t, "operator.key", string(s.PrivatePEM()))
	pub := writeFile(t, "operator.pub", string(s.PublicPEM()))
	text := writeFile(t, "text.yaml", "---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: a\n  namespace: "+ns+"\n")
	code, out, errOut := run(t, nil, append([]string{"publish", text, "--version", "v1.0.0", "--identifier", "x", "--key", key}, clusterArgs(ns)...)...)
	if code != 0 || !strings.Contains(out, "signed with key "+s.KeyID()) {
		t.Fatalf("publish --key: exit %d %q %s", code, out, errOut)
	}
	name := strings.TrimPrefix(strings.Fields(out)[0], "configmap/")
	if code, out, errOut := run(t, nil, append([]string{"verify", "cm/" + name, "--key", pub}, clusterArgs(ns)...)...); code != 0 || !strings.Contains(out, "OK    signature") {
		t.Errorf("verify cm/%s --key: exit %d\n%s%s", name, code, out, errOut)
	}

	kv := createKubeVirtStrategy(ctx, t, env, ns)
	if code, out, _ := run(t, nil, append([]string{"verify", "cm/" + kv, "--key", pub}, clusterArgs(ns)...)...); code != 1 || !strings.Contains(out, "FAIL  signature: not signed") {
		t.Errorf("verify of an unsigned KubeVirt ConfigMap: exit %d\n%s", code, out)
	}
	if code, out, errOut := run(t, nil, append([]string{"sign", "cm/" + kv, "--key", key}, clusterArgs(ns)...)...); code != 0 || !strings.Contains(out, "signed") {
		t.Fatalf("sign cm/%s: exit %d %s %s", kv, code, out, errOut)
	}
	if code, out, errOut := run(t, nil, append([]string{"verify", "cm/" + kv, "--key", pub}, clusterArgs(ns)...)...); code != 0 {
		t.Errorf("verify of the signed KubeVirt ConfigMap: exit %d\n%s%s", code, out, errOut)
	}
}

// sign --product signs the strategy for a product: the ConfigMap's product
// annotation and the signed statement name it (an operator's configMap
// source binds the product); a name that could not be a product, or
// --product with an artifact (its product is part of its digest), is
// refused.
func TestSignForAProduct(t *testing.T) {
	s, _ := trust.GenerateKey()
	key := writeFile(t, "release.key", string(s.PrivatePEM()))
	ring := &trust.KeyRing{}
	if err := ring.AddPEM("release.pub", s.PublicPEM()); err != nil {
		t.Fatal(err)
	}
	in := writeFile(t, "cm.yaml", string(kubevirtdata.Read(t, "v1.8.4", "configmap.yaml")))
	out := mustRun(t, nil, "sign", in, "--key", key, "--product", "kubevirt")
	cms, err := codec.ReadConfigMaps("signed", []byte(out))
	if err != nil {
		t.Fatal(err)
	}
	a := cms[0].Annotations
	if a[metakeys.ProductAnnotation] != "kubevirt" {
		t.Errorf("product annotation %q, want kubevirt", a[metakeys.ProductAnnotation])
	}
	st, _, err := trust.VerifyStatement(a[metakeys.StatementAnnotation], a[metakeys.StatementSignatureAnnotation], ring)
	if err != nil || st.Product != "kubevirt" {
		t.Errorf("signed statement %+v (%v), want product kubevirt", st, err)
	}
	for _, bad := range []string{"Kube Virt", "../x", "a/b", "-x", strings.Repeat("a", 254)} {
		if code, _, errOut := run(t, nil, "sign", in, "--key", key, "--product", bad); code == 0 || !strings.Contains(errOut, "--product") {
			t.Errorf("--product %q: exit %d %s", bad, code, errOut)
		}
	}
	if code, _, errOut := run(t, nil, "sign", "oci://127.0.0.1:1/acme/x:v1", "--key", key, "--product", "x"); code == 0 || !strings.Contains(errOut, "publish") {
		t.Errorf("--product with oci://: exit %d %s", code, errOut)
	}
}
