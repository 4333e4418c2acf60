package benchcmp

import (
	"bytes"
	"os"
	"strconv"
)

// highWater is the peak resident set size (VmHWM) of process pid ("self"
// for this one) in bytes, or 0 when it cannot be read (the process is gone).
func highWater(pid string) int64 {
	data, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	_, rest, ok := bytes.Cut(data, []byte("\nVmHWM:"))
	if !ok {
		return 0
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	kb, err := strconv.ParseInt(string(bytes.TrimSuffix(bytes.TrimSpace(line), []byte(" kB"))), 10, 64)
	if err != nil {
		return 0
	}
	return kb * 1024
}
