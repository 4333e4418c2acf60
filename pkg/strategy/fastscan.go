package strategy

import (
	"encoding/binary"
	"strings"
	"sync"
	"unicode/utf8"
)

// printable reports whether data is valid UTF-8 made of the characters YAML
// allows, leaving tabs, CRs, byte order marks and line breaks other than LF
// to the full parser.
func printable(data []byte) bool {
	for i := 0; i < len(data); {
		// Eight bytes at a time while they are all printable ASCII
		// (0x20-0x7e), the bulk of any manifests text.
		for i+8 <= len(data) {
			w := binary.LittleEndian.Uint64(data[i:])
			if hasByteBelow(w, 0x20)|w&highBits|hasByteBelow(w^(0x7f*lowBits), 1) != 0 {
				break
			}
			i += 8
		}
		if i >= len(data) {
			break
		}
		c := data[i]
		if c < utf8.RuneSelf {
			if (c < 0x20 && c != '\n') || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(data[i:])
		// NEL, LS and PS are line breaks to yaml.v3 (in scalars too), so
		// they are left to it like the C1 controls.
		if r == utf8.RuneError || r == 0xfeff || r < 0xa0 || r == 0x2028 || r == 0x2029 || (r >= 0xd800 && r < 0xe000) || r == 0xfffe || r == 0xffff {
			return false
		}
		i += size
	}
	return true
}

const (
	lowBits  = 0x0101010101010101
	highBits = 0x8080808080808080
)

// hasByteBelow is not 0 when one of the eight bytes of w is below n (n at
// most 0x80): the classic SWAR test, exact for "is there such a byte".
func hasByteBelow(w uint64, n uint64) uint64 { return (w - n*lowBits) &^ w & highBits }

type fastLine struct {
	indent int
	text   string // after the indentation; "" for a blank line
	blank  bool
}

// linesPool keeps the line tables of parsed documents for the next ones
// (*[]fastLine): on one core this was a tenth of the parse.
var linesPool sync.Pool

// split cuts the source into lines, refusing document markers (Parse has
// cut documents at them; fastParse alone leaves them to the full parser). It
// runs after printable, which has refused tabs and CRs.
func (p *fastParser) split() bool {
	s := p.src
	if n := strings.Count(s, "\n") + 1; cap(p.lines) < n {
		p.lines = make([]fastLine, 0, n)
	}
	p.lines = p.lines[:0]
	for len(s) > 0 {
		var l string
		if nl := strings.IndexByte(s, '\n'); nl >= 0 {
			l, s = s[:nl], s[nl+1:]
		} else {
			l, s = s, ""
		}
		n := 0
		for n < len(l) && l[n] == ' ' {
			n++
		}
		if n == 0 && len(l) >= 3 && (l[:3] == "---" || l[:3] == "...") && (len(l) == 3 || l[3] == ' ') {
			return false
		}
		p.lines = append(p.lines, fastLine{indent: n, text: l[n:], blank: n == len(l)})
	}
	return true
}

func (p *fastParser) skipBlank() {
	for p.i < len(p.lines) && p.lines[p.i].blank {
		p.i++
	}
}

// next returns the next non-blank line without consuming it.
func (p *fastParser) next() (fastLine, bool) {
	p.skipBlank()
	if p.i >= len(p.lines) {
		return fastLine{}, false
	}
	return p.lines[p.i], true
}

func isSeqEntry(t string) bool { return t == "-" || strings.HasPrefix(t, "- ") }
