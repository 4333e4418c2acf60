package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// WriteReference writes the Markdown command reference (docs/CLI.md) from
// the commands' own help, so the two cannot drift apart.
func WriteReference(w io.Writer) error {
	root := NewRootCommand(Streams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard})
	var b bytes.Buffer
	b.WriteString("# kubectl installstrategy: command reference\n\n")
	b.WriteString("Generated from the commands' help by `go test ./internal/cli -run TestReference -update`; do not edit by hand.\n\n")
	b.WriteString(root.Long + "\n\n")
	b.WriteString("Exit status: 0 on success, 2 on a usage error (an unknown command or flag, a bad flag value, a wrong number of arguments), 1 on any other error; " +
		"`diff` and `plan` follow diff(1) (0 same, 1 different, 2 any error) and `verify` exits 1 when a check fails.\n\n")
	b.WriteString("## Commands\n\n")
	for _, c := range root.Commands() {
		if !c.IsAvailableCommand() {
			continue
		}
		fmt.Fprintf(&b, "- [`%s`](#%s): %s\n", c.Name(), c.Name(), c.Short)
	}
	b.WriteString(completionHelp)
	b.WriteString(ociHelp)
	b.WriteString("\n## Flags of every command\n\n```\n")
	b.WriteString(root.PersistentFlags().FlagUsages())
	b.WriteString("```\n")
	for _, c := range root.Commands() {
		if !c.IsAvailableCommand() {
			continue
		}
		writeCommand(&b, c)
	}
	out := b.Bytes()
	// Defaults under the home folder (--cache-dir) must not depend on who
	// generated the file.
	if home, err := os.UserHomeDir(); err == nil && home != "" && home != "/" {
		out = bytes.ReplaceAll(out, []byte(home+"/"), []byte("$HOME/"))
	}
	_, err := w.Write(out)
	return err
}

// completionHelp documents cobra's completion command, which the command
// tree gains only when it runs.
const completionHelp = `
## Shell completion

` + "`kubectl-installstrategy completion bash|zsh|fish|powershell`" + ` prints a completion
script (cobra's); commands and flags complete. Load it in the current shell, or
install it for good:

` + "```sh" + `
source <(kubectl-installstrategy completion bash)                      # bash, this shell
kubectl-installstrategy completion bash > /etc/bash_completion.d/kubectl-installstrategy
kubectl-installstrategy completion zsh > "${fpath[1]}/_kubectl-installstrategy"
kubectl-installstrategy completion fish > ~/.config/fish/completions/kubectl-installstrategy.fish
` + "```" + `

Completion of ` + "`kubectl installstrategy ...`" + ` (the plugin called through kubectl) needs
kubectl 1.26 or newer and an executable named kubectl_complete-installstrategy on
PATH that runs ` + "`kubectl-installstrategy __complete \"$@\"`" + `.
`

// ociHelp documents strategies as OCI artifacts across the verbs.
const ociHelp = `
## OCI artifacts

A strategy can live in any OCI registry (distribution, Harbor, Zot, ghcr.io,
quay.io, ECR, ...) as an artifact of type ` + "`application/vnd.installstrategy.strategy.v1`" + `: an
empty config and one layer, the gzip-compressed canonical manifests text, with
annotations naming the product, version, registry, identifier and the text's
digest (` + "`crane manifest REF`" + ` shows them). Every verb that reads a strategy takes
` + "`oci://HOST/REPOSITORY:TAG`" + ` or ` + "`oci://HOST/REPOSITORY@sha256:DIGEST`" + ` wherever it takes
FILE or cm/NAME (inspect, decode, diff, verify, plan, apply, publish into the
cluster); each read checks the layer against the manifest and the text against
the recorded digest, and the strategy's identity is the artifact's.

` + "```sh" + `
# Push (publish's alias), signed; prints the reference to pin: HOST/REPOSITORY@sha256:...
COSIGN_PASSWORD=... kubectl installstrategy push ./v1.9.0 oci://ghcr.io/acme/kubevirt:v1.9.0 \
    --version v1.9.0 --registry quay.io/kubevirt --identifier 26d9c187... --key cosign.key
kubectl installstrategy verify oci://ghcr.io/acme/kubevirt:v1.9.0 --key cosign.pub --version v1.9.0
kubectl installstrategy inspect oci://ghcr.io/acme/kubevirt:v1.9.0
kubectl installstrategy diff oci://ghcr.io/acme/kubevirt:v1.8.4 oci://ghcr.io/acme/kubevirt:v1.9.0
kubectl installstrategy pull oci://ghcr.io/acme/kubevirt:v1.9.0 -n kubevirt > strategy.yaml  # a ConfigMap, as encode writes it
kubectl installstrategy pull oci://ghcr.io/acme/kubevirt:v1.9.0 -o text > manifests.yaml     # the text, as decode prints it
kubectl installstrategy sign oci://ghcr.io/acme/kubevirt@sha256:... --key cosign.key          # sign one pushed earlier
` + "```" + `

**Product.** An artifact's product is ` + "`--product`" + ` of publish, by default the
repository's last path element (` + "`ghcr.io/acme/kubevirt`" + ` holds ` + "`kubevirt`" + `); verify
expects the same default, or its own ` + "`--product`" + `.

**Signatures** are cosign's keyed image signatures, stored where cosign stores
them (the ` + "`sha256-<hex>.sig`" + ` tag of the repository). The payload's optional section
carries the statement: ` + "`installstrategy.io/product`" + `, ` + "`installstrategy.io/version`" + `,
` + "`installstrategy.io/digest`" + ` (of the text) and, when the artifact has them,
` + "`installstrategy.io/registry`" + ` and ` + "`installstrategy.io/identifier`" + `. ` + "`verify oci://... --key`" + `
passes only when a signature verifies with a trusted key, names the artifact's
digest, and its statement is the one the artifact claims and for the product
(and ` + "`--version`" + `) asked for; otherwise it exits 1 saying why: not signed, signed by
a key that is not trusted, signed for another product or version, a text that
does not match its digest, or a signature not bound to an identity.

**Interoperation with cosign** (tested with the cosign pinned in hack/tools/cosign,
without a transparency log):

` + "```sh" + `
# cosign checks our signatures, and the statement as annotations
cosign verify --key cosign.pub --insecure-ignore-tlog HOST/REPOSITORY@sha256:... \
    -a installstrategy.io/product=kubevirt -a installstrategy.io/version=v1.9.0
# cosign signs in a way our verify accepts: with the statement as annotations
# (add -a installstrategy.io/registry=... and -a installstrategy.io/identifier=...
# when the artifact has them; inspect shows them, and verify prints the flags
# when it refuses a bare cosign signature)
cosign sign --key cosign.key --tlog-upload=false HOST/REPOSITORY@sha256:... \
    -a installstrategy.io/product=kubevirt -a installstrategy.io/version=v1.9.0 \
    -a installstrategy.io/digest=sha256:<the text's digest, inspect's Digest>
` + "```" + `

A bare ` + "`cosign sign`" + ` (no such annotations) signs the digest only; verify refuses it
as not bound to an identity (a key that signs several products could otherwise
have its signature offered for another product's or version's artifact). For a
plain-HTTP registry give cosign ` + "`--allow-http-registry`" + `; cosign verify asks Sigstore's
TUF repository for its trusted root and goes on without it when that fails (it
warns).

**Registry credentials** come from the docker config and its credential helpers
(` + "`docker login`" + `, ` + "`$DOCKER_CONFIG`" + `, ` + "`credHelpers`" + `), as for docker, crane and cosign; no
credentials means anonymous. ` + "`--insecure-registry`" + ` talks plain HTTP to any registry
(loopback registries are reached over HTTP without it).

**Mirrors and air-gapped clusters.** ` + "`copy`" + ` copies an artifact byte for byte with its
signatures, so the digest, the signatures and every pinned reference stay valid in
the mirror; verify there with the same public key:

` + "```sh" + `
kubectl installstrategy copy oci://ghcr.io/acme/kubevirt:v1.9.0 oci://registry.internal:5000/mirror/kubevirt
kubectl installstrategy verify oci://registry.internal:5000/mirror/kubevirt:v1.9.0 --key cosign.pub --product kubevirt
kubectl installstrategy publish oci://registry.internal:5000/mirror/kubevirt:v1.9.0 -n kubevirt   # into the cluster
` + "```" + `

Without a registry on either side, carry the ConfigMap: ` + "`pull ... > strategy.yaml`" + `
outside, ` + "`publish strategy.yaml`" + ` (or ` + "`push strategy.yaml oci://MIRROR/...`" + `) inside; a
signature made by ` + "`publish --key`" + ` does not travel in a pulled ConfigMap (sign it
with ` + "`sign`" + `, or verify the artifact before pulling it).
`

func writeCommand(b *bytes.Buffer, c *cobra.Command) {
	fmt.Fprintf(b, "\n## %s\n\n%s\n\n```\n%s\n```\n", c.Name(), c.Short, c.UseLine())
	if c.Long != "" {
		b.WriteString("\n" + c.Long + "\n")
	}
	if c.Example != "" {
		b.WriteString("\nExamples:\n\n```sh\n" + c.Example + "\n```\n")
	}
	if flags := c.LocalNonPersistentFlags().FlagUsages(); flags != "" {
		b.WriteString("\nFlags:\n\n```\n" + flags + "```\n")
	}
}
