package testenv

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// SumSamples sums the values of the samples of metric name in a Prometheus
// text exposition (an operator's or the API server's /metrics) whose label
// set holds match ("" matches every sample); 0 when there is none.
func SumSamples(r io.Reader, name, match string) (float64, error) {
	var sum float64
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if !strings.HasPrefix(rest, "{") && !strings.HasPrefix(rest, " ") {
			continue // another metric whose name starts with name
		}
		labels := ""
		if strings.HasPrefix(rest, "{") {
			end := strings.LastIndex(rest, "}")
			labels, rest = rest[:end+1], rest[end+1:]
		}
		if !strings.Contains(labels, match) {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, fmt.Errorf("metric line %q: %v", line, err)
		}
		sum += v
	}
	return sum, sc.Err()
}
