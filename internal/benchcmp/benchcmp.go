// Package benchcmp runs a benchmark beside its baseline in the same process
// and reports the ratios, so performance claims are always relative to a
// baseline measured on the same machine in the same run.
package benchcmp

import (
	"runtime"
	"testing"
	"time"
)

// Func is one side of a comparison: do the work n times.
type Func func(b *testing.B, n int)

// result is what the final round of a side measured.
type result struct {
	n       int
	elapsed time.Duration
	bytes   uint64
	allocs  uint64
}

// best keeps the fastest round among those with the most iterations, so
// that with -count N the ratio compares each side's best round (the least
// disturbed by other work on the machine) rather than whichever ran last.
func (r *result) keep(n result) {
	if n.n > r.n || (n.n == r.n && n.elapsed < r.elapsed) {
		*r = n
	}
}

// Compare runs three sub-benchmarks of b: "baseline", "ours" and "ratio".
// The first two report the usual ns/op, B/op, allocs/op (and MB/s when
// size, the input bytes per operation, is not 0). "ratio" reports
// x-speedup (baseline time ÷ ours) and alloc-ratio (ours allocated bytes ÷
// baseline's), each side taken at its best round so far.
func Compare(b *testing.B, size int64, baseline, ours Func) {
	b.Helper()
	// Each sub-benchmark runs once per -cpu value and -count round, inside
	// this one call; keep each side's best round per GOMAXPROCS.
	base, mine := map[int]*result{}, map[int]*result{}
	at := func(m map[int]*result) *result {
		procs := runtime.GOMAXPROCS(0)
		if m[procs] == nil {
			m[procs] = &result{}
		}
		return m[procs]
	}
	side := func(f Func, rounds map[int]*result) func(b *testing.B) {
		return func(b *testing.B) {
			b.ReportAllocs()
			if size > 0 {
				b.SetBytes(size)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			b.ResetTimer()
			f(b, b.N)
			b.StopTimer()
			elapsed := time.Since(start)
			runtime.ReadMemStats(&after)
			at(rounds).keep(result{n: b.N, elapsed: elapsed, bytes: after.TotalAlloc - before.TotalAlloc, allocs: after.Mallocs - before.Mallocs})
		}
	}
	if !b.Run("baseline", side(baseline, base)) || !b.Run("ours", side(ours, mine)) {
		b.Fatal("a side of the comparison failed")
	}
	b.Run("ratio", func(b *testing.B) {
		perOp := func(r result) (float64, float64) {
			return float64(r.elapsed) / float64(r.n), float64(r.bytes) / float64(r.n)
		}
		baseNs, baseBytes := perOp(*at(base))
		ourNs, ourBytes := perOp(*at(mine))
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(baseNs/ourNs, "x-speedup")
		b.ReportMetric(ourBytes/baseBytes, "alloc-ratio")
		b.Logf("GOMAXPROCS %d, best rounds: baseline %.1f ms/op %.1f MB alloc/op; ours %.1f ms/op %.1f MB alloc/op", runtime.GOMAXPROCS(0), baseNs/1e6, baseBytes/1e6, ourNs/1e6, ourBytes/1e6)
	})
}
