package strategy

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A Notes document is read by Notes and, like the Requirements object,
// left out of what is applied.
func TestNotesAreNotApplied(t *testing.T) {
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c"}}}
	s := &Strategy{Identity: Identity{Version: "1.0.0"}, Objects: []*unstructured.Unstructured{cm, NotesObject("hello\n")}}
	if got := s.Notes(); got != "hello\n" {
		t.Errorf("Notes() = %q, want %q", got, "hello\n")
	}
	req, rest, err := s.Requirements()
	if err != nil || req != nil {
		t.Fatalf("Requirements: %v, %v", req, err)
	}
	if len(rest.Objects) != 1 || rest.Objects[0] != cm || rest.Identity != s.Identity {
		t.Errorf("applied objects %v, want only the ConfigMap", rest.Objects)
	}
	if (&Strategy{Objects: []*unstructured.Unstructured{cm}}).Notes() != "" {
		t.Error("a strategy without notes has notes")
	}
}

// A strategy text with a Notes document (as encode --from-helm writes
// it) parses without a warning: the kind is installstrategy's own, not an
// unknown one; its text is read back as written.
func TestNotesParseWithoutWarning(t *testing.T) {
	text := "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: ns\n" +
		"---\n# Source: NOTES.txt\napiVersion: installstrategy.io/v1alpha1\nkind: Notes\nmetadata:\n  name: notes\ntext: |\n  Get the password:\n    kubectl get secret x\n"
	s, warnings, err := Parse([]byte(text), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings %v, want none", warnings)
	}
	if got, want := s.Notes(), "Get the password:\n  kubectl get secret x\n"; got != want {
		t.Errorf("Notes() = %q, want %q", got, want)
	}
}
