package benchcmp

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestProcessRatiosRecordFailedPeer: a peer that failed gets NAME-failed
// and its failure line, no ratio; the others are compared with ours.
func TestProcessRatiosRecordFailedPeer(t *testing.T) {
	timeout := errors.New("request did not complete within requested timeout")
	metrics, lines := processRatios([]string{"kubectl", "helm", "ours"}, []Process{
		{Elapsed: 4 * time.Second, MaxRSS: 100e6, Requests: 20, Objects: 10, ServerCPU: 3 * time.Second},
		{Elapsed: 3 * time.Second, MaxRSS: 300e6, Requests: 40, Failed: timeout},
		{Elapsed: 2 * time.Second, MaxRSS: 50e6, Requests: 10, Objects: 10, ServerCPU: 1500 * time.Millisecond},
	})
	got := map[string]float64{}
	for _, m := range metrics {
		got[m.unit] = m.value
	}
	want := map[string]float64{"kubectl-x-speedup": 2, "kubectl-requests-ratio": 0.5, "kubectl-rss-ratio": 0.5, "kubectl-apiserver-cpu-ratio": 0.5, "helm-failed": 1}
	if len(got) != len(want) {
		t.Fatalf("metrics %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "helm failed after 3.00 s, 40 requests, peak RSS 300.0 MB: request did not complete") ||
		lines[0] != "fastest round of kubectl: 4.00 s, 20 requests, peak RSS 100.0 MB, 10 objects, API server CPU 3.00 s" {
		t.Fatalf("lines:\n%s", strings.Join(lines, "\n"))
	}
}
