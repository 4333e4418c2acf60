// Package benchcmp runs a benchmark beside its baseline in the same process
// and reports the ratios, so performance claims are always relative to a
// baseline measured on the same machine in the same run.
package benchcmp

import (
	"fmt"
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
	// cpu is the process's CPU time (user + system) over the round; 0
	// where the platform does not tell.
	cpu time.Duration
}

// best keeps the fastest round among those with the most iterations, so
// that with -count N the ratio compares each side's best round (the least
// disturbed by other work on the machine) rather than whichever ran last.
func (r *result) keep(n result) {
	if n.n > r.n || (n.n == r.n && n.elapsed < r.elapsed) {
		*r = n
	}
}

// keepCPU keeps the round that used the least CPU time, the same way.
func (r *result) keepCPU(n result) {
	if n.n > r.n || (n.n == r.n && n.cpu < r.cpu) {
		*r = n
	}
}

// Compare runs three sub-benchmarks of b: "baseline", "ours" and "ratio".
// The first two report the usual ns/op, B/op, allocs/op (and MB/s when
// size, the input bytes per operation, is not 0). "ratio" reports
// x-speedup (baseline time ÷ ours) and alloc-ratio (ours allocated bytes ÷
// baseline's), each side taken at its best round so far, and, where the
// platform reports it, x-cpu: baseline CPU time ÷ ours, the process's user
// and system time per operation at each side's most frugal round. CPU time
// is the steadier figure on a loaded machine (time spent waiting for a core
// does not count), but it counts this process only: not the servers a
// benchmark talks to.
func Compare(b *testing.B, size int64, baseline, ours Func) {
	b.Helper()
	// Each sub-benchmark runs once per -cpu value and -count round, inside
	// this one call; keep each side's best round per GOMAXPROCS.
	type best struct{ wall, cpu result }
	base, mine := map[int]*best{}, map[int]*best{}
	at := func(m map[int]*best) *best {
		procs := runtime.GOMAXPROCS(0)
		if m[procs] == nil {
			m[procs] = &best{}
		}
		return m[procs]
	}
	side := func(f Func, rounds map[int]*best) func(b *testing.B) {
		return func(b *testing.B) {
			b.ReportAllocs()
			if size > 0 {
				b.SetBytes(size)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			cpu0 := processCPU()
			start := time.Now()
			b.ResetTimer()
			f(b, b.N)
			b.StopTimer()
			elapsed := time.Since(start)
			cpu := processCPU() - cpu0
			runtime.ReadMemStats(&after)
			r := result{n: b.N, elapsed: elapsed, bytes: after.TotalAlloc - before.TotalAlloc, allocs: after.Mallocs - before.Mallocs, cpu: cpu}
			at(rounds).wall.keep(r)
			at(rounds).cpu.keepCPU(r)
		}
	}
	if !b.Run("baseline", side(baseline, base)) || !b.Run("ours", side(ours, mine)) {
		b.Fatal("a side of the comparison failed")
	}
	b.Run("ratio", func(b *testing.B) {
		perOp := func(r result) (float64, float64, float64) {
			n := float64(r.n)
			return float64(r.elapsed) / n, float64(r.bytes) / n, float64(r.cpu) / n
		}
		baseNs, baseBytes, _ := perOp(at(base).wall)
		ourNs, ourBytes, _ := perOp(at(mine).wall)
		_, _, baseCPU := perOp(at(base).cpu)
		_, _, ourCPU := perOp(at(mine).cpu)
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(baseNs/ourNs, "x-speedup")
		b.ReportMetric(ourBytes/baseBytes, "alloc-ratio")
		cpuNote := ""
		if baseCPU > 0 && ourCPU > 0 {
			b.ReportMetric(baseCPU/ourCPU, "x-cpu")
			cpuNote = fmt.Sprintf("; CPU time baseline %.1f ms/op, ours %.1f ms/op", baseCPU/1e6, ourCPU/1e6)
		}
		b.Logf("GOMAXPROCS %d, best rounds: baseline %.1f ms/op %.1f MB alloc/op; ours %.1f ms/op %.1f MB alloc/op%s", runtime.GOMAXPROCS(0), baseNs/1e6, baseBytes/1e6, ourNs/1e6, ourBytes/1e6, cpuNote)
	})
}
