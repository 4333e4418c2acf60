package strategy

import (
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/installstrategy/installstrategy/pkg/jsonshare"
)

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
