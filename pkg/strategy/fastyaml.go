package strategy

import (
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// fastParse reads the block-style YAML subset that sigs.k8s.io/yaml writes,
// which is what KubeVirt's strategies (and ours) are made of: block mappings
// and sequences indented with spaces, plain scalars on one line, one-line
// quoted scalars, literal block scalars, and empty flow collections. It
// returns ok=false as soon as it meets anything else (comments, anchors,
// tags, flow collections, folded or multi-line scalars, tabs, CRs, ambiguous
// numbers), and the caller then uses the full YAML parser. Where it returns
// ok=true, its result equals the full parser's: tests check that on every
// document of the real KubeVirt strategies and by differential fuzzing.
func fastParse(data []byte) (any, bool) {
	if !printable(data) {
		return nil, false
	}
	p := fastParser{src: string(data)}
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
// allows, leaving tabs, CRs and byte order marks to the full parser.
func printable(data []byte) bool {
	for i := 0; i < len(data); {
		c := data[i]
		if c < utf8.RuneSelf {
			if (c < 0x20 && c != '\n') || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError || r == 0xfeff || r < 0xa0 && r != 0x85 || (r >= 0xd800 && r < 0xe000) || r == 0xfffe || r == 0xffff {
			return false
		}
		i += size
	}
	return true
}

type fastLine struct {
	indent int
	text   string // after the indentation; "" for a blank line
	blank  bool
}

type fastParser struct {
	src   string
	lines []fastLine
	i     int
}

func (p *fastParser) split() bool {
	s := p.src
	p.lines = make([]fastLine, 0, strings.Count(s, "\n")+1)
	for len(s) > 0 {
		var l string
		if nl := strings.IndexByte(s, '\n'); nl >= 0 {
			l, s = s[:nl], s[nl+1:]
		} else {
			l, s = s, ""
		}
		if strings.IndexByte(l, '\r') >= 0 || strings.IndexByte(l, '\t') >= 0 {
			return false
		}
		n := 0
		for n < len(l) && l[n] == ' ' {
			n++
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
		m[key] = v
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
		return p.literal(rest, parentIndent)
	case rest[0] == '"' || rest[0] == '\'':
		s, n, ok := quoted(rest)
		if !ok || strings.TrimRight(rest[n:], " ") != "" {
			return nil, false
		}
		v = s
	default:
		text, ok := p.foldPlain(rest, parentIndent)
		if !ok {
			return nil, false
		}
		if v, ok = plainValue(text); !ok {
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
// yaml.v3) would, or gives up.
func plainValue(s string) (any, bool) {
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
	return s, true
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
		if !plainStart(l) || strings.Contains(l, ": ") || strings.Contains(l, " #") || strings.HasSuffix(l, ":") {
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
	if t[0] == '\'' {
		var b strings.Builder
		for i := 1; i < len(t); i++ {
			if t[i] == '\'' {
				if i+1 < len(t) && t[i+1] == '\'' {
					b.WriteByte('\'')
					i++
					continue
				}
				return b.String(), i + 1, true
			}
			b.WriteByte(t[i])
		}
		return "", 0, false
	}
	// Double-quoted: fast when there is no escape.
	end := strings.IndexAny(t[1:], "\"\\")
	if end >= 0 && t[1+end] == '"' {
		return t[1 : 1+end], end + 2, true
	}
	var b strings.Builder
	for i := 1; i < len(t); i++ {
		c := t[i]
		if c == '"' {
			return b.String(), i + 1, true
		}
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(t) {
			return "", 0, false
		}
		switch t[i] {
		case '\\', '"', '/':
			b.WriteByte(t[i])
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case '0':
			b.WriteByte(0)
		case 'a':
			b.WriteByte(7)
		case 'b':
			b.WriteByte(8)
		case 'e':
			b.WriteByte(0x1b)
		case 'f':
			b.WriteByte(0xc)
		case 'v':
			b.WriteByte(0xb)
		case ' ':
			b.WriteByte(' ')
		case 'x', 'u', 'U':
			width := map[byte]int{'x': 2, 'u': 4, 'U': 8}[t[i]]
			if i+width >= len(t) {
				return "", 0, false
			}
			r, err := strconv.ParseUint(t[i+1:i+1+width], 16, 32)
			if err != nil || !utf8.ValidRune(rune(r)) {
				return "", 0, false
			}
			b.WriteRune(rune(r))
			i += width
		default:
			return "", 0, false
		}
	}
	return "", 0, false
}

// literal reads a "|" block scalar (clip or strip chomping, indentation
// detected from its first line) whose key or entry is at parentIndent.
func (p *fastParser) literal(header string, parentIndent int) (any, bool) {
	var strip bool
	switch strings.TrimRight(header, " ") {
	case "|":
	case "|-":
		strip = true
	default:
		return nil, false // keep chomping, indentation indicators, comments
	}
	// Content indentation: that of the first non-blank line.
	start := p.i
	j := start
	for j < len(p.lines) && p.lines[j].blank {
		if p.lines[j].indent > 0 {
			return nil, false // leading lines of spaces: subtle rules
		}
		j++
	}
	if j >= len(p.lines) || p.lines[j].indent <= parentIndent {
		return nil, false // empty block scalar: subtle rules
	}
	indent := p.lines[j].indent
	var b strings.Builder
	lastContent := -1
	end := start
	for end < len(p.lines) {
		l := p.lines[end]
		if l.blank {
			if l.indent > indent {
				return nil, false
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
		return nil, false // no final line break: chomping differs
	}
	for k := start; k <= lastContent; k++ {
		l := p.lines[k]
		if k > start {
			b.WriteByte('\n')
		}
		if !l.blank {
			b.WriteString(strings.Repeat(" ", l.indent-indent))
			b.WriteString(l.text)
		}
	}
	if !strip {
		b.WriteByte('\n')
	}
	p.i = lastContent + 1
	return b.String(), true
}
