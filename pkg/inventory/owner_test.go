package inventory

import (
	"strings"
	"testing"

	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestClaimOf(t *testing.T) {
	op := Owner{Namespace: "ns", Name: "sample", Kind: KindInstallation}
	plugin := Owner{Namespace: "ns", Name: "sample"}
	other := Owner{Namespace: "other", Name: "sample"}
	cases := []struct {
		name   string
		owner  Owner
		labels map[string]string
		want   Claim
	}{
		{"own labels", op, op.Labels(), ClaimOurs},
		{"another installation's", op, other.Labels(), ClaimOther},
		{"same name, other namespace", plugin, other.Labels(), ClaimOther},
		{"nobody's", op, nil, ClaimNone},
		{"Helm's", op, map[string]string{metakeys.ManagedByLabel: "Helm"}, ClaimNone},
		{"the operator's older value, its own", op, map[string]string{metakeys.ManagedByLabel: "installstrategy.ns.sample"}, ClaimLegacy},
		{"the operator's older value, another's", op, map[string]string{metakeys.ManagedByLabel: "installstrategy.ns.other"}, ClaimOther},
		{"the plugin's older shared value, seen by the plugin", plugin, map[string]string{metakeys.ManagedByLabel: "installstrategy"}, ClaimLegacyShared},
		{"the plugin's older shared value, seen by an Installation", op, map[string]string{metakeys.ManagedByLabel: "installstrategy"}, ClaimNone},
		{"an operator's older value seen by the plugin", plugin, map[string]string{metakeys.ManagedByLabel: "installstrategy.ns.sample"}, ClaimOther},
	}
	for _, c := range cases {
		if got := c.owner.ClaimOf(c.labels); got != c.want {
			t.Errorf("%s: ClaimOf = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestLabelValuesAreValid(t *testing.T) {
	long := Owner{Namespace: "ns", Name: strings.Repeat("a", 100)}
	for _, o := range []Owner{{Namespace: "ns", Name: "sample"}, long} {
		if err := o.Validate(); err != nil {
			t.Fatalf("%s: %v", o, err)
		}
		for k, v := range o.Labels() {
			if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
				t.Errorf("%s: label %s=%q: %v", o, k, v, errs)
			}
		}
		if !o.Owns(o.Labels()) {
			t.Errorf("%s does not own its own labels", o)
		}
	}
	if long.NameValue() == (Owner{Namespace: "ns", Name: strings.Repeat("a", 101)}).NameValue() {
		t.Error("two long names share a label value")
	}
	if len(ConfigMapName(Owner{Name: strings.Repeat("b", 250)})) > 253 {
		t.Error("inventory name over 253 characters")
	}
	if v := LegacyManagedBy("ns", "sample"); v != "installstrategy.ns.sample" {
		t.Errorf("LegacyManagedBy = %s", v)
	}
	if v := LegacyManagedBy(strings.Repeat("n", 40), strings.Repeat("m", 40)); len(validation.IsValidLabelValue(v)) > 0 || !strings.HasPrefix(v, "installstrategy.") {
		t.Errorf("long LegacyManagedBy = %s", v)
	}
	for _, bad := range []Owner{{Namespace: "ns"}, {Name: "x"}, {Namespace: "Bad_NS", Name: "x"}, {Namespace: "ns", Name: "x", Kind: "Other"}} {
		if bad.Validate() == nil {
			t.Errorf("%+v validated", bad)
		}
	}
}

// ByAnInstallation: installation labels with the managed-by value, or an
// older operator's legacy managed-by value; not the plugin's bare value
// of older versions, nor others' labels.
func TestByAnInstallation(t *testing.T) {
	for _, tt := range []struct {
		labels map[string]string
		want   bool
	}{
		{Owner{Namespace: "ns", Name: "i"}.Labels(), true},
		{map[string]string{metakeys.ManagedByLabel: LegacyManagedBy("ns", "i")}, true},
		{map[string]string{metakeys.ManagedByLabel: metakeys.ManagedBy}, false},
		{map[string]string{metakeys.ManagedByLabel: "installstrategy."}, false},
		{map[string]string{metakeys.ManagedByLabel: "Helm", metakeys.InstallationLabel: "i"}, false},
		{nil, false},
	} {
		if got := ByAnInstallation(tt.labels); got != tt.want {
			t.Errorf("ByAnInstallation(%v) = %v, want %v", tt.labels, got, tt.want)
		}
	}
}
