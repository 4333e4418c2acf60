package strategy

import (
	"encoding/binary"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/installstrategy/installstrategy/pkg/jsonshare"
)

// fastParse reads the block-style YAML subset that sigs.k8s.io/yaml writes,
// which is what KubeVirt's strategies (and ours) are made of: block mappings
// and sequences indented with spaces, plain and quoted scalars (on one line
// or folded over several, as the emitter wraps long strings), literal block
// scalars, and empty flow collections. It returns ok=false as soon as it
// meets anything else (comments, anchors, tags, flow collections, folded
// block scalars, tabs, CRs, line breaks other than LF, ambiguous numbers),
// and the caller then uses the full YAML parser. Where it returns
// ok=true, its result equals the full parser's: tests check that on every
// document of the real KubeVirt strategies and by differential fuzzing.
//
// Keys and strings are strs' copies (jsonshare.Strings), not substrings of
// the document: the text is garbage once parsed, and what repeats is held
// once.
func fastParse(data []byte, strs *jsonshare.Strings) (any, bool) {
	if !printable(data) {
		return nil, false
	}
	p := fastParser{src: string(data), strs: strs}
	if lines, _ := linesPool.Get().(*[]fastLine); lines != nil {
		p.lines = *lines
	}
	defer func() {
		clear(p.lines) // keep no strings of this document alive
		p.lines = p.lines[:0]
		linesPool.Put(&p.lines)
	}()
	if !p.split() {
		return nil, false
	}
	p.skipBlank()
	if p.i >= len(p.lines) {
		return nil, false
	}
	v, ok := p.block(p.lines[p.i].indent)
	if !ok {
		return nil, false
	}
	p.skipBlank()
	return v, ok && p.i == len(p.lines)
}

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

type fastParser struct {
	src   string
	lines []fastLine
	i     int
	strs  *jsonshare.Strings
}

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

// block parses the mapping or sequence whose lines start at indent.
func (p *fastParser) block(indent int) (any, bool) {
	l, ok := p.next()
	if !ok || l.indent != indent || l.text[0] == '#' {
		return nil, false
	}
	if isSeqEntry(l.text) {
		return p.sequence(indent)
	}
	return p.mapping(indent)
}

func (p *fastParser) mapping(indent int) (any, bool) {
	m := map[string]any{}
	for {
		l, ok := p.next()
		if !ok || l.indent < indent || (l.indent == indent && isSeqEntry(l.text)) {
			return m, true
		}
		if l.indent > indent {
			return nil, false
		}
		key, rest, ok := splitKey(l.text)
		if !ok || key == "<<" {
			return nil, false
		}
		if _, dup := m[key]; dup {
			return nil, false
		}
		p.i++
		var v any
		if rest == "" {
			v, ok = p.nested(indent, true)
		} else {
			v, ok = p.scalarOrEmpty(rest, indent)
		}
		if !ok {
			return nil, false
		}
		m[p.strs.String(key)] = v
	}
}

// nested parses the value of a key or entry that was empty on its own line:
// a more indented block, an indentless sequence (mapping values only), or
// null.
func (p *fastParser) nested(indent int, inMapping bool) (any, bool) {
	l, ok := p.next()
	switch {
	case !ok:
		return nil, true
	case l.indent > indent:
		if !isSeqEntry(l.text) {
			if _, _, isKey := splitKey(l.text); !isKey {
				// A scalar that starts on the line after its key.
				p.i++
				return p.scalarOrEmpty(l.text, indent)
			}
		}
		return p.block(l.indent)
	case inMapping && l.indent == indent && isSeqEntry(l.text):
		return p.sequence(indent)
	}
	return nil, true
}

func (p *fastParser) sequence(indent int) (any, bool) {
	out := []any{}
	for {
		l, ok := p.next()
		if !ok || l.indent != indent || !isSeqEntry(l.text) {
			if ok && l.indent > indent {
				return nil, false
			}
			return out, true
		}
		if strings.TrimRight(l.text, " ") == "-" {
			p.i++
			v, ok := p.nested(indent, false)
			if !ok {
				return nil, false
			}
			out = append(out, v)
			continue
		}
		rest := strings.TrimLeft(l.text[2:], " ")
		col := indent + len(l.text) - len(rest)
		if isSeqEntry(rest) {
			return nil, false // "- - x": rare, left to the full parser
		}
		if _, _, isKey := splitKey(rest); isKey {
			// "- key: value": a mapping whose first key shares the line.
			p.lines[p.i] = fastLine{indent: col, text: rest}
			v, ok := p.mapping(col)
			if !ok {
				return nil, false
			}
			out = append(out, v)
			continue
		}
		p.i++
		v, ok := p.scalarOrEmpty(rest, indent)
		if !ok {
			return nil, false
		}
		out = append(out, v)
	}
}

// maxSimpleKey bounds the keys the fast path takes: YAML limits an
// implicit key to 1024 characters (yaml.v3 refuses a longer one), so a
// key near that is left to the full parser, which decides.
const maxSimpleKey = 1000

// splitKey splits "key: rest" or "key:" into the key and what follows.
func splitKey(t string) (key, rest string, ok bool) {
	if t == "" {
		return "", "", false
	}
	switch t[0] {
	case '"', '\'':
		s, n, ok := quoted(t)
		if !ok || n >= len(t) || t[n] != ':' || n > maxSimpleKey {
			return "", "", false
		}
		after := t[n+1:]
		if after != "" && after[0] != ' ' {
			return "", "", false
		}
		return s, strings.TrimLeft(after, " "), true
	}
	if !plainStart(t) {
		return "", "", false
	}
	for i := 0; i < len(t); i++ {
		if t[i] == ':' && (i+1 == len(t) || t[i+1] == ' ') {
			key = t[:i]
			if strings.Contains(key, " #") || strings.HasSuffix(key, " ") || i > maxSimpleKey {
				return "", "", false
			}
			return key, strings.TrimLeft(t[i+1:], " "), true
		}
	}
	return "", "", false
}

// plainStart reports whether t may start a plain scalar here; anything that
// starts with an indicator is left to the full parser.
func plainStart(t string) bool {
	switch t[0] {
	case '-', '?', ':', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`', '~':
		return false
	}
	return true
}

// scalarOrEmpty parses the value that follows "key: " or "- " on a line;
// parentIndent is the indentation of the key or entry.
func (p *fastParser) scalarOrEmpty(rest string, parentIndent int) (any, bool) {
	var v any
	switch {
	case rest == "":
		return nil, false
	case rest == "{}":
		v = map[string]any{}
	case rest == "[]":
		v = []any{}
	case rest[0] == '|':
		s, ok := p.literal(rest, parentIndent)
		if !ok {
			return nil, false
		}
		return p.strs.Value(s), true
	case rest[0] == '"' || rest[0] == '\'':
		s, ok := p.multiQuoted(rest, parentIndent)
		if !ok {
			return nil, false
		}
		v = p.strs.Value(s)
	default:
		text, ok := p.foldPlain(rest, parentIndent)
		if !ok {
			return nil, false
		}
		if v, ok = plainValue(text, p.strs); !ok {
			return nil, false
		}
	}
	// A more indented line after a one-line value would continue it (a
	// multi-line scalar): not in the subset.
	if l, ok := p.next(); ok && l.indent > parentIndent {
		return nil, false
	}
	return v, true
}

var (
	fastInt   = regexp.MustCompile(`^-?(0|[1-9][0-9]{0,17})$`)
	fastFloat = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+([eE][-+]?[0-9]+)?|[eE][-+]?[0-9]+)$`)
)

// plainValue resolves a one-line plain scalar as YAML 1.2's core schema (and
// yaml.v3) would, or gives up. A string is strs' copy.
func plainValue(s string, strs *jsonshare.Strings) (any, bool) {
	s = strings.TrimRight(s, " ")
	if s == "" || !plainStart(s) && !(s[0] == '-' && len(s) > 1 && s[1] != ' ') {
		return nil, false
	}
	if strings.Contains(s, ": ") || strings.Contains(s, " #") || strings.HasSuffix(s, ":") {
		return nil, false
	}
	switch s {
	case "null", "Null", "NULL":
		return nil, true
	case "true", "True", "TRUE":
		return true, true
	case "false", "False", "FALSE":
		return false, true
	}
	c := s[0]
	if c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9') {
		if fastInt.MatchString(s) {
			i, err := strconv.ParseInt(s, 10, 64)
			return i, err == nil
		}
		if fastFloat.MatchString(s) {
			f, err := strconv.ParseFloat(s, 64)
			return f, err == nil
		}
		// Other spellings the full parser might read as numbers or
		// timestamps: let it decide.
		plain := strings.ReplaceAll(s, "_", "")
		if _, err := strconv.ParseInt(plain, 0, 64); err == nil {
			return nil, false
		}
		if _, err := strconv.ParseUint(plain, 0, 64); err == nil {
			return nil, false
		}
		if _, err := strconv.ParseFloat(plain, 64); err == nil {
			return nil, false
		}
		if len(s) > 4 && s[4] == '-' && strings.Trim(s[:4], "0123456789") == "" {
			return nil, false // maybe a timestamp (yaml.v3 only tries YYYY-...)
		}
		switch strings.ToLower(strings.TrimLeft(s, "+-")) {
		case ".inf", ".nan":
			return nil, false
		}
		if strings.HasPrefix(plain, "0b") || strings.HasPrefix(plain, "-0b") || strings.HasPrefix(plain, "0o") || strings.HasPrefix(plain, "-0o") {
			return nil, false
		}
	}
	return strs.Value(s), true
}

// foldPlain joins a plain scalar's continuation lines (those indented more
// than parentIndent) to its first line, as YAML folds them: one space per
// line break, a newline per blank line between.
func (p *fastParser) foldPlain(first string, parentIndent int) (string, bool) {
	text := strings.TrimRight(first, " ")
	if text == "" || !plainStart(text) && !(text[0] == '-' && len(text) > 1 && text[1] != ' ') {
		return "", false
	}
	if strings.Contains(text, ": ") || strings.Contains(text, " #") || strings.HasSuffix(text, ":") {
		return "", false
	}
	var b *strings.Builder
	for {
		j, blanks := p.i, 0
		for j < len(p.lines) && p.lines[j].blank {
			blanks++
			j++
		}
		if j >= len(p.lines) || p.lines[j].indent <= parentIndent {
			break
		}
		l := strings.TrimRight(p.lines[j].text, " ")
		// A continuation line may start with any character but "#" (a
		// comment): indicators such as "- " only count where a scalar
		// starts, and "---" cannot be here (the line is indented).
		if l[0] == '#' || strings.Contains(l, ": ") || strings.Contains(l, " #") || strings.HasSuffix(l, ":") {
			return "", false
		}
		if b == nil {
			b = &strings.Builder{}
			b.WriteString(text)
		}
		if blanks == 0 {
			b.WriteByte(' ')
		} else {
			b.WriteString(strings.Repeat("\n", blanks))
		}
		b.WriteString(l)
		p.i = j + 1
	}
	if b != nil {
		return b.String(), true
	}
	return text, true
}

// quoted reads a one-line single- or double-quoted scalar at the start of t
// and returns it with the length it took.
func quoted(t string) (string, int, bool) {
	// Fast when there is nothing to unescape: the value is a substring.
	if t[0] == '\'' {
		if end := strings.IndexByte(t[1:], '\''); end >= 0 && (2+end == len(t) || t[2+end] != '\'') {
			return t[1 : 1+end], end + 2, true
		}
	} else if end := strings.IndexAny(t[1:], "\"\\"); end >= 0 && t[1+end] == '"' {
		return t[1 : 1+end], end + 2, true
	}
	q := quoteScanner{single: t[0] == '\''}
	n, closed, ok := q.segment(t[1:])
	if !ok || !closed {
		return "", 0, false
	}
	return string(q.out), n + 1, true
}

// multiQuoted reads a quoted scalar that starts at first (its opening quote
// and the rest of its line) and may go on over the next lines, which must be
// indented more than parentIndent. The rest of the line where it closes must
// be blank.
func (p *fastParser) multiQuoted(first string, parentIndent int) (string, bool) {
	if s, n, ok := quoted(first); ok {
		return s, strings.TrimRight(first[n:], " ") == ""
	}
	q := quoteScanner{single: first[0] == '\''}
	_, closed, ok := q.segment(first[1:])
	for ok && !closed {
		// The segment ended at a line break (escaped or not): fold it
		// with the blank lines that follow, as yaml.v3 does.
		breaks := 0
		for p.i < len(p.lines) && p.lines[p.i].blank {
			breaks++
			p.i++
		}
		if p.i >= len(p.lines) || p.lines[p.i].indent <= parentIndent {
			return "", false // end of document, or less indented: the full parser decides
		}
		switch {
		case q.escapedBreak || breaks > 0:
			for ; breaks > 0; breaks-- {
				q.out = append(q.out, '\n')
			}
		default:
			q.out = append(q.out, ' ')
		}
		l := p.lines[p.i].text
		p.i++
		var n int
		n, closed, ok = q.segment(l)
		if ok && closed && strings.TrimRight(l[n:], " ") != "" {
			return "", false
		}
	}
	if !ok {
		return "", false
	}
	return string(q.out), true
}

// quoteScanner decodes the inside of a quoted scalar one line at a time,
// with the rules of yaml.v3's scanner (yaml_parser_scan_flow_scalar): in
// single quotes a doubled quote is one quote; in double quotes the escapes
// yaml.v3 knows (anything else, "\/" included, it rejects, so the fast path
// gives up), and a backslash at the end of a line escapes the line break.
// Spaces at the end of a line are dropped; the caller folds the line breaks.
type quoteScanner struct {
	single bool
	out    []byte
	// escapedBreak is set when the last segment ended with a backslash.
	escapedBreak bool
}

// segment scans one line's part of the scalar (without its line break) and
// reports where the closing quote ended, if it was on this line.
func (q *quoteScanner) segment(t string) (end int, closed, ok bool) {
	q.escapedBreak = false
	spaces := 0 // pending spaces: kept only if something follows on the line
	for i := 0; i < len(t); {
		c := t[i]
		if c == ' ' {
			spaces++
			i++
			continue
		}
		for ; spaces > 0; spaces-- {
			q.out = append(q.out, ' ')
		}
		switch {
		case q.single && c == '\'':
			if i+1 < len(t) && t[i+1] == '\'' {
				q.out = append(q.out, '\'')
				i += 2
				continue
			}
			return i + 1, true, true
		case !q.single && c == '"':
			return i + 1, true, true
		case !q.single && c == '\\':
			if i+1 == len(t) {
				q.escapedBreak = true
				return len(t), false, true
			}
			n, ok := q.escape(t[i+1:])
			if !ok {
				return 0, false, false
			}
			i += 1 + n
		default:
			q.out = append(q.out, c)
			i++
		}
	}
	return len(t), false, true
}

// escape decodes the escape sequence after a backslash and returns the
// bytes it took.
func (q *quoteScanner) escape(t string) (int, bool) {
	if r, ok := simpleEscapes[t[0]]; ok {
		q.out = utf8.AppendRune(q.out, r)
		return 1, true
	}
	width := 0
	switch t[0] {
	case 'x':
		width = 2
	case 'u':
		width = 4
	case 'U':
		width = 8
	default:
		return 0, false
	}
	if 1+width > len(t) {
		return 0, false
	}
	r, err := strconv.ParseUint(t[1:1+width], 16, 32)
	if err != nil || !utf8.ValidRune(rune(r)) {
		return 0, false
	}
	q.out = utf8.AppendRune(q.out, rune(r))
	return 1 + width, true
}

// simpleEscapes are yaml.v3's one-character escapes (its scanner's list;
// "\<TAB>" cannot occur here, tabs never take the fast path).
var simpleEscapes = map[byte]rune{
	'0': 0, 'a': 7, 'b': 8, 't': 9, 'n': '\n', 'v': 0xb, 'f': 0xc, 'r': '\r', 'e': 0x1b,
	' ': ' ', '"': '"', '\'': '\'', '\\': '\\', 'N': 0x85, '_': 0xa0, 'L': 0x2028, 'P': 0x2029,
}

// literal reads a "|" block scalar (clip or strip chomping, indentation
// detected from its first line) whose key or entry is at parentIndent.
func (p *fastParser) literal(header string, parentIndent int) (string, bool) {
	var strip bool
	switch strings.TrimRight(header, " ") {
	case "|":
	case "|-":
		strip = true
	default:
		return "", false // keep chomping, indentation indicators, comments
	}
	// Content indentation: that of the first non-blank line.
	start := p.i
	j := start
	for j < len(p.lines) && p.lines[j].blank {
		if p.lines[j].indent > 0 {
			return "", false // leading lines of spaces: subtle rules
		}
		j++
	}
	if j >= len(p.lines) || p.lines[j].indent <= parentIndent {
		return "", false // empty block scalar: subtle rules
	}
	indent := p.lines[j].indent
	var b strings.Builder
	lastContent := -1
	end := start
	for end < len(p.lines) {
		l := p.lines[end]
		if l.blank {
			if l.indent > indent {
				return "", false
			}
			end++
			continue
		}
		if l.indent < indent {
			break
		}
		lastContent = end
		end++
	}
	if lastContent == len(p.lines)-1 && !strings.HasSuffix(p.src, "\n") {
		return "", false // no final line break: chomping differs
	}
	size := 1
	for k := start; k <= lastContent; k++ {
		size += 1 + max(p.lines[k].indent-indent, 0) + len(p.lines[k].text)
	}
	b.Grow(size)
	for k := start; k <= lastContent; k++ {
		l := p.lines[k]
		if k > start {
			b.WriteByte('\n')
		}
		if !l.blank {
			for n := l.indent - indent; n > 0; n-- {
				b.WriteByte(' ')
			}
			b.WriteString(l.text)
		}
	}
	if !strip {
		b.WriteByte('\n')
	}
	p.i = lastContent + 1
	return b.String(), true
}
