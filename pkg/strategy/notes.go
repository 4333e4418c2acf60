package strategy

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// NotesGroupKind is the kind of a strategy's notes: text for the person
// who installs it (a Helm chart's rendered NOTES.txt, which encode
// --from-helm writes), carried in the strategy's own text, so signed with
// it, and never applied (Requirements drops it with the Requirements
// object). At most one is read; apply prints it after a successful run.
//
//	apiVersion: installstrategy.io/v1alpha1
//	kind: Notes
//	metadata: {name: notes}
//	text: |
//	  ...
var NotesGroupKind = schema.GroupKind{Group: "installstrategy.io", Kind: "Notes"}

// NotesObject is the Notes document holding text.
func NotesObject(text string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": NotesGroupKind.Group + "/v1alpha1",
		"kind":       NotesGroupKind.Kind,
		"metadata":   map[string]any{"name": "notes"},
		"text":       text,
	}}
}

// Notes returns the text of the strategy's Notes object, "" when it has
// none.
func (s *Strategy) Notes() string {
	for _, o := range s.Objects {
		if o.GroupVersionKind().GroupKind() == NotesGroupKind {
			text, _, _ := unstructured.NestedString(o.Object, "text")
			return text
		}
	}
	return ""
}

// applied reports whether o is applied: not a Requirements or Notes
// object.
func applied(o *unstructured.Unstructured) bool {
	gk := o.GroupVersionKind().GroupKind()
	return gk != requirementsGroupKind && gk != NotesGroupKind
}
