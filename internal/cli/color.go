package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// palette colours what the plugin prints for people; the zero value
// prints plain text.
type palette struct{ on bool }

func (p palette) wrap(code, s string) string {
	if !p.on || s == "" {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

func (p palette) bold(s string) string   { return p.wrap("1", s) }
func (p palette) add(s string) string    { return p.wrap("32", s) }
func (p palette) remove(s string) string { return p.wrap("31", s) }
func (p palette) change(s string) string { return p.wrap("33", s) }
func (p palette) faint(s string) string  { return p.wrap("2", s) }

// colorModes are the values of --color.
var colorModes = []string{"auto", "always", "never"}

// palette returns the colours of --color for w: always, never, or (auto)
// on a terminal only, unless $NO_COLOR is set (https://no-color.org) or
// $TERM is dumb.
func (o *options) palette(w io.Writer) (palette, error) {
	switch o.color {
	case "always":
		return palette{on: true}, nil
	case "never":
		return palette{}, nil
	case "auto", "":
		if os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
			return palette{}, nil
		}
		return palette{on: w != nil && isTerminal(w)}, nil
	}
	return palette{}, usageError(fmt.Errorf("--color %q: want %s", o.color, strings.Join(colorModes, ", ")))
}

// colorDiff colours the lines of a unified diff.
func (p palette) colorDiff(text string) string {
	if !p.on {
		return text
	}
	lines := strings.SplitAfter(text, "\n")
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
			lines[i] = p.bold(strings.TrimSuffix(l, "\n")) + "\n"
		case strings.HasPrefix(l, "@@"):
			lines[i] = p.wrap("36", strings.TrimSuffix(l, "\n")) + "\n"
		case strings.HasPrefix(l, "+"):
			lines[i] = p.add(strings.TrimSuffix(l, "\n")) + "\n"
		case strings.HasPrefix(l, "-"):
			lines[i] = p.remove(strings.TrimSuffix(l, "\n")) + "\n"
		}
	}
	return strings.Join(lines, "")
}
