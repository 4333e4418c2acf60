package v1alpha1

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// A refusal listing thousands of errors made a condition message the API
// server rejects, and the status write with it (issue 39): SetCondition
// keeps it within MaxConditionMessage, whole runes.
func TestSetConditionFitsTheAPILimit(t *testing.T) {
	in := &Installation{}
	in.SetCondition(ConditionDegraded, "True", "R", strings.Repeat("é", MaxConditionMessage))
	msg := in.Condition(ConditionDegraded).Message
	if len(msg) > MaxConditionMessage || !utf8.ValidString(msg) || !strings.HasSuffix(msg, "(truncated)") {
		t.Fatalf("message of %d bytes, valid UTF-8 %v", len(msg), utf8.ValidString(msg))
	}
	in.SetCondition(ConditionDegraded, "True", "R", "short")
	if in.Condition(ConditionDegraded).Message != "short" {
		t.Fatal("a short message was changed")
	}
}
