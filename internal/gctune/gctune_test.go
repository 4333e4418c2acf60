package gctune

import (
	"runtime/debug"
	"testing"
)

// The programs collect at GOGC=50 unless GOGC is set (then Go's runtime
// has applied it, and it stays).
func TestGCPercent(t *testing.T) {
	restore := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(restore) })
	if got := Apply(func(string) string { return "" }, OperatorPercent); got != OperatorPercent {
		t.Errorf("without GOGC: %d, want %d", got, OperatorPercent)
	}
	if got := debug.SetGCPercent(100); got != OperatorPercent {
		t.Errorf("without GOGC the runtime collects at %d, want %d", got, OperatorPercent)
	}
	if got := Apply(func(k string) string { return map[string]string{"GOGC": "100"}[k] }, OperatorPercent); got != 100 {
		t.Errorf("with GOGC=100: %d, want 100 (left as the runtime read it)", got)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC=100 the runtime collects at %d", got)
	}
}
