//go:build !darwin

package benchcmp

// maxRSSUnit is the unit of Rusage.Maxrss: KiB on Linux and the BSDs.
const maxRSSUnit = 1024
