package oci_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/oci/ocitest"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// A chart pushed with Helm's own registry client is read back as helm
// pull would: its archive, checked against the manifest, its name and
// version from the config; a strategy artifact is not a chart and a chart
// is not a strategy; the size limit refuses a larger archive; a signature
// made over the chart verifies by its manifest digest.
func TestPullChart(t *testing.T) {
	ctx := t.Context()
	reg := ocitest.New(t)
	c := newClient(t)
	tgz := ocitest.PackChart(t, filepath.Join("..", "render", "testdata", "hooks"))
	pushed := ocitest.PushChart(t, tgz, reg.Ref("charts/hooks:1.2.3"))
	ref := reg.Ref("charts/hooks:1.2.3")
	a, err := c.PullChart(ctx, ref, 0)
	if err != nil {
		t.Fatal(err)
	}
	if a.Digest != pushed || !bytes.Equal(a.Text, tgz) || a.Meta.Product != "hooks" || a.Meta.Version != "1.2.3" || a.Repository != reg.Host()+"/charts/hooks" {
		t.Errorf("pulled %s %s %+v (%d bytes), want %s, hooks 1.2.3, the pushed archive", a.Reference, a.Digest, a.Meta, len(a.Text), pushed)
	}
	if _, err := c.PullChart(ctx, ref, 100); err == nil || !strings.Contains(err.Error(), "over the limit of 100") {
		t.Errorf("a chart over the limit: %v", err)
	}
	if _, err := c.Pull(ctx, ref); !errors.Is(err, oci.ErrNotStrategy) {
		t.Errorf("a chart pulled as a strategy: %v, want ErrNotStrategy", err)
	}
	push(ctx, t, c, reg.Ref("acme/sample:v1"), "v1")
	if _, err := c.PullChart(ctx, reg.Ref("acme/sample:v1"), 0); !errors.Is(err, oci.ErrNotChart) {
		t.Errorf("a strategy pulled as a chart: %v, want ErrNotChart", err)
	}

	s, err := trust.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sign(ctx, a, s); err != nil {
		t.Fatal(err)
	}
	sigs, err := c.Signatures(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	ring := &trust.KeyRing{}
	if err := ring.Add("release", s.Public()); err != nil {
		t.Fatal(err)
	}
	verified, err := oci.Verify(sigs, a.Digest, ring)
	if err != nil {
		t.Fatal(err)
	}
	claims := oci.StatementOf(a)
	for _, tc := range []struct {
		name   string
		expect trust.Expect
		ok     bool
	}{
		{"the product and its version", trust.Expect{Product: "hooks", Version: "1.2.3", Digest: claims.Digest}, true},
		{"another product", trust.Expect{Product: "other"}, false},
		{"another version", trust.Expect{Product: "hooks", Version: "1.2.4"}, false},
		{"a downgrade", trust.Expect{Product: "hooks", Deployed: "2.0.0"}, false},
	} {
		_, err := oci.CheckClaims(claims, verified, tc.expect)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
