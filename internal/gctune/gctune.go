// Package gctune is the one home of the garbage collector's default for
// installstrategy's programs. Both the operator and the plugin hold a
// product's parsed strategy and the write responses of a step while they
// roll it out; at Go's default GOGC of 100 the heap grows to twice what is
// live before a collection. At 50 the operator's KubeVirt install peaked at
// 99-100 MiB instead of 113-122 MiB for about 0.1 s more CPU (25 gains
// little more, 96-98 MiB, for 0.3 s), and the plugin's at 80-85 MB instead
// of 89-91 MB for no CPU measurably more (docs/PERFORMANCE.md).
package gctune

import "runtime/debug"

// PluginPercent is the GOGC the plugin runs with unless the environment
// sets one.
const PluginPercent = 50

// OperatorPercent is the operator's. Since the parsed strategy holds one
// copy of what repeats in it (pkg/jsonshare), its live heap during a
// KubeVirt upgrade halved (36 -> 18 MB at the peak), and at 50 it
// collected 41-43 times per upgrade instead of 31, for 0.1-0.3 s more GC
// CPU and a slower upgrade in each of six paired runs (8.8 s against 7.4
// s); at 75 it collects less often than before, and peaks at 74-77 MiB
// instead of 86-92 (docs/NOTES.md, session 20).
const OperatorPercent = 75

// Apply sets percent when getenv("GOGC") is empty (os.Getenv) and returns
// the percentage in effect: with GOGC set, Go's runtime has applied it at
// start, and it stays.
func Apply(getenv func(string) string, percent int) int {
	if getenv("GOGC") != "" {
		p := debug.SetGCPercent(-1)
		debug.SetGCPercent(p)
		return p
	}
	debug.SetGCPercent(percent)
	return percent
}
