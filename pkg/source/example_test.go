package source_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/source"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// Load a strategy artifact as the operator loads an OCI source: the pull
// (here a fake; the operator passes its registry client and cache) hands
// over the artifact and its signatures, and the source decides their
// trust before it parses the text.
func Example() {
	text := []byte("---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: a\n")
	a := &oci.Artifact{Reference: "ghcr.io/acme/shop@sha256:ab", Digest: "sha256:ab", Text: text,
		Meta: oci.Meta{Product: "shop", Version: "v1", Digest: codec.Digest(text)}}
	pull := func(context.Context) (*oci.Artifact, []oci.Signature, error) { return a, nil, nil }

	// Pinned by digest: the author's pin is the trust.
	var src source.Source = source.OCI{Remote: source.Remote{Pull: pull, Pinned: true}}
	l, err := src.Load(context.Background())
	fmt.Println(l.From, l.VerifiedBy, len(l.Strategy.Objects), err)

	// By tag, unsigned: refused before the text is parsed.
	src = source.OCI{Remote: source.Remote{Pull: pull, Keys: &trust.KeyRing{}, Expect: trust.Expect{Product: "shop"}}}
	_, err = src.Load(context.Background())
	fmt.Println(errors.As(err, new(*trust.UntrustedError)))
	// Output:
	// ghcr.io/acme/shop@sha256:ab pinned digest 1 <nil>
	// true
}
