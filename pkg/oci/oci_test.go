package oci_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/oci/ocitest"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

func newClient(t *testing.T) *oci.Client {
	t.Helper()
	c, err := oci.New(oci.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func text(version string) []byte {
	return []byte("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: sample\ndata:\n  version: " + version + "\n")
}

func meta(version string) oci.Meta {
	return oci.Meta{Product: "sample", Version: version, Registry: "quay.io/sample", Identifier: "id-" + version}
}

func push(ctx context.Context, t *testing.T, c *oci.Client, ref, version string) oci.Pushed {
	t.Helper()
	p, err := c.Push(ctx, ref, text(version), meta(version))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPushPullResolve(t *testing.T) {
	ctx := t.Context()
	reg := ocitest.New(t)
	c := newClient(t)
	ref := reg.Ref("acme/sample:stable")
	p := push(ctx, t, c, ref, "v1.0.0")
	again := push(ctx, t, c, reg.Ref("acme/sample:v1.0.0"), "v1.0.0")
	if p.Digest != again.Digest {
		t.Fatalf("the same text and meta gave two digests: %s, %s", p.Digest, again.Digest)
	}
	// The first request of a repository pings the registry (and, with
	// credentials, gets a token); every poll after that is one HEAD.
	if _, err := c.Resolve(ctx, ref); err != nil {
		t.Fatal(err)
	}
	reg.Take()

	d, err := c.Resolve(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if d != p.Digest {
		t.Fatalf("resolved %s, pushed %s", d, p.Digest)
	}
	if got := reg.Take(); ocitest.Count(got, "HEAD", "/manifests/stable") != 1 || len(got) != 1 {
		t.Fatalf("resolve made %v, want one manifest HEAD", got)
	}

	a, err := c.Pull(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if string(a.Text) != string(text("v1.0.0")) || a.Digest != p.Digest {
		t.Fatalf("pulled %s %q", a.Digest, a.Text)
	}
	want := oci.Meta{Product: "sample", Version: "v1.0.0", Registry: "quay.io/sample", Identifier: "id-v1.0.0",
		Digest: codec.Digest(text("v1.0.0")), DecodedBytes: len(text("v1.0.0"))}
	if a.Meta != want {
		t.Fatalf("meta %+v, want %+v", a.Meta, want)
	}
	if !strings.HasSuffix(a.Reference, "/acme/sample@"+p.Digest) {
		t.Fatalf("reference %s", a.Reference)
	}
	if got := reg.Take(); ocitest.Count(got, "GET", "/blobs/") != 1 {
		t.Fatalf("pull made %v, want one blob GET (the layer; the config is never read)", got)
	}
	// By digest.
	if _, err := c.Pull(ctx, reg.Ref("acme/sample@"+p.Digest)); err != nil {
		t.Fatal(err)
	}
}

func TestBadReferencesAndArtifacts(t *testing.T) {
	ctx := t.Context()
	reg := ocitest.New(t)
	c := newClient(t)
	host := reg.Host()
	// An image that is not a strategy, pushed as a registry user would.
	img, err := random.Image(100, 1)
	if err != nil {
		t.Fatal(err)
	}
	imgRef, err := name.ParseReference(host + "/acme/image:v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(imgRef, img); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ref  string
		want string
		is   error
	}{
		{"acme/sample:v1", "not an OCI reference", nil},
		{"oci://sample:v1", "names no registry host", nil},
		{reg.Ref("acme/sample"), "names no tag or digest", nil},
		{reg.Ref("acme/Sample:v1"), "could not parse reference", nil},
		{reg.Ref("acme/missing:v1"), "pull manifest", oci.ErrNotFound},
		{reg.Ref("acme/image:v1"), "artifact type application/vnd.docker.container.image.v1+json", oci.ErrNotStrategy},
	} {
		_, err := c.Pull(ctx, tc.ref)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), tc.ref) || tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("pull %s: %v, want an error starting with the reference, saying %q", tc.ref, err, tc.want)
		}
	}
	if _, err := c.Push(ctx, reg.Ref("acme/sample:v1"), text("v1"), oci.Meta{Product: "sample"}); err == nil || !strings.Contains(err.Error(), "needs a product and a version") {
		t.Errorf("push without a version: %v", err)
	}
	if _, err := c.Copy(ctx, reg.Ref("acme/image:v1"), reg.Ref("mirror/image")); !errors.Is(err, oci.ErrNotStrategy) {
		t.Errorf("copy of an image: %v, want ErrNotStrategy", err)
	}
}

func TestSignaturesBindIdentity(t *testing.T) {
	ctx := t.Context()
	reg := ocitest.New(t)
	c := newClient(t)
	release, _ := trust.GenerateKey()
	other, _ := trust.GenerateKey()
	ring := &trust.KeyRing{}
	if err := ring.Add("release", release.Public()); err != nil {
		t.Fatal(err)
	}

	pull := func(ref string) *oci.Artifact {
		t.Helper()
		a, err := c.Pull(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	push(ctx, t, c, reg.Ref("acme/sample:v1.0.0"), "v1.0.0")
	push(ctx, t, c, reg.Ref("acme/sample:v1.1.0"), "v1.1.0")
	old, cur := pull(reg.Ref("acme/sample:v1.0.0")), pull(reg.Ref("acme/sample:v1.1.0"))
	for _, a := range []*oci.Artifact{old, cur} {
		if _, err := c.Sign(ctx, a, release); err != nil {
			t.Fatal(err)
		}
	}
	// Signing twice writes the signature once.
	if _, err := c.Sign(ctx, cur, release); err != nil {
		t.Fatal(err)
	}
	sigs, err := c.Signatures(ctx, cur)
	if err != nil || len(sigs) != 1 {
		t.Fatalf("signatures %d, %v; want 1", len(sigs), err)
	}
	v, err := oci.Verify(sigs, cur.Digest, ring)
	if err != nil {
		t.Fatal(err)
	}
	expect := trust.Expect{Product: "sample", Digest: codec.Digest(cur.Text), Deployed: "v1.0.0"}
	if got, err := oci.Check(cur, v, expect); err != nil || got.Key != "release" || got.Statement.Version != "v1.1.0" {
		t.Fatalf("check: %+v, %v", got, err)
	}

	// Another key, or none.
	unsignedPush := push(ctx, t, c, reg.Ref("acme/sample:v1.2.0"), "v1.2.0")
	unsigned := pull(reg.Ref("acme/sample@" + unsignedPush.Digest))
	if sigs, _ := c.Signatures(ctx, unsigned); len(sigs) != 0 {
		t.Fatalf("unsigned artifact has %d signatures", len(sigs))
	}
	if _, err := oci.Verify(nil, unsigned.Digest, ring); !errors.Is(err, trust.ErrUnsigned) {
		t.Errorf("unsigned: %v", err)
	}
	if _, err := c.Sign(ctx, unsigned, other); err != nil {
		t.Fatal(err)
	}
	osigs, _ := c.Signatures(ctx, unsigned)
	if _, err := oci.Verify(osigs, unsigned.Digest, ring); !errors.Is(err, trust.ErrUnknownKey) && !errors.Is(err, trust.ErrBadSignature) {
		t.Errorf("signed by another key: %v", err)
	}

	// The old release's signature moved onto the new artifact's signature
	// tag (what a tag mover with registry write access can do) names the
	// old digest: refused.
	oldSigs, _ := c.Signatures(ctx, old)
	if _, err := oci.Verify(oldSigs, cur.Digest, ring); !errors.Is(err, trust.ErrBadSignature) {
		t.Errorf("a signature of another digest: %v", err)
	}

	// The signed older release under the tracked tag: a downgrade.
	ov, err := oci.Verify(oldSigs, old.Digest, ring)
	if err != nil {
		t.Fatal(err)
	}
	down := trust.Expect{Product: "sample", Digest: codec.Digest(old.Text), Deployed: "v1.1.0"}
	var untrusted *trust.UntrustedError
	if _, err := oci.Check(old, ov, down); !errors.As(err, &untrusted) || !errors.Is(err, trust.ErrDowngrade) {
		t.Errorf("downgrade: %v", err)
	}
	down.AllowDowngrade = true
	if _, err := oci.Check(old, ov, down); err != nil {
		t.Errorf("allowed downgrade: %v", err)
	}
	// Signed for another product, or another version than asked.
	for _, e := range []trust.Expect{
		{Product: "kubevirt", Digest: codec.Digest(old.Text)},
		{Product: "sample", Version: "v1.1.0", Digest: codec.Digest(old.Text)},
	} {
		if _, err := oci.Check(old, ov, e); !errors.Is(err, trust.ErrIdentityMismatch) {
			t.Errorf("expect %+v: %v, want an identity mismatch", e, err)
		}
	}
}

func TestCopyKeepsDigestAndSignatures(t *testing.T) {
	ctx := t.Context()
	src, dst := ocitest.New(t), ocitest.New(t)
	c := newClient(t)
	key, _ := trust.GenerateKey()
	ring := &trust.KeyRing{}
	_ = ring.Add("release", key.Public())
	p := push(ctx, t, c, src.Ref("acme/sample:v1.0.0"), "v1.0.0")
	a, err := c.Pull(ctx, src.Ref("acme/sample:v1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sign(ctx, a, key); err != nil {
		t.Fatal(err)
	}
	cp, err := c.Copy(ctx, src.Ref("acme/sample:v1.0.0"), dst.Ref("mirror/sample"))
	if err != nil {
		t.Fatal(err)
	}
	if cp.Digest != p.Digest || cp.Signatures != 1 {
		t.Fatalf("copied %+v, want digest %s and 1 signature", cp, p.Digest)
	}
	m, err := c.Pull(ctx, dst.Ref("mirror/sample:v1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	sigs, err := c.Signatures(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	v, err := oci.Verify(sigs, m.Digest, ring)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := oci.Check(m, v, trust.Expect{Product: "sample", Version: "v1.0.0", Digest: codec.Digest(m.Text)}); err != nil {
		t.Fatalf("the mirror's copy does not verify: %v", err)
	}
	// Copying again changes nothing (the signature is not doubled).
	if cp, err := c.Copy(ctx, src.Ref("acme/sample:v1.0.0"), dst.Ref("mirror/sample:v1.0.0")); err != nil || cp.Signatures != 1 {
		t.Fatalf("second copy %+v, %v", cp, err)
	}
	if sigs, _ := c.Signatures(ctx, m); len(sigs) != 1 {
		t.Fatalf("the mirror holds %d signatures after two copies", len(sigs))
	}
}
