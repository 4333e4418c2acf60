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
