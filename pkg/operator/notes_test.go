package operator

import (
	"strings"
	"testing"
	"unicode/utf8"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
)

// A Notes Event's note is the notes whole when they fit the API server's
// 1 KiB limit; longer ones are cut at a rune boundary to exactly the
// limit or less, and the cut says where the whole text is, per source.
func TestNotesNoteFitsAndSaysWhereTheRestIs(t *testing.T) {
	if got := notesNote("1.0.0", "short notes", "X"); got != "NOTES of 1.0.0:\nshort notes" {
		t.Errorf("short notes: %q", got)
	}
	long := strings.Repeat("é", 700) // 1,400 bytes
	got := notesNote("1.0.0", long, "the operator's log")
	if len(got) > maxEventNote || !utf8.ValidString(got) {
		t.Fatalf("note of %d bytes (valid UTF-8 %t), want at most %d", len(got), utf8.ValidString(got), maxEventNote)
	}
	if !strings.HasPrefix(got, "NOTES of 1.0.0:\né") || !strings.HasSuffix(got, "(cut at 1024 bytes; the whole text: the operator's log)") {
		t.Errorf("long notes: %q", got)
	}

	in := &v1alpha1.Installation{}
	in.Namespace = "shop"
	if w := notesWhere(in); w != `the operator's log, message "chart notes"` {
		t.Errorf("no strategy yet: %q", w)
	}
	in.Spec.Strategy = &v1alpha1.StrategySource{ConfigMap: &v1alpha1.ConfigMapStrategySource{Name: "shop-1.0.0"}}
	in.Status.Strategy = &v1alpha1.StrategyStatus{Source: v1alpha1.StrategySourceConfigMap}
	if w := notesWhere(in); !strings.HasPrefix(w, "kubectl installstrategy decode cm/shop-1.0.0 -n shop -o yaml (kind Notes)") {
		t.Errorf("configMap source: %q", w)
	}
	in.Status.Strategy = &v1alpha1.StrategyStatus{Source: v1alpha1.StrategySourceOCI, OCI: "ghcr.io/acme/shop@sha256:ab"}
	if w := notesWhere(in); !strings.HasPrefix(w, "kubectl installstrategy decode oci://ghcr.io/acme/shop@sha256:ab -o yaml") {
		t.Errorf("oci source: %q", w)
	}
	in.Status.Strategy = &v1alpha1.StrategyStatus{Source: v1alpha1.StrategySourceHelm, Chart: "ghcr.io/acme/charts/shop@sha256:ab"}
	if w := notesWhere(in); !strings.HasPrefix(w, "the operator's log") {
		t.Errorf("helm source: %q", w)
	}
}
