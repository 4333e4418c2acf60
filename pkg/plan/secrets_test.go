package plan_test

import (
	"reflect"
	"testing"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// MaskSecrets leaves no Secret value in a plan, keeps the sizes, and
// leaves other objects and a Secret's other fields alone.
func TestMaskSecrets(t *testing.T) {
	secret := strategy.ObjectRef{Kind: "Secret", Namespace: "ns", Name: "s"}
	cm := strategy.ObjectRef{Kind: "ConfigMap", Namespace: "ns", Name: "c"}
	p := &plan.Plan{Steps: []plan.Step{{Name: "config", Items: []plan.Item{
		{Ref: secret, Changes: []apply.Change{
			{Path: ".data.password", Live: "aHVudGVyMg==", Desired: "c3dvcmRmaXNo"},
			{Path: ".stringData", Live: nil, Desired: map[string]any{"token": "abc"}},
			{Path: ".type", Live: "Opaque", Desired: "kubernetes.io/tls"},
		}},
		{Ref: cm, Changes: []apply.Change{{Path: ".data.k", Live: "a", Desired: "b"}}},
	}}}}
	plan.MaskSecrets(p)
	got := p.Steps[0].Items
	want := []apply.Change{
		{Path: ".data.password", Live: "(secret, 7 bytes)", Desired: "(secret, 9 bytes)"},
		{Path: ".stringData", Live: nil, Desired: map[string]any{"token": "(secret, 3 bytes)"}},
		{Path: ".type", Live: "Opaque", Desired: "kubernetes.io/tls"},
	}
	if !reflect.DeepEqual(got[0].Changes, want) {
		t.Errorf("masked secret changes %#v\nwant %#v", got[0].Changes, want)
	}
	if got[1].Changes[0].Live != "a" || got[1].Changes[0].Desired != "b" {
		t.Errorf("a ConfigMap was masked: %+v", got[1].Changes)
	}
}
