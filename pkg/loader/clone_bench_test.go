package loader

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/internal/benchcmp"
	"github.com/installstrategy/installstrategy/internal/kubevirtdata"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// BenchmarkClone copies the real KubeVirt v1.9.0 strategy as the loader
// does for each reconcile: a deep copy of every object (the baseline, the
// loader's copy before session 21) against clone, which keeps the CRD
// schemas the parser shared.
func BenchmarkClone(b *testing.B) {
	s, _, err := strategy.Parse(kubevirtdata.Read(b, "v1.9.0", "manifests.yaml"), strategy.ParseOptions{})
	if err != nil {
		b.Fatal(err)
	}
	benchcmp.Compare(b, 0, func(b *testing.B, n int) {
		for range n {
			out := &strategy.Strategy{Identity: s.Identity, Objects: make([]*unstructured.Unstructured, len(s.Objects))}
			for i, o := range s.Objects {
				out.Objects[i] = o.DeepCopy()
			}
		}
	}, func(b *testing.B, n int) {
		for range n {
			if out := clone(s); len(out.Objects) != len(s.Objects) {
				b.Fatalf("clone: %d objects, want %d", len(out.Objects), len(s.Objects))
			}
		}
	})
}
