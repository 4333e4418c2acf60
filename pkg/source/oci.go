package source

import (
	"context"
	"fmt"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/render/helmspec"
	"github.com/installstrategy/installstrategy/pkg/strategy"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// Pull fetches an artifact (a strategy artifact or a chart) with the
// signatures the registry holds for it: pkg/oci's client bounds what it
// reads and checks the layer and the text against the manifest, so the
// artifact is what its manifest says, not yet trusted. A pull by a pinned
// digest may return no signatures. The operator passes one with its
// cache, mirrors and shared pulls; the plugin one of its client.
type Pull func(ctx context.Context) (*oci.Artifact, []oci.Signature, error)

// Remote is what an OCI and a Helm source judge an artifact by.
type Remote struct {
	Pull Pull
	// Pinned is set when the artifact was pulled by a digest its author
	// pinned (the Installation's digest, oci://REF@sha256:...): that is
	// the trust, no signature is asked.
	Pinned bool
	// Unverified (an OCI source's; a Helm source judges all the same)
	// takes the artifact with no trust decision but "not
	// verified" (VerifiedBy is NotVerified: Why), for a verb that only
	// shows it or acts on it at the user's word (--allow-unsigned); its
	// text is bounded all the same, and Trusted is not told of it.
	Unverified bool
	Why        string
	// Keys are the trusted keys; one of them must have signed an
	// unpinned artifact.
	Keys *trust.KeyRing
	// Expect is what the signed statement must say (product, version,
	// no downgrade); its Digest is filled from the text.
	Expect trust.Expect
	// MaxTextBytes bounds the artifact's text (a strategy's manifests, a
	// chart's archive); 0 means codec.DefaultMaxDecodedBytes.
	MaxTextBytes int
	// Trusted, when set, is told of the artifact as soon as its trust is
	// decided, before it is parsed or rendered: the operator caches
	// trusted artifacts there, and only there.
	Trusted func(*oci.Artifact)
}

// trusted tells Trusted.
func (r Remote) trusted(a *oci.Artifact) {
	if r.Trusted != nil {
		r.Trusted(a)
	}
}

// pull fetches the artifact and bounds its text.
func (r Remote) pull(ctx context.Context) (*oci.Artifact, []oci.Signature, error) {
	a, sigs, err := r.Pull(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := bound("artifact "+a.Reference, a.Text, r.MaxTextBytes); err != nil {
		return nil, nil, err
	}
	return a, sigs, nil
}

// judge decides an unpinned artifact's trust: a signature by a key of
// Keys that names its digest, whose statement is claims and says what
// Expect asks. The error is a *trust.UntrustedError.
func (r Remote) judge(a *oci.Artifact, sigs []oci.Signature, claims trust.Statement) (oci.Verified, error) {
	verified, err := oci.Verify(sigs, a.Digest, r.Keys)
	if err != nil {
		return oci.Verified{}, &trust.UntrustedError{Err: err}
	}
	e := r.Expect
	e.Digest = codec.Digest(a.Text)
	return oci.CheckClaims(claims, verified, e)
}

// OCI is a strategy artifact of a registry (oci://HOST/REPO:TAG or
// @DIGEST): pinned, or signed by a trusted key for the expected product
// and the identity the artifact claims, before its text is parsed. The
// strategy's identity is the artifact's.
type OCI struct {
	Remote
	Parse strategy.ParseOptions
}

// Load implements Source.
func (o OCI) Load(ctx context.Context) (*Loaded, error) {
	a, sigs, err := o.pull(ctx)
	if err != nil {
		return nil, err
	}
	l := &Loaded{VerifiedBy: "pinned digest", From: a.Reference, Artifact: a, Text: a.Text, Digest: codec.Digest(a.Text)}
	switch {
	case o.Unverified:
		l.VerifiedBy = notVerifiedBy(o.Why)
	case !o.Pinned:
		v, err := o.judge(a, sigs, oci.StatementOf(a))
		if err != nil {
			return nil, err
		}
		l.VerifiedBy, l.Statement = "signed by "+v.Key, &v.Statement
	}
	if !o.Unverified {
		o.trusted(a)
	}
	if l.Strategy, l.Warnings, err = parse("artifact "+a.Reference+": manifests", a.Text, o.Parse); err != nil {
		return nil, err
	}
	l.Strategy.Identity = strategy.Identity{Version: a.Meta.Version, Registry: a.Meta.Registry, Identifier: a.Meta.Identifier}
	return l, nil
}

// VersionError is the error of a pinned chart of another version than
// the one asked for (a signed chart's version is judged by its signature).
type VersionError struct {
	Chart, Version, Want string
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("chart %s is version %s, spec.version asks for %s", e.Chart, e.Version, e.Want)
}

// Render renders a trusted chart archive (Loaded.Artifact.Text) client-only;
// the caller chooses the values, the release and the renderer (and may
// cache renders).
type Render func(ctx context.Context, chart *oci.Artifact) (*helmspec.Result, error)

// Helm is a Helm chart of a registry (or an archive): pinned, or signed by
// a trusted key for Product, the chart's version and its archive's
// digest, before it is rendered; the render's manifests are then parsed.
// A pinned chart of another version than Expect.Version is refused.
type Helm struct {
	Remote
	// Product is the product the signature must name.
	Product string
	Render  Render
	// Identifier is the deployment identifier of a render of the chart
	// (a hash of the chart's digest and the render inputs); the version
	// is the chart's.
	Identifier func(chart *oci.Artifact) string
	Parse      strategy.ParseOptions
}

// Load implements Source.
func (h Helm) Load(ctx context.Context) (*Loaded, error) {
	a, sigs, err := h.pull(ctx)
	if err != nil {
		return nil, err
	}
	l := &Loaded{VerifiedBy: "pinned digest", From: a.Reference, Artifact: a}
	if !h.Pinned {
		claims := trust.Statement{Product: h.Product, Version: a.Meta.Version, Digest: codec.Digest(a.Text)}
		v, err := h.judge(a, sigs, claims)
		if err != nil {
			return nil, err
		}
		l.VerifiedBy, l.Statement = "signed by "+v.Key, &v.Statement
	} else if want := h.Expect.Version; want != "" && want != a.Meta.Version {
		return nil, &VersionError{Chart: a.Meta.Product, Version: a.Meta.Version, Want: want}
	}
	h.trusted(a)
	if l.Rendered, err = h.Render(ctx, a); err != nil {
		return nil, err
	}
	l.Text, l.Digest = l.Rendered.Manifests, codec.Digest(l.Rendered.Manifests)
	if l.Strategy, l.Warnings, err = parse("rendered manifests", l.Text, h.Parse); err != nil {
		return nil, err
	}
	l.Strategy.Identity = strategy.Identity{Version: l.Rendered.Chart.Version, Identifier: h.Identifier(a)}
	if notes := l.Rendered.Notes; notes != "" {
		// The chart's NOTES.txt rendered, as encode --from-helm carries
		// it (a Notes document, never applied): from the trusted chart,
		// like the manifests.
		l.Strategy.Objects = append(l.Strategy.Objects, strategy.NotesObject(notes))
	}
	return l, nil
}
