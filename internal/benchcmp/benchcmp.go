// Package benchcmp runs a benchmark beside its baseline in the same process
// and reports the ratios, so performance claims are always relative to a
// baseline measured on the same machine in the same run.
package benchcmp

import (
	"fmt"
	"testing"
)

// Compare runs baseline and ours with testing.Benchmark and reports, on b,
// the speed-up (baseline ns/op ÷ ours ns/op) and the allocation ratio (ours
// bytes/op ÷ baseline bytes/op), plus each side's figures. bytes is the
// input size per operation, for MB/s; 0 leaves MB/s out.
func Compare(b *testing.B, bytes int64, baseline, ours func(b *testing.B)) {
	b.Helper()
	base := testing.Benchmark(baseline)
	mine := testing.Benchmark(ours)
	if base.N == 0 || mine.N == 0 {
		b.Fatal("a side of the comparison failed")
	}
	speedup := float64(base.NsPerOp()) / float64(mine.NsPerOp())
	allocRatio := float64(mine.AllocedBytesPerOp()) / float64(max(1, base.AllocedBytesPerOp()))
	b.ReportMetric(speedup, "x-speedup")
	b.ReportMetric(allocRatio, "alloc-ratio")
	b.ReportMetric(float64(mine.NsPerOp())/1e6, "ours-ms/op")
	b.ReportMetric(float64(base.NsPerOp())/1e6, "baseline-ms/op")
	b.ReportMetric(float64(mine.AllocedBytesPerOp())/1e6, "ours-MB-alloc/op")
	b.ReportMetric(float64(base.AllocedBytesPerOp())/1e6, "baseline-MB-alloc/op")
	line := func(name string, r testing.BenchmarkResult) string {
		s := fmt.Sprintf("%-9s %4d ops %10.2f ms/op %10.1f MB alloc/op %8d allocs/op", name, r.N, float64(r.NsPerOp())/1e6,
			float64(r.AllocedBytesPerOp())/1e6, r.AllocsPerOp())
		if bytes > 0 {
			s += fmt.Sprintf(" %8.1f MB/s", float64(bytes)*float64(r.N)/r.T.Seconds()/1e6)
		}
		return s
	}
	b.Logf("\n%s\n%s\nspeed-up %.2fx, allocated bytes %.2f of the baseline", line("baseline", base), line("ours", mine), speedup, allocRatio)
	// The outer benchmark does its work in the two runs above.
	b.ReportAllocs()
}
