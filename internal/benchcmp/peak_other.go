//go:build !linux

package benchcmp

// highWater is not known here; RunProcess keeps the rusage figure.
func highWater(string) int64 { return 0 }
