package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/spf13/cobra"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/source"
	"github.com/installstrategy/installstrategy/pkg/strategy"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// Check is one verification step and its outcome.
type Check struct {
	Name string `json:"name"`
	// Status is "ok", "warn", "fail", or "skip" for an object of the
	// input that is not a strategy (and so not verified).
	Status string `json:"status"`
	Detail string `json:"detail"`
}

const verifyLong = `Verify every strategy ConfigMap in the input (or a manifests text): the encoding
decodes (base64, gzip, size limit), the recorded digest matches (native form),
every document parses, and every object has apiVersion, kind and metadata.name.
Repairs that KubeVirt compatibility needs are reported as warnings.

With --key (a PEM public key file, e.g. cosign.pub; repeat it, or put several
keys in one file, to trust several), the strategy must also carry a signature
(see sign) by one of those keys over the digest of its decoded text. cm/NAME
verifies a strategy ConfigMap in the cluster (namespace -n), chunks included.

oci://HOST/REPOSITORY:TAG (or @sha256:DIGEST) verifies a strategy artifact (see
publish): its manifest is a strategy's, its layer matches the manifest, its text
the digest the manifest records. With --key, one of the cosign signatures stored
for its digest (the sha256-<hex>.sig tag) must verify with a trusted key and bind
the digest to the product (--product, default the repository's last path
element), the version (--version, when given) and the identity the artifact
claims: a signature by kubectl installstrategy sign or publish --key, or by cosign
sign -a installstrategy.io/product=... -a installstrategy.io/version=... -a
installstrategy.io/digest=... A bare cosign signature (no such annotations) is
refused: it is not bound to an identity.

Exit status: 0 when every check passes, 1 when one fails (with --strict, also
when there are warnings).`

const verifyExample = `  kubectl installstrategy verify kubevirt-v1.9.0.configmap.yaml
  kubectl get cm -n kubevirt -l kubevirt.io/install-strategy -o yaml | kubectl installstrategy verify - --strict
  kubectl installstrategy verify cm/installstrategy-x7k2p -n sample --key cosign.pub
  kubectl installstrategy verify oci://ghcr.io/acme/kubevirt:v1.9.0 --key cosign.pub --version v1.9.0`

func newVerifyCommand(o *options) *cobra.Command {
	var strict bool
	var output string
	var keys []string
	var want trust.Expect
	var file *fileFlag
	cmd := &cobra.Command{
		Use:     "verify FILE|-|cm/NAME|oci://REF | -f FILE",
		Short:   "Check that a strategy decodes, matches its digest and parses",
		Long:    verifyLong,
		Example: verifyExample,
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := file.source(cmd, args)
			if err != nil {
				return err
			}
			if output != "text" && output != "json" {
				return usageError(fmt.Errorf("--output %q: want text or json", output))
			}
			dopts, err := o.decodeOptions()
			if err != nil {
				return err
			}
			var ring *trust.KeyRing
			if len(keys) > 0 {
				if ring, err = readKeyRing(keys); err != nil {
					return err
				}
			}
			if !oci.IsReference(src) && (want.Product != "" || want.Version != "") {
				return usageError(errors.New("--product and --version check an artifact's signed statement: they apply to oci:// references"))
			}
			if (want.Product != "" || want.Version != "") && ring == nil {
				return usageError(errors.New("--product and --version check the signed statement: give --key too"))
			}
			var checks []Check
			if oci.IsReference(src) {
				if checks, err = o.verifyArtifact(cmd.Context(), src, ring, want); err != nil {
					return err
				}
			} else if _, ok := clusterRef(src); ok {
				if checks, err = o.verifyStored(cmd.Context(), src, ring); err != nil {
					return err
				}
			} else {
				// Read through source.File: bounded before it is read
				// whole, let alone decoded.
				in, err := source.File{Path: src, Stdin: o.streams.In, MaxBytes: int(dopts.MaxDecodedBytes)}.Input()
				if errors.As(err, new(*fs.PathError)) || errors.As(err, new(*trust.RefusedError)) {
					return err
				}
				checks = verifyInput(in, err, dopts, ring)
			}
			if err := printChecksAs(o.streams.Out, output, checks); err != nil {
				return err
			}
			return checksExit(checks, strict)
		},
	}
	cmd.Flags().BoolVar(&strict, "strict", false, "treat warnings (repairs, unknown kinds, no digest) as failures")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	cmd.Flags().StringArrayVar(&keys, "key", nil, "PEM public key file whose signature the strategy must carry (repeatable: any of them)")
	cmd.Flags().StringVar(&want.Product, "product", "", "with an oci:// reference and --key: the product the signature must be for (default: the repository's last path element)")
	cmd.Flags().StringVar(&want.Version, "version", "", "with an oci:// reference and --key: the version the signature must be for")
	file = addFileFlag(cmd)
	o.addRegistryFlag(cmd)
	return cmd
}

// printChecksAs prints checks as text or json (--output).
func printChecksAs(w io.Writer, output string, checks []Check) error {
	if output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(checks)
	}
	return printChecks(w, checks)
}

// checksExit is verify's exit status: 1 when a check failed, or (strict)
// warned.
func checksExit(checks []Check, strict bool) error {
	failed, warned := 0, 0
	for _, c := range checks {
		switch c.Status {
		case "fail":
			failed++
		case "warn":
			warned++
		}
	}
	if failed > 0 || (strict && warned > 0) {
		return &ExitError{Code: 1, Err: fmt.Errorf("verification failed: %d checks failed, %d warnings", failed, warned)}
	}
	return nil
}

// verifyInput checks each step of reading the user's own file, which
// source.File read and bounded (in, or err of reading it).
func verifyInput(in *codec.Input, err error, dopts codec.DecodeOptions, ring *trust.KeyRing) []Check {
	if err != nil {
		return []Check{{Name: "read", Status: "fail", Detail: explainNotStrategy(err).Error()}}
	}
	if in.Strategy != nil {
		checks := []Check{{Name: "read", Status: "ok", Detail: "manifests text (not a ConfigMap: no encoding or digest to check)"}}
		if ring != nil {
			checks = append(checks, Check{Name: "signature", Status: "fail", Detail: "a manifests text carries no signature (verify its ConfigMap, or the text with cosign verify-blob --signature)"})
		}
		return append(checks, parseChecks(in.Strategy, in.Warnings)...)
	}
	var checks []Check
	// A chunked head given with its chunks is reassembled first, and the
	// chunks are not listed as skipped then.
	for _, cm := range in.ConfigMaps {
		prefix := ""
		if len(in.ConfigMaps) > 1 {
			prefix = cm.Name + ": "
		}
		cm, err := assembleHead(in, cm)
		if err != nil {
			checks = append(checks, Check{Name: prefix + "chunks", Status: "fail", Detail: err.Error()})
			continue
		}
		text, info, err := codec.Decode(cm, dopts)
		if err != nil {
			var de *codec.DecodeError
			name := "decode"
			if errors.As(err, &de) {
				name = de.Step
			}
			checks = append(checks, Check{Name: prefix + name, Status: "fail", Detail: explainChunkedHead(err, cm).Error()})
			continue
		}
		checks = append(checks, Check{Name: prefix + "encoding", Status: "ok", Detail: fmt.Sprintf("%s, %s decoded from %s", info.Encoding, bytesString(info.DecodedBytes), bytesString(info.EncodedBytes))})
		if info.DigestVerified {
			checks = append(checks, Check{Name: prefix + "digest", Status: "ok", Detail: info.Digest + " matches"})
		} else {
			checks = append(checks, Check{Name: prefix + "digest", Status: "warn", Detail: "no digest recorded (KubeVirt form): integrity cannot be checked"})
		}
		if ring != nil {
			checks = append(checks, signatureCheck(prefix, ring, text, info)...)
		}
		if info.Identity.Version == "" {
			checks = append(checks, Check{Name: prefix + "identity", Status: "warn", Detail: "no version annotation"})
		} else if info.Identity.Identifier == "" {
			checks = append(checks, Check{Name: prefix + "identity", Status: "warn", Detail: "no identifier: matched on version and registry only (legacy)"})
		} else {
			checks = append(checks, Check{Name: prefix + "identity", Status: "ok", Detail: identityString(info.Identity)})
		}
		s, warnings, err := strategy.Parse(text, strategy.ParseOptions{})
		if err != nil {
			checks = append(checks, Check{Name: prefix + "parse", Status: "fail", Detail: err.Error()})
			continue
		}
		for _, c := range parseChecks(s, warnings) {
			c.Name = prefix + c.Name
			checks = append(checks, c)
		}
	}
	for _, s := range in.Skipped {
		checks = append(checks, Check{Name: s.Object(), Status: "skip", Detail: s.Reason})
	}
	return checks
}

func parseChecks(s *strategy.Strategy, warnings []strategy.Warning) []Check {
	checks := []Check{{Name: "parse", Status: "ok", Detail: fmt.Sprintf("%d objects, each with apiVersion, kind and name", len(s.Objects))}}
	for _, w := range warnings {
		checks = append(checks, Check{Name: "repair", Status: "warn", Detail: w.String()})
	}
	return checks
}

func printChecks(w io.Writer, checks []Check) error {
	for _, c := range checks {
		detail := strings.ReplaceAll(c.Detail, "\n", "\n        ")
		if _, err := fmt.Fprintf(w, "%-5s %s: %s\n", strings.ToUpper(c.Status), c.Name, detail); err != nil {
			return err
		}
	}
	return nil
}
