package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"

	"github.com/spf13/cobra"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/strategy"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// PasswordEnv holds the password of an encrypted private key, as for cosign.
const PasswordEnv = "COSIGN_PASSWORD"

const signLong = `Sign a strategy: the same strategy ConfigMap is written with a signature over the
digest of its decoded manifests text in the annotation installstrategy.io/signature
and the id of the key in installstrategy.io/signature-key, with a signed statement
of what it is (product, version, registry, identifier and text digest, as its
annotations claim them) in installstrategy.io/statement and
installstrategy.io/statement-signature. A strategy ConfigMap in
the cluster (cm/NAME, namespace -n; the head of a chunked one) is signed in place;
a file's ConfigMap is written, signed, to standard output.

The signature is cosign's keyed blob signature (ECDSA P-256 over the SHA-256 of
the decoded text, ASN.1, base64), so it verifies with
  cosign verify-blob --key cosign.pub --signature <(the annotation) <(kubectl installstrategy decode FILE)
The key is a PEM private key: a 'cosign generate-key-pair' key (encrypted; the
password is read from $COSIGN_PASSWORD) or an unencrypted PKCS#8 or SEC 1 EC key.

The text is decoded and its recorded digest (native form) checked before it is
signed: a signature only ever covers a text that was verified.

oci://HOST/REPOSITORY:TAG (or @sha256:DIGEST) signs a strategy artifact in the
registry (see publish) as cosign sign does: a simple-signing payload naming the
artifact's digest, with the product, version, registry, identifier and text
digest its annotations claim in the payload's optional section (so the signature
binds the digest to that identity), added to the signatures stored under its
sha256-<hex>.sig tag. The artifact is pulled and checked first.

--product names the product the signature is for (a ConfigMap's
installstrategy.io/product annotation is set to it before signing). An
operator's configMap source binds the product it deploys, so a strategy
signed for another product is refused there: sign each product's strategy
for that product. An artifact's product is set when it is published
(publish --product) and is part of its digest; --product is refused for oci://.`

const signExample = `  COSIGN_PASSWORD=... kubectl installstrategy sign strategy.yaml --key cosign.key > signed.yaml
  kubectl installstrategy sign cm/installstrategy-x7k2p -n sample --key operator.key
  kubectl installstrategy sign oci://ghcr.io/acme/kubevirt:v1.9.0 --key cosign.key`

func newSignCommand(o *options) *cobra.Command {
	var keyFile, name, product string
	var file *fileFlag
	cmd := &cobra.Command{
		Use:     "sign (FILE|-|cm/NAME|oci://REF | -f FILE) --key KEY",
		Short:   "Sign a strategy ConfigMap or OCI artifact with a private key (cosign-compatible)",
		Long:    signLong,
		Example: signExample,
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := file.source(cmd, args)
			if err != nil {
				return err
			}
			signer, err := readSigner(keyFile)
			if err != nil {
				return err
			}
			if product != "" {
				if err := validProduct(product); err != nil {
					return err
				}
			}
			if oci.IsReference(src) {
				if name != "" {
					return oneArtifact(src, "--name")
				}
				if product != "" {
					return usageError(fmt.Errorf("%s: an artifact's product is part of its digest: give --product to publish, not to sign", src))
				}
				return o.signArtifact(cmd.Context(), src, signer)
			}
			if cmName, ok := clusterRef(src); ok {
				return o.signInCluster(cmd.Context(), cmName, signer, product)
			}
			return o.signFile(src, name, product, signer)
		},
	}
	cmd.Flags().StringVar(&keyFile, "key", "", "PEM private key file (required); an encrypted cosign key's password is read from $"+PasswordEnv)
	cmd.Flags().StringVar(&name, "name", "", "the ConfigMap to sign when the file holds several")
	cmd.Flags().StringVar(&product, "product", "", "the product the signature is for (sets the ConfigMap's installstrategy.io/product annotation first; default: the annotation as it is)")
	file = addFileFlag(cmd)
	o.addRegistryFlag(cmd)
	return cmd
}

// signInCluster signs the strategy ConfigMap cmName in the namespace
// through the store.
func (o *options) signInCluster(ctx context.Context, cmName string, signer *trust.Signer, product string) error {
	c, err := o.cluster()
	if err != nil {
		return err
	}
	e, err := c.entryByName(ctx, cmName)
	if err != nil {
		return err
	}
	dopts, err := o.decodeOptions()
	if err != nil {
		return err
	}
	st, err := store.New(c.kube, store.Options{Decode: dopts, Signer: signer})
	if err != nil {
		return err
	}
	signed, err := st.Sign(ctx, e, store.SignOptions{Product: product})
	if err != nil {
		return err
	}
	fmt.Fprintf(o.streams.Out, "configmap/%s signed in %s with key %s\n", signed.Name, signed.Namespace, signed.SignatureKey)
	return nil
}

// signFile prints the strategy ConfigMap of a file (name picks one of
// several) with its signature.
func (o *options) signFile(src, name, product string, signer *trust.Signer) error {
	in, err := o.readInput(src)
	if err != nil {
		return err
	}
	if in.Strategy != nil {
		return fmt.Errorf("%s: a manifests text has no ConfigMap to carry a signature: encode it first (kubectl installstrategy encode), or sign the text itself with cosign sign-blob", in.Source)
	}
	cm, err := pickConfigMap(in, pick{name: name, flag: "--name"})
	if err != nil {
		return err
	}
	dopts, err := o.decodeOptions()
	if err != nil {
		return err
	}
	text, _, err := codec.Decode(cm, dopts)
	if err != nil {
		return err
	}
	if _, _, err := strategy.Parse(text, strategy.ParseOptions{}); err != nil {
		return fmt.Errorf("%s: %w", in.Source, err)
	}
	signed := cm.DeepCopy()
	if signed.Annotations == nil {
		signed.Annotations = map[string]string{}
	}
	if product != "" {
		signed.Annotations[metakeys.ProductAnnotation] = product
	}
	if err := trust.Sign(signed.Annotations, codec.Digest(text), signer); err != nil {
		return err
	}
	out, err := codec.MarshalYAML(signed)
	if err != nil {
		return err
	}
	_, err = o.streams.Out.Write(out)
	return err
}

// readSigner reads a PEM private key file; an encrypted one is opened with
// $COSIGN_PASSWORD.
func readSigner(path string) (*trust.Signer, error) {
	if path == "" {
		return nil, errors.New("--key: give a PEM private key file")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--key: %w", err)
	}
	s, err := trust.ParsePrivateKey(data, []byte(os.Getenv(PasswordEnv)))
	if err != nil {
		return nil, fmt.Errorf("--key %s: %w", path, err)
	}
	return s, nil
}

// readKeyRing reads PEM public key files.
func readKeyRing(paths []string) (*trust.KeyRing, error) {
	ring := &trust.KeyRing{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("--key: %w", err)
		}
		if err := ring.AddPEM(p, data); err != nil {
			return nil, fmt.Errorf("--key: %w", err)
		}
	}
	return ring, nil
}

// signatureCheck checks the signature annotations of a strategy ConfigMap
// over the digest of its decoded text against the trusted keys.
func signatureCheck(prefix string, ring *trust.KeyRing, text []byte, info codec.Info) []Check {
	name, err := ring.Verify(codec.Digest(text), info.Signature, info.SignatureKey)
	if err != nil {
		return []Check{{Name: prefix + "signature", Status: "fail", Detail: err.Error()}}
	}
	return []Check{{Name: prefix + "signature", Status: "ok", Detail: "signed by " + name}, statementCheck(prefix, ring, text, info)}
}

// statementCheck checks a ConfigMap's signed statement: by a trusted key,
// naming this text and the identity the ConfigMap claims. A signature
// without one (cosign sign-blob's, or made before statements) is a
// warning: it binds the bytes but not the product or version, and the
// operator refuses it as a signed configMap source.
func statementCheck(prefix string, ring *trust.KeyRing, text []byte, info codec.Info) Check {
	c := Check{Name: prefix + "statement"}
	st, name, err := trust.VerifyStatement(info.Statement, info.StatementSignature, ring)
	switch {
	case errors.Is(err, trust.ErrNoStatement):
		c.Status, c.Detail = "warn", err.Error()+": the operator refuses it as a signed configMap source; sign it again with kubectl installstrategy sign --key"
		return c
	case err != nil:
		c.Status, c.Detail = "fail", err.Error()
		return c
	}
	want := trust.Statement{Product: st.Product, Version: info.Identity.Version, Registry: info.Identity.Registry, Identifier: info.Identity.Identifier, Digest: codec.Digest(text)}
	if st != want {
		c.Status, c.Detail = "fail", fmt.Sprintf("%v: signed by %s for %+v, the ConfigMap is %+v", trust.ErrIdentityMismatch, name, st, want)
		return c
	}
	product := ""
	if st.Product != "" {
		product = st.Product + " "
	}
	c.Status, c.Detail = "ok", fmt.Sprintf("signed by %s for %s%s", name, product, st.Version)
	return c
}

// productPattern is an OCI repository path component, what a product
// defaults to (oci.DefaultProduct).
var productPattern = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$`)

// validProduct refuses a product name that could not be a repository's
// last path element.
func validProduct(p string) error {
	if len(p) > 253 || !productPattern.MatchString(p) {
		return usageError(fmt.Errorf("--product %q: a product is lower case letters and digits, separated by '.', '_', '__' or '-', at most 253 characters", p))
	}
	return nil
}
