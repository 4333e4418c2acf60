package strategy

import (
	"strings"

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

type fastParser struct {
	src   string
	lines []fastLine
	i     int
	strs  *jsonshare.Strings
}

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
