package crdsafety_test

import (
	"strings"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/crdsafety"
)

// owned gives o one field manager entry per manager=fieldsV1 pair.
func owned(o *unstructured.Unstructured, pairs ...string) *unstructured.Unstructured {
	var entries []metav1.ManagedFieldsEntry
	for i := 0; i+1 < len(pairs); i += 2 {
		entries = append(entries, metav1.ManagedFieldsEntry{Manager: pairs[i], Operation: metav1.ManagedFieldsOperationApply,
			APIVersion: "example.com/v1", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(pairs[i+1])}})
	}
	o.SetManagedFields(entries)
	return o
}

func ours(e metav1.ManagedFieldsEntry) bool { return e.Manager == "installstrategy" }

// TestStrategyOwnObjects is the rule that KubeVirt's v1.8.4 -> v1.9.0
// upgrade needs (virtualmachineclusterpreferences drop
// .spec.devices.preferredVideoType, which only the strategy's own
// preferences set): a stored object the target strategy holds is judged by
// the strategy's new version of it plus the values other field managers
// own (they outlive the write); one the current installation holds, the
// target drops and the run prunes is not counted; any other is users'
// data.
func TestStrategyOwnObjects(t *testing.T) {
	base := `type: object
properties:
  devices: {type: object, properties: {videoType: {type: string}, disk: {type: string}}}
  color: {type: string, enum: [red, green, blue]}
  mode: {type: string, default: fast}
  size: {type: integer}
  tags: {type: array, items: {type: object, properties: {name: {type: string}, old: {type: string}}}}`
	noVideo := strings.Replace(base, "videoType: {type: string}, ", "", 1)
	noBlue := strings.Replace(base, "[red, green, blue]", "[red, green]", 1)
	slow := strings.Replace(base, "default: fast", "default: slow", 1)
	required := base + "\nrequired: [size]"
	noOld := strings.Replace(base, ", old: {type: string}", "", 1)
	const (
		ourVideo   = `{"f:spec":{"f:devices":{"f:videoType":{}}}}`
		ourDisk    = `{"f:spec":{"f:devices":{"f:disk":{}}}}`
		ourColor   = `{"f:spec":{"f:color":{}}}`
		ourTags    = `{"f:spec":{"f:tags":{}}}`
		userSpec   = `{"f:spec":{".":{},"f:size":{}}}`
		userDevice = `{"f:spec":{"f:devices":{".":{},"f:disk":{}}}}`
	)
	tests := []struct {
		name    string
		schema  string
		rule    crdsafety.Rule
		path    string
		stored  *unstructured.Unstructured
		desired string // the target strategy's object's spec; "" for none
		pruned  bool
		nilOurs bool
		counted bool
	}{
		// The KubeVirt case: the strategy wrote the value, its new
		// version drops it with the field.
		{"own value, new version drops it", noVideo, crdsafety.RuleFieldRemoved, ".spec.devices.videoType",
			owned(thing(`{devices: {videoType: vga}}`), "installstrategy", ourVideo), `{devices: {}}`, false, false, false},
		// The strategy's own new version still sets the removed field:
		// its own object breaks its new schema.
		{"own value, new version keeps it", noVideo, crdsafety.RuleFieldRemoved, ".spec.devices.videoType",
			owned(thing(`{devices: {videoType: vga}}`), "installstrategy", ourVideo), `{devices: {videoType: vga}}`, false, false, true},
		// A user set the removed field on the strategy's object: it
		// outlives the write and is pruned.
		{"user's value on an own object", noVideo, crdsafety.RuleFieldRemoved, ".spec.devices.videoType",
			owned(thing(`{devices: {videoType: vga, disk: sda}}`), "installstrategy", ourDisk, "kubectl-edit", ourVideo), `{devices: {disk: sda}}`, false, false, true},
		// A user owns other fields of the object, not the removed one.
		{"user owns a sibling only", noVideo, crdsafety.RuleFieldRemoved, ".spec.devices.videoType",
			owned(thing(`{devices: {videoType: vga, disk: sda}}`), "installstrategy", ourVideo, "kubectl-edit", userDevice), `{}`, false, false, false},
		// An atomic list another manager owns whole holds the removed
		// field of its elements.
		{"user owns an atomic list above", noOld, crdsafety.RuleFieldRemoved, ".spec.tags[*].old",
			owned(thing(`{tags: [{name: a, old: x}]}`), "installstrategy", ourColor, "kubectl-edit", ourTags), `{}`, false, false, true},
		{"own atomic list", noOld, crdsafety.RuleFieldRemoved, ".spec.tags[*].old",
			owned(thing(`{tags: [{name: a, old: x}]}`), "installstrategy", ourTags, "kubectl-edit", userSpec), `{tags: [{name: a}]}`, false, false, false},
		// Field managers unknown: the values are users'.
		{"no field managers", noVideo, crdsafety.RuleFieldRemoved, ".spec.devices.videoType",
			thing(`{devices: {videoType: vga}}`), `{}`, false, false, true},
		{"nil Ours", noVideo, crdsafety.RuleFieldRemoved, ".spec.devices.videoType",
			owned(thing(`{devices: {videoType: vga}}`), "installstrategy", ourVideo), `{}`, false, true, true},
		// Not in the target: users' data, unless the run prunes it.
		{"not held by the target", noVideo, crdsafety.RuleFieldRemoved, ".spec.devices.videoType",
			owned(thing(`{devices: {videoType: vga}}`), "installstrategy", ourVideo), "", false, false, true},
		{"dropped by the target and pruned", noVideo, crdsafety.RuleFieldRemoved, ".spec.devices.videoType",
			owned(thing(`{devices: {videoType: vga}}`), "installstrategy", ourVideo), "", true, false, false},
		// The other rules, on the strategy's new version.
		{"own enum value changed with the enum", noBlue, crdsafety.RuleEnumTightened, ".spec.color",
			owned(thing(`{color: blue}`), "installstrategy", ourColor), `{color: red}`, false, false, false},
		{"own new version outside the enum", noBlue, crdsafety.RuleEnumTightened, ".spec.color",
			owned(thing(`{color: red}`), "installstrategy", ourColor), `{color: blue}`, false, false, true},
		{"user's value outside the enum", noBlue, crdsafety.RuleEnumTightened, ".spec.color",
			owned(thing(`{color: blue}`), "installstrategy", ourVideo, "kubectl-edit", ourColor), `{}`, false, false, true},
		{"own new version lacks a required field", required, crdsafety.RuleRequiredAdded, ".spec.size",
			owned(thing(`{size: 1}`), "installstrategy", `{"f:spec":{"f:size":{}}}`), `{color: red}`, false, false, true},
		{"own new version has the required field", required, crdsafety.RuleRequiredAdded, ".spec.size",
			owned(thing(`{color: red}`), "installstrategy", ourColor), `{size: 2}`, false, false, false},
		// A changed default never counts against the strategy's own
		// object: the author wrote both.
		{"default changed, own object without it", slow, crdsafety.RuleDefaultChanged, ".spec.mode",
			owned(thing(`{color: red}`), "installstrategy", ourColor), `{color: red}`, false, false, false},
		{"default changed, user's object without it", slow, crdsafety.RuleDefaultChanged, ".spec.mode",
			owned(thing(`{color: red}`), "kubectl-client-side-apply", ourColor), "", false, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			found := crdsafety.Compare(crd(t, "Namespaced", base), crd(t, "Namespaced", tt.schema))
			f := findingAt(t, found, tt.rule, tt.path)
			st := crdsafety.Stored{Object: tt.stored, Pruned: tt.pruned, Ours: ours}
			if tt.nilOurs {
				st.Ours = nil
			}
			if tt.desired != "" {
				st.Desired = thing(tt.desired)
			}
			f.ObserveStored(st)
			if got := f.Objects == 1; got != tt.counted {
				t.Errorf("counted = %v, want %v", got, tt.counted)
			}
			refused := crdsafety.Judge([]crdsafety.Finding{*f}, nil, nil)
			if (len(refused) == 1) != tt.counted {
				t.Errorf("refused %v, want refused = %v", refused, tt.counted)
			}
		})
	}
}

// TestSameFields: the strategy's object stands for what is read at a
// version when written at it, or when no conversion webhook changes more
// than apiVersion.
func TestSameFields(t *testing.T) {
	none := &apiextv1.CustomResourceDefinition{}
	webhook := &apiextv1.CustomResourceDefinition{Spec: apiextv1.CustomResourceDefinitionSpec{Conversion: &apiextv1.CustomResourceConversion{Strategy: apiextv1.WebhookConverter}}}
	for _, tt := range []struct {
		crd              *apiextv1.CustomResourceDefinition
		apiVersion, read string
		want             bool
	}{
		{none, "example.com/v1", "v1", true},
		{none, "example.com/v1beta1", "v1", true},
		{webhook, "example.com/v1", "v1", true},
		{webhook, "example.com/v1beta1", "v1", false},
	} {
		if got := crdsafety.SameFields(tt.crd, tt.apiVersion, tt.read); got != tt.want {
			t.Errorf("SameFields(%v, %s, %s) = %v", tt.crd.Spec.Conversion, tt.apiVersion, tt.read, got)
		}
	}
}
