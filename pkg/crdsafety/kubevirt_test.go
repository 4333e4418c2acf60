package crdsafety_test

import (
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/installstrategy/installstrategy/internal/kubevirtdata"
	"github.com/installstrategy/installstrategy/pkg/crdsafety"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// TestKubeVirtUpgradeNotRefused: KubeVirt's real upgrade v1.8.4 -> v1.9.0,
// with the v1.8.4 CRDs live (every version of theirs stored) and no custom
// resource stored, passes the preflight: no false refusal.
func TestKubeVirtUpgradeNotRefused(t *testing.T) {
	crds := func(version string) map[string]*strategyCRD {
		s, _, err := strategy.Parse(kubevirtdata.Read(t, version, "manifests.yaml"), strategy.ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*strategyCRD{}
		for _, o := range s.Objects {
			if o.GetKind() != "CustomResourceDefinition" {
				continue
			}
			c, err := crdsafety.FromUnstructured(o)
			if err != nil {
				t.Fatal(err)
			}
			out[c.Name] = &strategyCRD{c}
		}
		return out
	}
	old, next := crds("v1.8.4"), crds("v1.9.0")
	if len(old) < 10 {
		t.Fatalf("%d CRDs in v1.8.4", len(old))
	}
	compared := 0
	for name, n := range next {
		o := old[name]
		if o == nil {
			continue
		}
		compared++
		live := o.DeepCopy()
		for _, v := range live.Spec.Versions {
			if v.Storage {
				live.Status.StoredVersions = append(live.Status.StoredVersions, v.Name)
			}
		}
		found := crdsafety.Compare(live, n.CustomResourceDefinition)
		for _, f := range found {
			t.Logf("judged by stored objects: %s", f)
		}
		if refused := crdsafety.Judge(found, nil, nil); len(refused) > 0 {
			t.Errorf("%s refused with no object stored: %v", name, refused)
		}
	}
	if compared < 10 {
		t.Errorf("only %d CRDs in both versions", compared)
	}
}

type strategyCRD struct {
	*apiextv1.CustomResourceDefinition
}
