package benchcmp

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"

	"github.com/installstrategy/installstrategy/internal/testtier"
)

// TestMain is also the child of TestRunProcessMeasuresTheChild: with
// BENCHCMP_CHILD_MB set it touches that many megabytes and exits.
func TestMain(m *testing.M) {
	if v := os.Getenv("BENCHCMP_CHILD_MB"); v != "" {
		mb, err := strconv.Atoi(v)
		if err != nil {
			os.Exit(2)
		}
		buf := make([]byte, mb<<20)
		for i := 0; i < len(buf); i += 4096 {
			buf[i] = 1
		}
		runtime.KeepAlive(buf)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestRunProcessMeasuresTheChild: a small child of a large parent is
// measured small (its rusage alone reports the parent's peak), a large one
// large.
func TestRunProcessMeasuresTheChild(t *testing.T) {
	testtier.Heavy(t) // measures child processes
	parent := make([]byte, 400<<20)
	for i := 0; i < len(parent); i += 4096 {
		parent[i] = 1
	}
	run := func(mb int) int64 {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "BENCHCMP_CHILD_MB="+strconv.Itoa(mb))
		p, err := RunProcess(cmd)
		if err != nil {
			t.Fatalf("child of %d MB: %v", mb, err)
		}
		return p.MaxRSS
	}
	if small := run(1); small > 200<<20 {
		t.Errorf("a child touching 1 MB measured %d MB: the parent's 400 MB leaked into it", small>>20)
	}
	if large := run(600); large < 600<<20 {
		t.Errorf("a child touching 600 MB measured %d MB", large>>20)
	}
	runtime.KeepAlive(parent)
}
