package benchcmp

// maxRSSUnit is the unit of Rusage.Maxrss: bytes on Darwin.
const maxRSSUnit = 1
