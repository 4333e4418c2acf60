package testenv

import (
	"strings"
	"testing"
)

// SumSamples adds the samples of one metric whose labels hold match, not
// those of a metric whose name only starts with it; none sums to 0.
func TestSumSamples(t *testing.T) {
	text := `# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
process_cpu_seconds_total 18.76
process_cpu_seconds_total_other 5
requests_total{verb="GET",code="200"} 3
requests_total{verb="PATCH",code="200"} 4
requests_total{verb="GET",code="404"} 1
`
	for _, c := range []struct {
		name, match string
		want        float64
	}{
		{"process_cpu_seconds_total", "", 18.76},
		{"requests_total", "", 8},
		{"requests_total", `verb="GET"`, 4},
		{"absent_total", "", 0},
	} {
		got, err := SumSamples(strings.NewReader(text), c.name, c.match)
		if err != nil || got != c.want {
			t.Errorf("SumSamples(%s, %q) = %v, %v; want %v", c.name, c.match, got, err, c.want)
		}
	}
}
