// Package alloctest measures what a function allocates, for the tests and
// fuzz targets that hold untrusted input to the cost bound of issue 39.
package alloctest

import "runtime"

// MaxPerInput is the cost bound of issue 39: no single input may make a
// reader of untrusted data allocate more than 256 MB.
const MaxPerInput = 256 << 20

// Allocated returns the bytes f allocates (runtime.MemStats.TotalAlloc
// after a collection): the cost bound the limits promise, not a time.
func Allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
