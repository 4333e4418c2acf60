package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/spf13/cobra"

	"github.com/installstrategy/installstrategy/internal/buildinfo"
	"github.com/installstrategy/installstrategy/internal/confine"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/source"
	"github.com/installstrategy/installstrategy/pkg/strategy"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// This file wires strategies as OCI artifacts (oci://HOST/REPOSITORY:TAG
// or oci://HOST/REPOSITORY@sha256:DIGEST, pkg/oci) into the verbs: every
// verb that reads a strategy through loadStrategy pulls one, and publish
// (push), pull, copy, sign and verify write, read, mirror, sign and check
// them.

// ArtifactInfo is what publish, copy and inspect say of a strategy
// artifact; -o json and yaml print it as it is.
type ArtifactInfo struct {
	// Reference is HOST/REPOSITORY@sha256:DIGEST: what to pin.
	Reference string `json:"reference"`
	// Tag is the tag it was written or read by; "" for a digest reference.
	Tag string `json:"tag,omitempty"`
	// Digest is the manifest's digest: what signatures name.
	Digest string `json:"digest"`
	// Product, Version, Registry and Identifier are what the artifact's
	// annotations claim (empty for a copy, which reads only the manifest).
	Product    string `json:"product,omitempty"`
	Version    string `json:"version,omitempty"`
	Registry   string `json:"registry,omitempty"`
	Identifier string `json:"identifier,omitempty"`
	// TextDigest is the digest of the decoded manifests text.
	TextDigest string `json:"textDigest,omitempty"`
	// LayerBytes is the size of the compressed text.
	LayerBytes int64 `json:"layerBytes,omitempty"`
	// Signatures is how many signatures the registry holds for it (for a
	// copy: how many were copied with it).
	Signatures int `json:"signatures"`
	// SignedBy is the id of the key this command signed it with.
	SignedBy string `json:"signedBy,omitempty"`
	// Source is the reference a copy was read from.
	Source string `json:"source,omitempty"`
}

// addRegistryFlag adds --insecure-registry to a verb that reads or writes
// oci:// references.
func (o *options) addRegistryFlag(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&o.insecureRegistry, "insecure-registry", false,
		"talk plain HTTP to the registry of an oci:// reference (loopback registries are reached over HTTP without it)")
}

// ociClient returns the registry client, made once: credentials from the
// docker config and its credential helpers (as docker, crane and cosign
// find them), texts limited by --max-decoded-size.
func (o *options) ociClient() (*oci.Client, error) {
	if o.oci != nil {
		return o.oci, nil
	}
	dopts, err := o.decodeOptions()
	if err != nil {
		return nil, err
	}
	c, err := oci.New(oci.Options{Keychain: authn.DefaultKeychain, Insecure: o.insecureRegistry,
		MaxDecodedBytes: dopts.MaxDecodedBytes, UserAgent: "kubectl-installstrategy/" + buildinfo.Get().Version})
	if err != nil {
		return nil, err
	}
	o.oci = c
	return c, nil
}

// ociRef parses an oci:// reference: a malformed one is a usage error.
func (o *options) ociRef(ref string) (*oci.Client, name.Reference, error) {
	c, err := o.ociClient()
	if err != nil {
		return nil, nil, err
	}
	r, err := c.Parse(ref)
	if err != nil {
		return nil, nil, usageError(err)
	}
	return c, r, nil
}

// oneArtifact is the usage error of flag (--name) given with an oci://
// reference, which names one artifact.
func oneArtifact(ref, flag string) error {
	return usageError(fmt.Errorf("%s names one artifact already; %s picks one of a file's ConfigMaps", ref, flag))
}

// productOf is the product a repository holds by default: its last path
// element (ghcr.io/acme/kubevirt holds kubevirt).

// tagOf is the tag r names, "" for a digest.
func tagOf(r name.Reference) string {
	if t, ok := r.(name.Tag); ok {
		return t.TagStr()
	}
	return ""
}

// pullStrategy pulls the artifact ref names, checks it (pkg/oci: its
// layer against the manifest, its text against the recorded digest) and
// parses its text; the strategy's identity is the artifact's. No
// signature is checked: a reference by digest is pinned by the user, one
// by tag is taken unverified (source.Remote.Unverified, its VerifiedBy
// saying who may have written it).
func (o *options) pullStrategy(ctx context.Context, ref string) (*codec.Loaded, *oci.Artifact, error) {
	c, r, err := o.ociRef(ref)
	if err != nil {
		return nil, nil, err
	}
	var a *oci.Artifact
	pull := func(ctx context.Context) (*oci.Artifact, []oci.Signature, error) {
		var err error
		a, err = c.Pull(ctx, ref)
		return a, nil, err
	}
	rem, err := o.ociRemote(pull)
	if err != nil {
		return nil, nil, err
	}
	// Taken as it is: pinned by the user (oci://REF@sha256:...), or by
	// tag unverified — taken with --allow-unsigned, or read by a verb
	// that says it is not verified (clusterTrust decides which).
	if _, pinned := r.(name.Digest); pinned {
		rem.Pinned = true
	} else {
		rem.Unverified, rem.Why = true, repositoryWriters(r)+" may have written it"
	}
	l, err := source.OCI{Remote: rem}.Load(ctx)
	if err != nil {
		if a != nil {
			err = fmt.Errorf("%s: %w", ref, err)
		}
		return nil, nil, err
	}
	return loadedFrom(l), a, nil
}

// ociRemote is an oci:// pull as pkg/source judges it, its text bounded as
// the client bounds it (--max-decoded-size).
func (o *options) ociRemote(pull source.Pull) (source.Remote, error) {
	dopts, err := o.decodeOptions()
	if err != nil {
		return source.Remote{}, err
	}
	return source.Remote{Pull: pull, MaxTextBytes: int(dopts.MaxDecodedBytes)}, nil
}

// artifactInfo describes a pulled artifact, with the number of signatures
// the registry holds for it.
func (o *options) artifactInfo(ctx context.Context, ref string, a *oci.Artifact) (*ArtifactInfo, error) {
	c, r, err := o.ociRef(ref)
	if err != nil {
		return nil, err
	}
	sigs, err := c.Signatures(ctx, a)
	if err != nil {
		return nil, err
	}
	m := a.Meta
	return &ArtifactInfo{Reference: a.Reference, Tag: tagOf(r), Digest: a.Digest, Product: m.Product, Version: m.Version,
		Registry: m.Registry, Identifier: m.Identifier, TextDigest: m.Digest, LayerBytes: a.LayerBytes, Signatures: len(sigs)}, nil
}

// pushStrategy stores text at dest with the identity id, for product (""
// means the repository's last path element), and signs it with signer
// when not nil: the artifact is read back by digest and that is signed.
func (o *options) pushStrategy(ctx context.Context, dest string, text []byte, id strategy.Identity, product string, signer *trust.Signer) (*ArtifactInfo, error) {
	c, r, err := o.ociRef(dest)
	if err != nil {
		return nil, err
	}
	if product == "" {
		product = oci.DefaultProduct(r)
	}
	meta := oci.Meta{Product: product, Version: id.Version, Registry: id.Registry, Identifier: id.Identifier}
	p, err := c.Push(ctx, dest, text, meta)
	if err != nil {
		return nil, err
	}
	info := &ArtifactInfo{Reference: p.Reference, Tag: tagOf(r), Digest: p.Digest, Product: product, Version: id.Version,
		Registry: id.Registry, Identifier: id.Identifier, TextDigest: codec.Digest(text), LayerBytes: p.LayerBytes}
	a := &oci.Artifact{Repository: r.Context().String(), Digest: p.Digest}
	if signer != nil {
		if a, err = c.Pull(ctx, oci.Scheme+p.Reference); err != nil {
			return nil, fmt.Errorf("pushed %s, but reading it back to sign it: %w", p.Reference, err)
		}
		if _, err := c.Sign(ctx, a, signer); err != nil {
			return nil, fmt.Errorf("pushed %s, but not signed: %w", p.Reference, err)
		}
		info.SignedBy = signer.KeyID()
	}
	// The same artifact pushed again keeps the signatures it had.
	sigs, err := c.Signatures(ctx, a)
	if err != nil {
		return nil, fmt.Errorf("pushed %s: %w", p.Reference, err)
	}
	info.Signatures = len(sigs)
	return info, nil
}

// printArtifact prints what publish or copy did: for people the
// reference (what to pin) on standard output and a summary on standard
// error; with -o the ArtifactInfo as an object of kind.
func (o *options) printArtifact(out *output, kind string, info *ArtifactInfo, summary string) error {
	if out.Human() {
		fmt.Fprintln(o.streams.ErrOut, summary)
		_, err := fmt.Fprintln(o.streams.Out, info.Reference)
		return err
	}
	obj, err := toObject(info, reportGVK(kind), info.Reference, "")
	if err != nil {
		return err
	}
	return out.print(o.streams.Out, obj)
}

// pushSummary is publish's line for people.
func pushSummary(dest string, info *ArtifactInfo) string {
	s := fmt.Sprintf("pushed %s %s to %s (%s compressed)", info.Product, identityString(strategy.Identity{Version: info.Version, Registry: info.Registry, Identifier: info.Identifier}),
		dest, bytesString(int(info.LayerBytes)))
	if info.SignedBy != "" {
		s += ", signed with key " + info.SignedBy
	}
	return s
}

// signArtifact signs the artifact ref names with signer.
func (o *options) signArtifact(ctx context.Context, ref string, signer *trust.Signer) error {
	c, _, err := o.ociRef(ref)
	if err != nil {
		return err
	}
	a, err := c.Pull(ctx, ref)
	if err != nil {
		return err
	}
	if _, err := c.Sign(ctx, a, signer); err != nil {
		return err
	}
	_, err = fmt.Fprintf(o.streams.Out, "%s signed with key %s: %s %s, text %s\n", a.Reference, signer.KeyID(), a.Meta.Product,
		identityString(strategy.Identity{Version: a.Meta.Version, Registry: a.Meta.Registry, Identifier: a.Meta.Identifier}), a.Meta.Digest)
	return err
}

func newPullCommand(o *options) *cobra.Command {
	var format, cmName, output, outputFile string
	cmd := &cobra.Command{
		Use:   "pull oci://HOST/REPOSITORY:TAG|@sha256:DIGEST",
		Short: "Read a strategy artifact from a registry, as a strategy ConfigMap or its text",
		Long: `Pull a strategy artifact (see publish) and print it as a strategy ConfigMap, as
encode writes one (-o yaml, the default, or json; --format, --name and -n as for
encode), or its manifests text as decode prints it (-o text). The identity
(version, registry, identifier) is the artifact's.

The artifact is checked before anything is written: its manifest must be a
strategy's, its layer must match the manifest's digest and size, and its text the
digest the manifest records; the text must parse. Signatures are not checked
here: verify oci://... --key checks them.

--output-file writes the result to a file (replaced atomically) instead of
standard output. Credentials come from the docker config and its credential
helpers (docker login, as for crane and cosign).`,
		Example: `  kubectl installstrategy pull oci://ghcr.io/acme/kubevirt:v1.9.0 -n kubevirt | kubectl create -f -
  kubectl installstrategy pull oci://registry.internal:5000/mirror/kubevirt:v1.9.0 -o text > kubevirt-v1.9.0.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := codec.ParseFormat(format)
			if err != nil {
				return usageError(err)
			}
			if output != "yaml" && output != "json" && output != "text" {
				return usageError(fmt.Errorf("--output %q: want yaml, json or text", output))
			}
			if output == "text" && (cmd.Flags().Changed("format") || cmName != "") {
				return usageError(errors.New("--format and --name shape the ConfigMap; -o text prints the manifests text"))
			}
			if !oci.IsReference(args[0]) {
				return usageError(fmt.Errorf("%s: pull reads a registry: want oci://HOST/REPOSITORY:TAG (decode reads files and cm/NAME)", args[0]))
			}
			l, _, err := o.pullStrategy(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			printWarnings(o.streams.ErrOut, l.Warnings)
			data := l.Text
			if output != "text" {
				cm, err := codec.EncodeText(l.Text, codec.EncodeOptions{Format: f, Namespace: o.namespace(), Name: cmName, Identity: l.Strategy.Identity})
				if err != nil {
					return fmt.Errorf("%s: %w", args[0], err)
				}
				if data, err = marshalConfigMap(cm, output); err != nil {
					return err
				}
			}
			return o.writeOutput(outputFile, data)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "yaml", "output format: yaml or json (a strategy ConfigMap), or text (the manifests text)")
	cmd.Flags().StringVar(&format, "format", "native", "ConfigMap form: native or kubevirt")
	cmd.Flags().StringVar(&cmName, "name", "", "ConfigMap name (default: a generateName prefix)")
	cmd.Flags().StringVar(&outputFile, "output-file", "", "write to this file (replaced atomically) instead of standard output")
	o.addRegistryFlag(cmd)
	return cmd
}

func newCopyCommand(o *options) *cobra.Command {
	var out *output
	cmd := &cobra.Command{
		Use:   "copy oci://SOURCE oci://DESTINATION",
		Short: "Copy a strategy artifact and its signatures to another registry (a mirror)",
		Long: `Copy a strategy artifact, byte for byte, and the cosign signatures stored for it
(its sha256-<hex>.sig tag) to another repository: the digest stays the same, so
signatures and pinned digests stay valid in the mirror. DESTINATION names a tag,
or only a repository (oci://HOST/REPOSITORY), which takes SOURCE's tag (a digest
SOURCE is then written by digest only). Only strategy artifacts are copied:
anything else is refused before a byte is written.

The copy's reference HOST/REPOSITORY@sha256:DIGEST is printed on standard output,
what was copied (with the number of signatures) on standard error; -o json or
yaml print it as a CopiedArtifact (` + reportVersion + `).`,
		Example: `  # Mirror a signed release for an air-gapped cluster, then check the mirror's copy
  kubectl installstrategy copy oci://ghcr.io/acme/kubevirt:v1.9.0 oci://registry.internal:5000/mirror/kubevirt
  kubectl installstrategy verify oci://registry.internal:5000/mirror/kubevirt:v1.9.0 --key cosign.pub`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			if out.Name() {
				return usageError(errors.New("--output name: copy prints one artifact; want text, json or yaml"))
			}
			c, src, err := o.ociRef(args[0])
			if err != nil {
				return err
			}
			if !oci.IsReference(args[1]) {
				return usageError(fmt.Errorf("%s: not an OCI reference (want oci://HOST/REPOSITORY[:TAG])", args[1]))
			}
			cp, err := c.Copy(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			tag := tagOf(src) // a bare repository takes the source's
			if d, err := c.Parse(args[1]); err == nil {
				tag = tagOf(d)
			}
			info := &ArtifactInfo{Reference: cp.Reference, Tag: tag, Digest: cp.Digest, Signatures: cp.Signatures, Source: args[0]}
			return o.printArtifact(out, "CopiedArtifact", info, fmt.Sprintf("copied %s to %s with %s", args[0], copyTarget(cp.Reference, tag), plural(cp.Signatures, "signature")))
		},
	}
	out = addOutput(cmd, "text")
	o.addRegistryFlag(cmd)
	return cmd
}

// copyTarget names a copy by its tag when it has one.
func copyTarget(ref, tag string) string {
	if tag == "" {
		return ref
	}
	repo, _, _ := strings.Cut(ref, "@")
	return repo + ":" + tag
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// verifyArtifact verifies the artifact ref names: it is a strategy
// artifact whose layer and text match its digests, its text parses, and
// with a key ring one of its cosign signatures is by a trusted key and
// binds its digest to the product and version want asks for (want.Product
// "" means the repository's last path element) and to the identity the
// artifact claims.
func (o *options) verifyArtifact(ctx context.Context, ref string, ring *trust.KeyRing, want trust.Expect) ([]Check, error) {
	c, r, err := o.ociRef(ref)
	if err != nil {
		return nil, err
	}
	a, err := c.Pull(ctx, ref)
	if errors.Is(err, codec.ErrDigestMismatch) {
		return []Check{{Name: "digest", Status: "fail", Detail: err.Error()}}, nil
	}
	if err != nil {
		return nil, err
	}
	m := a.Meta
	checks := []Check{
		{Name: "artifact", Status: "ok", Detail: fmt.Sprintf("%s: a strategy artifact, %s compressed, its layer matching the manifest", a.Reference, bytesString(int(a.LayerBytes)))},
		{Name: "digest", Status: "ok", Detail: m.Digest + " matches"},
	}
	id := strategy.Identity{Version: m.Version, Registry: m.Registry, Identifier: m.Identifier}
	if id.Identifier == "" {
		checks = append(checks, Check{Name: "identity", Status: "warn", Detail: m.Product + " " + identityString(id) + ": no identifier: matched on version and registry only (legacy)"})
	} else {
		checks = append(checks, Check{Name: "identity", Status: "ok", Detail: m.Product + " " + identityString(id)})
	}
	if ring != nil {
		if want.Product == "" {
			want.Product = oci.DefaultProduct(r)
		}
		want.Digest = codec.Digest(a.Text)
		checks = append(checks, o.artifactSignatureChecks(ctx, c, a, ring, want)...)
	}
	// The parse check, whatever the signature checks found: through
	// pkg/source, unverified (verify reports, it acts on nothing), its
	// text bounded first.
	rem, err := o.ociRemote(func(context.Context) (*oci.Artifact, []oci.Signature, error) { return a, nil, nil })
	if err != nil {
		return nil, err
	}
	rem.Unverified = true
	l, err := source.OCI{Remote: rem}.Load(ctx)
	if err != nil {
		return append(checks, Check{Name: "parse", Status: "fail", Detail: err.Error()}), nil
	}
	return append(checks, parseChecks(l.Strategy, l.Warnings)...), nil
}

// artifactSignatureChecks are the "signature" check (a signature by a
// trusted key that names the artifact's digest) and the "statement" check
// (a verified signature binds it to want and to its own claims).
func (o *options) artifactSignatureChecks(ctx context.Context, c *oci.Client, a *oci.Artifact, ring *trust.KeyRing, want trust.Expect) []Check {
	sigs, err := c.Signatures(ctx, a)
	if err != nil {
		return []Check{{Name: "signature", Status: "fail", Detail: err.Error()}}
	}
	verified, err := oci.Verify(sigs, a.Digest, ring)
	if err != nil {
		return []Check{{Name: "signature", Status: "fail", Detail: err.Error()}}
	}
	var keys []string
	var bound []oci.Verified
	for _, v := range verified {
		if !slices.Contains(keys, v.Key) {
			keys = append(keys, v.Key)
		}
		if v.Statement != (trust.Statement{}) {
			bound = append(bound, v)
		}
	}
	sig := Check{Name: "signature", Status: "ok", Detail: fmt.Sprintf("signed by %s (%d of %d stored signatures verify)", strings.Join(keys, ", "), len(verified), len(sigs))}
	if len(bound) == 0 {
		st := oci.StatementOf(a)
		return []Check{sig, {Name: "statement", Status: "fail", Detail: fmt.Sprintf(
			"not bound to an identity: the payload of the signature names the digest only, no product, version or text digest (a bare cosign sign); "+
				"sign with kubectl installstrategy sign oci://... --key, or cosign sign %s", strings.Join(cosignAnnotations(st), " "))}}
	}
	v, err := oci.Check(a, bound, want)
	if err != nil {
		return []Check{sig, {Name: "statement", Status: "fail", Detail: err.Error()}}
	}
	s := v.Statement
	return []Check{sig, {Name: "statement", Status: "ok", Detail: fmt.Sprintf("signed by %s for %s %s, text %s", v.Key, s.Product,
		identityString(strategy.Identity{Version: s.Version, Registry: s.Registry, Identifier: s.Identifier}), s.Digest)}}
}

// cosignAnnotations are the -a flags of a cosign sign whose signature binds
// the artifact to st, as Client.Sign's does.
func cosignAnnotations(st trust.Statement) []string {
	a := []string{"-a " + metakeys.ProductAnnotation + "=" + st.Product, "-a " + metakeys.VersionAnnotation + "=" + st.Version}
	if st.Registry != "" {
		a = append(a, "-a "+metakeys.RegistryAnnotation+"="+st.Registry)
	}
	if st.Identifier != "" {
		a = append(a, "-a "+metakeys.IdentifierAnnotation+"="+st.Identifier)
	}
	return append(a, "-a "+metakeys.DigestAnnotation+"="+st.Digest)
}

// writeOutput writes data to standard output, or atomically to path.
func (o *options) writeOutput(path string, data []byte) error {
	if path == "" {
		_, err := o.streams.Out.Write(data)
		return err
	}
	if err := confine.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("--output-file: %w", err)
	}
	return nil
}
