package operator

import (
	"errors"
	"testing"

	"k8s.io/utils/ptr"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/oci"
)

func TestCheckKeyNamespace(t *testing.T) {
	for _, tc := range []struct {
		key      string
		watched  []string
		excluded bool
		bad      bool
	}{
		{"keys", []string{"keys"}, false, true},
		{"", []string{DefaultKeyNamespace}, false, true},
		{"keys", nil, false, true},
		{"keys", nil, true, false},
		{"keys", []string{"tenant"}, false, false},
	} {
		err := CheckKeyNamespace(tc.key, tc.watched, tc.excluded)
		if tc.bad != errors.Is(err, ErrKeyNamespaceWatched) {
			t.Errorf("%+v: %v", tc, err)
		}
	}
}

// The artifact cache holds only what keep is given (trusted artifacts)
// and never more than MaxCachedArtifactBytes, the oldest going first.
func TestArtifactCacheIsBoundedInBytes(t *testing.T) {
	var c ociArtifacts
	if n, b := c.cached(); n != 0 || b != 0 {
		t.Fatalf("new cache holds %d, %d bytes", n, b)
	}
	big := func() *pulled { return &pulled{a: &oci.Artifact{Text: make([]byte, 40<<20)}} }
	for i := range 10 {
		c.keep(string(rune('a'+i)), big())
		if _, b := c.cached(); b > MaxCachedArtifactBytes {
			t.Fatalf("after %d: %d bytes", i+1, b)
		}
	}
	if n, _ := c.cached(); n != 3 || c.get("a") != nil || c.get("j") == nil {
		t.Errorf("cached %d; want the 3 newest", n)
	}
	c.keep("huge", &pulled{a: &oci.Artifact{Text: make([]byte, MaxCachedArtifactBytes+1)}})
	if c.get("huge") != nil {
		t.Error("an artifact over the bound was cached")
	}
}

// A configMap source binds the product the author names, else the one
// the statement of the deployed configMap strategy named ("" included);
// nothing before a signed configMap strategy was deployed.
func TestSourceProduct(t *testing.T) {
	in := installation(v1alpha1.InstallationSpec{Strategy: &v1alpha1.StrategySource{ConfigMap: &v1alpha1.ConfigMapStrategySource{Name: "s"}}})
	if _, bound := sourceProduct(in); bound {
		t.Error("first install without a product is bound")
	}
	in.Status.Strategy = &v1alpha1.StrategyStatus{Source: v1alpha1.StrategySourceConfigMap, VerifiedBy: "signed by release.pub", Product: ptr.To("kubevirt")}
	if p, bound := sourceProduct(in); !bound || p != "kubevirt" {
		t.Errorf("deployed product: %q %v", p, bound)
	}
	in.Status.Strategy.Product = ptr.To("")
	if p, bound := sourceProduct(in); !bound || p != "" {
		t.Errorf("deployed without a product: %q %v", p, bound)
	}
	in.Spec.Strategy.ConfigMap.Product = "cdi"
	if p, bound := sourceProduct(in); !bound || p != "cdi" {
		t.Errorf("spec product: %q %v", p, bound)
	}
	in.Spec.Strategy.ConfigMap.Product = ""
	in.Status.Strategy = &v1alpha1.StrategyStatus{Source: v1alpha1.StrategySourceConfigMap, VerifiedBy: "pinned digest"}
	if _, bound := sourceProduct(in); bound {
		t.Error("a pinned strategy binds a product")
	}
	in.Status.Strategy = &v1alpha1.StrategyStatus{Source: v1alpha1.StrategySourceOCI, VerifiedBy: "signed by release.pub", Product: ptr.To("kubevirt")}
	if _, bound := sourceProduct(in); bound {
		t.Error("another source's product binds the configMap source")
	}
}
