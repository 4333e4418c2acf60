package cli

import (
	"fmt"
	"io"

	"github.com/installstrategy/installstrategy/pkg/health"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// rolloutView prints the health of a step's objects while apply waits for
// them: on a terminal, one line per object redrawn in place each round;
// otherwise a plain line whenever an object's state changes.
type rolloutView struct {
	w   io.Writer
	tty bool
	pal palette
	// drawn is the number of lines of the block on screen (tty), 0 once
	// something else was printed below it.
	drawn int
	last  map[strategy.ObjectRef]string
}

func newRolloutView(w io.Writer, tty bool, pal palette) *rolloutView {
	return &rolloutView{w: w, tty: tty, pal: pal, last: map[strategy.ObjectRef]string{}}
}

// progress shows one round of a step's wait.
func (v *rolloutView) progress(st []health.Status) {
	lines := make([]string, len(st))
	for i, s := range st {
		state := v.pal.change("waiting")
		switch {
		case s.Failed:
			state = v.pal.remove("failed ")
		case s.Ready:
			state = v.pal.add("ready  ")
		}
		lines[i] = fmt.Sprintf("  %s %s", state, s.Ref)
		if s.Reason != "" && !s.Ready {
			lines[i] += ": " + s.Reason
		}
	}
	if v.tty {
		if v.drawn > 0 {
			fmt.Fprintf(v.w, "\x1b[%dA", v.drawn) // back to the block's first line
		}
		for _, l := range lines {
			fmt.Fprintf(v.w, "\x1b[2K%s\n", l)
		}
		v.drawn = len(lines)
		return
	}
	for i, s := range st {
		if v.last[s.Ref] != lines[i] {
			v.last[s.Ref] = lines[i]
			fmt.Fprintln(v.w, lines[i])
		}
	}
}

// printed says that a line was printed below the block: the next round
// starts a new one.
func (v *rolloutView) printed() { v.drawn = 0 }
