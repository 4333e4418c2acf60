package alloctest

import "testing"

var sink []byte

func TestAllocatedCountsWhatFAllocates(t *testing.T) {
	const size = 8 << 20
	if n := Allocated(func() { sink = make([]byte, size) }); n < size {
		t.Errorf("an allocation of %d bytes counted as %d", size, n)
	}
	// Allocations collected before the second reading still count: the
	// bound is on what was allocated, not on what is still live.
	if n := Allocated(func() {
		for range 8 {
			sink = make([]byte, size)
		}
		sink = nil
	}); n < 8*size {
		t.Errorf("eight allocations of %d bytes counted as %d", size, n)
	}
	if n := Allocated(func() {}); n > 1<<20 {
		t.Errorf("a function that allocates nothing counted as %d bytes", n)
	}
}
