package oci_test

import (
	"slices"

	"github.com/installstrategy/installstrategy/pkg/oci/ocitest"
	"testing"
)

func TestTags(t *testing.T) {
	ctx := t.Context()
	reg := ocitest.New(t)
	c := newClient(t)
	for _, v := range []string{"v1.0.0", "v2.0.0", "v3.0.0"} {
		push(ctx, t, c, reg.Ref("acme/sample:"+v), v)
	}
	push(ctx, t, c, reg.Ref("acme/other:v9.0.0"), "v9.0.0")
	for _, ref := range []string{reg.Ref("acme/sample"), reg.Ref("acme/sample:v3.0.0")} {
		tags, truncated, err := c.Tags(ctx, ref, 0)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(tags)
		if !slices.Equal(tags, []string{"v1.0.0", "v2.0.0", "v3.0.0"}) || truncated {
			t.Fatalf("%s: tags %v (truncated %t), want the three of the repository", ref, tags, truncated)
		}
	}
	tags, truncated, err := c.Tags(ctx, reg.Ref("acme/sample"), 2)
	if err != nil || len(tags) != 2 || !truncated {
		t.Fatalf("bounded to 2: %v, truncated %t, %v", tags, truncated, err)
	}
	if got, err := c.WithTag(reg.Ref("acme/sample:v3.0.0"), "v2.0.0"); err != nil || got != reg.Ref("acme/sample:v2.0.0") {
		t.Fatalf("WithTag: %s, %v", got, err)
	}
	if _, err := c.WithTag(reg.Ref("acme/sample"), "bad tag"); err == nil {
		t.Fatal("WithTag took an invalid tag")
	}
}
