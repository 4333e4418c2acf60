package strategy_test

import (
	"os"
	"testing"

	"github.com/installstrategy/installstrategy/internal/productdata"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// Every upstream product's manifests still parse with names validated
// (ClusterRoles named system:..., webhooks, CRDs): the validation refuses
// nothing a real cluster accepts.
func TestRealProductsPassNameValidation(t *testing.T) {
	for _, p := range productdata.All(t) {
		for _, v := range p.Versions {
			t.Run(p.Name+"/"+v, func(t *testing.T) {
				text, err := os.ReadFile(p.Path(v))
				if err != nil {
					t.Fatal(err)
				}
				s, _, err := strategy.Parse(text, strategy.ParseOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if len(s.Objects) == 0 {
					t.Fatal("no objects")
				}
			})
		}
	}
}
