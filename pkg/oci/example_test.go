package oci_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"strings"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// A release pushes a strategy and signs it; an installation pulls it,
// verifies the signatures with its trusted keys and checks that the
// signed statement is the one it asks for (product and version), so a
// signed artifact of another product or version is refused.
func Example() {
	ctx := context.Background()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ref := "oci://" + strings.TrimPrefix(srv.URL, "http://") + "/acme/sample:v1.0.0"

	c, _ := oci.New(oci.Options{})
	text := []byte("---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: sample\n  namespace: sample\n")
	if _, err := c.Push(ctx, ref, text, oci.Meta{Product: "sample", Version: "v1.0.0"}); err != nil {
		fmt.Println(err)
		return
	}
	release, _ := trust.GenerateKey()
	pulled, _ := c.Pull(ctx, ref)
	sig, _ := c.Sign(ctx, pulled, release)
	_ = c.AddSignatures(ctx, pulled.Repository, pulled.Digest, []oci.Signature{sig})

	ring := &trust.KeyRing{}
	_ = ring.AddPEM("release.pub", release.PublicPEM())
	a, _ := c.Pull(ctx, ref)
	sigs, _ := c.Signatures(ctx, a)
	verified, _ := oci.Verify(sigs, a.Digest, ring)
	v, err := oci.Check(a, verified, trust.Expect{Product: "sample", Version: "v1.0.0", Digest: a.Meta.Digest})
	fmt.Println(v.Key, err, string(a.Text) == string(text))

	_, err = oci.Check(a, verified, trust.Expect{Product: "other", Digest: a.Meta.Digest})
	fmt.Println(err != nil)
	// Output:
	// release.pub <nil> true
	// true
}
