// Package alloctest measures what a function allocates, for the tests and
// fuzz targets that hold untrusted input to the cost bound of issue 39.
package alloctest

import "runtime"

// MaxPerInput is the cost bound of issue 39: no single input may make a
// reader of untrusted data allocate more than 256 MB.
const MaxPerInput = 256 << 20

// Allocated returns the bytes f allocates (the growth of
// runtime.MemStats.TotalAlloc, which counts every allocation whether or not
// it was collected since): the cost bound the limits promise, not a time.
// It forces no collection: a runtime.GC per call made the fuzz targets,
// which call it several times per input, spend nine tenths of their time
// collecting (make fuzz's FuzzOpenRevision: 46 CPU-s with, 6.5 without).
func Allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
