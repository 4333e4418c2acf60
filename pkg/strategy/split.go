package strategy

import "bytes"

// document is one YAML or JSON document of a manifests text.
type document struct {
	// Index counts the non-empty documents of the text, from 1.
	Index int
	// Line is the 1-based line where the document's content starts.
	Line int
	// Offset is the byte offset where the document's content starts.
	Offset int
	Data   []byte
}

// splitDocuments cuts a manifests text into documents. A document boundary
// is a line that is exactly "---" (optionally followed by white space, a
// comment, or content that then starts the next document) or "..." (end of
// document). By the YAML spec such a line cannot occur inside a block or
// quoted scalar, so unlike a split on the substring "---" this never cuts a
// value in two. Documents holding only white space and comments are dropped.
func splitDocuments(text []byte) []document {
	docs, _ := splitDocumentsMax(text, -1)
	return docs
}

// splitDocumentsMax is splitDocuments that stops after max documents (no
// limit when max < 0) and reports whether the text holds more.
func splitDocumentsMax(text []byte, max int) ([]document, bool) {
	var docs []document
	more := false
	start, startLine := 0, 1
	line := 1
	flush := func(end int) {
		if end > start && !isBlank(text[start:end]) {
			if max >= 0 && len(docs) >= max {
				more = true
				return
			}
			docs = append(docs, document{Index: len(docs) + 1, Line: startLine, Offset: start, Data: text[start:end]})
		}
	}
	for pos := 0; pos < len(text) && !more; {
		nl := bytes.IndexByte(text[pos:], '\n')
		end := len(text)
		next := len(text)
		if nl >= 0 {
			end = pos + nl
			next = end + 1
		}
		l := bytes.TrimRight(text[pos:end], "\r")
		switch {
		case isMarker(l, "---"):
			flush(pos)
			rest := bytes.TrimLeft(l[3:], " \t")
			if len(rest) > 0 && rest[0] != '#' {
				// "--- content": the content starts the next document.
				start, startLine = pos+(len(l)-len(rest)), line
			} else {
				start, startLine = next, line+1
			}
		case isMarker(l, "..."):
			flush(pos)
			start, startLine = next, line+1
		}
		pos = next
		line++
	}
	if !more {
		flush(len(text))
	}
	return docs, more
}

func isMarker(line []byte, marker string) bool {
	if !bytes.HasPrefix(line, []byte(marker)) {
		return false
	}
	return len(line) == 3 || line[3] == ' ' || line[3] == '\t'
}

// isBlank reports whether data holds only white space and comment lines.
func isBlank(data []byte) bool {
	for len(data) > 0 {
		nl := bytes.IndexByte(data, '\n')
		l := data
		if nl >= 0 {
			l, data = data[:nl], data[nl+1:]
		} else {
			data = nil
		}
		l = bytes.TrimLeft(l, " \t\r")
		if len(l) > 0 && l[0] != '#' {
			return false
		}
	}
	return true
}
