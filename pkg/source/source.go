// Package source loads a strategy from where it lives — a ConfigMap, an
// OCI artifact, a Helm chart, a kustomization, a dump Job, the built-in
// product, a file or a plugin revision — and decides its trust before
// anything of it is parsed.
//
// Every implementation of Source follows the order of trust.Gate: size
// bounds, the policy over what the metadata claims, the bounded decode,
// the policy over the digest of the decoded text, and only then the
// parse. A ConfigMap and a revision go through trust.Gate itself; an OCI
// artifact and a Helm chart through its equivalent in pkg/oci (the
// client bounds the pull and checks the text against the manifest,
// oci.Verify and oci.Check judge the signatures); a file and a
// kustomization are the user's own input, bounded in size and vouched for
// by whoever gave them. Refusals are *trust.UntrustedError (not trusted)
// or *trust.RefusedError (too large, does not decode, does not parse —
// its Step says which), so a caller can tell a refusal before the parse
// from a text that was trusted and did not parse.
//
// The operator (pkg/operator) and the plugin (internal/cli) both load
// through this package; the I/O each needs (a store, a registry client
// with its cache, a renderer) is passed in, so the decisions here have
// table tests without a cluster or a registry.
package source

import (
	"context"
	"fmt"
	"time"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/render/helmspec"
	"github.com/installstrategy/installstrategy/pkg/strategy"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// Source is where a strategy comes from.
type Source interface {
	// Load reads the strategy, decides its trust and only then parses
	// it. A refusal is a *trust.UntrustedError or a *trust.RefusedError.
	Load(ctx context.Context) (*Loaded, error)
}

// Loaded is a strategy whose trust was decided before it was parsed.
type Loaded struct {
	// Strategy is nil while Pending is set.
	Strategy *strategy.Strategy
	// Text is the manifests text the strategy was parsed from (nil when
	// the source keeps none: a generated product, a cached dump).
	Text []byte
	// Digest is the "sha256:" digest of Text, computed from the text.
	Digest string
	// VerifiedBy says who vouched for it: "signed by <key>", "pinned
	// digest", or the source's own word ("built-in product", "given by
	// the user", "the operator's store").
	VerifiedBy string
	// Statement is the signed statement that vouched for it, when one did.
	Statement *trust.Statement
	// From says where it came from ("configmap NS/NAME",
	// "HOST/REPO@DIGEST", "file PATH", "cache", "store", ...).
	From string
	// ConfigMap is "namespace/name" of the ConfigMap it was read from or
	// stored in, when there is one.
	ConfigMap string
	Warnings  []strategy.Warning
	// Info describes the ConfigMap it was decoded from (nil otherwise).
	Info *codec.Info
	// Artifact is the OCI artifact or chart it came from (nil otherwise).
	Artifact *oci.Artifact
	// Rendered is the chart's render (a Helm source only).
	Rendered *helmspec.Result
	// Pending is set while a dump Job is still writing the strategy.
	Pending *Pending
}

// Pending says that a dump Job is still at work.
type Pending struct {
	// Job is "namespace/name" of the dump Job.
	Job string
	// RequeueAfter is when to load again.
	RequeueAfter time.Duration
}

// verified is the Loaded of what trust.Gate opened.
func verified(v *trust.Verified, from string) *Loaded {
	info := v.Info
	info.DigestVerified = true
	info.Digest = v.Digest
	return &Loaded{Strategy: v.Strategy, Text: v.Text, Digest: v.Digest, VerifiedBy: v.VerifiedBy,
		Statement: v.Statement, From: from, Warnings: v.Warnings, Info: &info}
}

// bound refuses a text above max (0: codec.DefaultMaxDecodedBytes) at the
// "size" step.
func bound(where string, text []byte, max int) error {
	if max <= 0 {
		max = codec.DefaultMaxDecodedBytes
	}
	if len(text) > max {
		return &trust.RefusedError{Step: "size", Err: fmt.Errorf("%w: %s is %d bytes, the bound is %d", trust.ErrTooLarge, where, len(text), max)}
	}
	return nil
}

// parse parses a text whose trust was decided; its error is a
// *trust.RefusedError at the "parse" step.
func parse(where string, text []byte, opts strategy.ParseOptions) (*strategy.Strategy, []strategy.Warning, error) {
	st, warnings, err := strategy.Parse(text, opts)
	if err != nil {
		return nil, nil, &trust.RefusedError{Step: "parse", Err: fmt.Errorf("%s: %w", where, err)}
	}
	return st, warnings, nil
}
