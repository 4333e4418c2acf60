package operator

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/crdsafety"
)

// TestCRDAllowances: spec.crdSafety.allow becomes the reconciler's
// overrides, rule by rule; none when the spec names none, and every rule
// the CRD's enum admits is one the preflight knows.
func TestCRDAllowances(t *testing.T) {
	in := &v1alpha1.Installation{}
	if got := crdAllowances(in); got != nil {
		t.Errorf("no crdSafety: %v", got)
	}
	in.Spec.CRDSafety = &v1alpha1.CRDSafety{Allow: []v1alpha1.CRDChangeAllowance{{CRD: "things.example.com", Rule: "scope"}, {CRD: "b.example.com", Rule: "enumTightened"}}}
	want := []crdsafety.Allow{{CRD: "things.example.com", Rule: crdsafety.RuleScope}, {CRD: "b.example.com", Rule: crdsafety.RuleEnumTightened}}
	if got := crdAllowances(in); !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	// The Installation CRD admits exactly the rules the preflight knows.
	data, err := os.ReadFile("../../config/crd/bases/installstrategy.io_installations.yaml")
	if err != nil {
		t.Fatal(err)
	}
	block := string(data)[strings.Index(string(data), "crdSafety:"):]
	block = block[:strings.Index(block, "type: object")]
	for _, r := range crdsafety.Rules {
		if !strings.Contains(block, "- "+string(r)+"\n") {
			t.Errorf("rule %s missing from the Installation CRD's enum", r)
		}
	}
}
