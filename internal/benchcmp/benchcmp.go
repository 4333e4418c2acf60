// Package benchcmp runs a benchmark beside its baseline in the same process
// and reports the ratios, so performance claims are always relative to a
// baseline measured on the same machine in the same run.
package benchcmp

import (
	"fmt"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
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

// Process is what one run of a program as a child process measured.
type Process struct {
	// Elapsed is the wall time from start to exit.
	Elapsed time.Duration
	// MaxRSS is the child's peak resident set size in bytes (getrusage).
	MaxRSS int64
	// Requests is the API requests the program made, as it reported them.
	Requests int
	// Objects is how many objects it applied.
	Objects int
	// ServerCPU is the CPU time the API server spent while the program
	// ran (its process_cpu_seconds_total before and after), 0 when not
	// measured: on a small machine the API server's work, not the
	// client's, is most of an install's time.
	ServerCPU time.Duration
	// Failed, set by a peer's Run, says the program ran and failed to do
	// its work (e.g. Helm timing out at a size the API server cannot take
	// at its rate): the comparison records the failure, with the time and
	// memory it took, instead of stopping, and reports no ratio against
	// it. Our own side fails the benchmark instead.
	Failed error
}

// RunProcess runs cmd to its end and returns its wall time and peak
// resident set size; the caller sets its output and fills Requests and
// Objects from it. The error is cmd's.
//
// The child's rusage alone does not tell its peak: Go starts children with
// vfork (CLONE_VM), and Linux folds the peak of the memory a process had
// before exec, here the parent's (a benchmark holding 300 MB makes /bin/true
// report 300 MB), into the child's maxrss. So the parent's own peak is read
// once the child has exec'ed: a maxrss above it is the child's own; one at
// or below it is only a floor, and the child's peak is the highest VmHWM
// read from /proc while it ran (every 5 ms; growth in its last 5 ms can be
// missed).
func RunProcess(cmd *exec.Cmd) (Process, error) {
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return Process{}, err
	}
	floor := highWater("self")
	pid := strconv.Itoa(cmd.Process.Pid)
	done := make(chan struct{})
	polled := make(chan int64, 1)
	go func() {
		var peak int64
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			peak = max(peak, highWater(pid))
			select {
			case <-done:
				polled <- peak
				return
			case <-tick.C:
			}
		}
	}()
	err := cmd.Wait()
	p := Process{Elapsed: time.Since(start)}
	close(done)
	p.MaxRSS = <-polled
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			if rss := int64(ru.Maxrss) * maxRSSUnit; floor == 0 || rss > floor {
				p.MaxRSS = rss
			}
		}
	}
	return p, err
}

// ProcessSide is one program of CompareProcesses.
type ProcessSide struct {
	Name string
	// Run readies the cluster (untimed) and runs the program once, with
	// RunProcess; it fails b when the program did not do its work.
	Run func(b *testing.B) Process
}

// CompareProcesses compares programs run as child processes (kubectl,
// Helm, our plugin), so that their peak memory is measured alike: a
// sub-benchmark per side, each reporting ns/op (the programs' wall time,
// not the setup between runs), requests/op, peak-RSS-MB and objects, then
// "ratio", which reports for every side but the last (ours) NAME-x-speedup
// (its time ÷ ours), NAME-requests-ratio (ours ÷ its), NAME-rss-ratio
// (ours ÷ its) and, when both measured it, NAME-apiserver-cpu-ratio (ours
// ÷ its), each side taken at its fastest round so far; a peer that failed
// (Process.Failed) gets NAME-failed instead.
func CompareProcesses(b *testing.B, sides ...ProcessSide) {
	b.Helper()
	best := make([]Process, len(sides))
	for i, s := range sides {
		ok := b.Run(s.Name, func(b *testing.B) {
			b.StopTimer()
			var total time.Duration
			var last Process
			var peak int64
			for range b.N {
				last = s.Run(b)
				total += last.Elapsed
				peak = max(peak, last.MaxRSS)
				if last.Failed != nil {
					best[i] = last
					break
				}
				if best[i].Elapsed == 0 || last.Elapsed < best[i].Elapsed {
					best[i] = last
				}
			}
			if last.Failed != nil {
				if i == len(sides)-1 {
					b.Fatalf("%s failed: %v", s.Name, last.Failed)
				}
				b.Logf("%s failed after %.1f s (peak RSS %.1f MB, %d requests): %v", s.Name, last.Elapsed.Seconds(), float64(last.MaxRSS)/1e6, last.Requests, last.Failed)
			}
			b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/op")
			b.ReportMetric(float64(last.Requests), "requests/op")
			b.ReportMetric(float64(peak)/1e6, "peak-RSS-MB")
			b.ReportMetric(float64(last.Objects), "objects")
			if last.ServerCPU > 0 {
				b.ReportMetric(last.ServerCPU.Seconds(), "apiserver-cpu-s")
			}
		})
		if !ok {
			b.Fatalf("side %s of the comparison failed", s.Name)
		}
	}
	b.Run("ratio", func(b *testing.B) {
		names := make([]string, len(sides))
		for i, s := range sides {
			names[i] = s.Name
		}
		b.ReportMetric(0, "ns/op")
		metrics, lines := processRatios(names, best)
		for _, m := range metrics {
			b.ReportMetric(m.value, m.unit)
		}
		for _, l := range lines {
			b.Log(l)
		}
	})
}

type metric struct {
	value float64
	unit  string
}

// processRatios is CompareProcesses' "ratio": the metrics of ours (the
// last) against every other side, and a line per side.
func processRatios(names []string, best []Process) ([]metric, []string) {
	var metrics []metric
	ours := best[len(best)-1]
	for i, name := range names[:len(names)-1] {
		base := best[i]
		if base.Failed != nil {
			metrics = append(metrics, metric{1, name + "-failed"})
			continue
		}
		metrics = append(metrics,
			metric{float64(base.Elapsed) / float64(ours.Elapsed), name + "-x-speedup"},
			metric{float64(ours.Requests) / float64(base.Requests), name + "-requests-ratio"},
			metric{float64(ours.MaxRSS) / float64(base.MaxRSS), name + "-rss-ratio"})
		if base.ServerCPU > 0 && ours.ServerCPU > 0 {
			metrics = append(metrics, metric{float64(ours.ServerCPU) / float64(base.ServerCPU), name + "-apiserver-cpu-ratio"})
		}
	}
	var lines []string
	for i, name := range names {
		p := best[i]
		if p.Failed != nil {
			lines = append(lines, fmt.Sprintf("%s failed after %.2f s, %d requests, peak RSS %.1f MB: %v", name, p.Elapsed.Seconds(), p.Requests, float64(p.MaxRSS)/1e6, p.Failed))
			continue
		}
		line := fmt.Sprintf("fastest round of %s: %.2f s, %d requests, peak RSS %.1f MB, %d objects", name, p.Elapsed.Seconds(), p.Requests, float64(p.MaxRSS)/1e6, p.Objects)
		if p.ServerCPU > 0 {
			line += fmt.Sprintf(", API server CPU %.2f s", p.ServerCPU.Seconds())
		}
		lines = append(lines, line)
	}
	return metrics, lines
}
