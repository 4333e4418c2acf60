//go:build !unix

package benchcmp

import "time"

// processCPU is not known here: Compare leaves x-cpu out.
func processCPU() time.Duration { return 0 }
