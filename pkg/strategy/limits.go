package strategy

import (
	"errors"
	"fmt"
)

// Bounds of what Parse and ReadDocuments read, so that any text, however
// hostile, costs bounded memory and time. Each is far above what a real
// strategy needs (KubeVirt v1.9.0: 249 documents, nesting below 40
// levels, no anchors) and far below what would exhaust a process.
const (
	// maxDocuments is the most documents a text may hold.
	maxDocuments = 10000
	// defaultMaxErrors is how many errors are listed when
	// ParseOptions.MaxErrors is 0; the rest are counted ("and N more").
	defaultMaxErrors = 20
	// maxDepth is the deepest nesting of maps and lists in one document.
	maxDepth = 512
	// maxAliasValues is the most values one document's YAML aliases may
	// expand to (a "billion laughs" document is refused).
	maxAliasValues = 100000
)

// ErrTooManyDocuments is wrapped by the error of a text with more than
// maxDocuments documents.
var ErrTooManyDocuments = fmt.Errorf("more than %d documents", maxDocuments)

// maxErrors is opts.MaxErrors or its default.
func (opts ParseOptions) maxErrors() int {
	if opts.MaxErrors <= 0 {
		return defaultMaxErrors
	}
	return opts.MaxErrors
}

// errorList keeps the first errors and counts the others, so a text of a
// million bad documents costs a short message.
type errorList struct {
	max    int
	errs   []error
	failed int
}

func (l *errorList) add(err error) {
	l.failed++
	if len(l.errs) < l.max {
		l.errs = append(l.errs, err)
	}
}

func (l *errorList) err() error {
	if l.failed == 0 {
		return nil
	}
	errs := l.errs
	if n := l.failed - len(l.errs); n > 0 {
		errs = append(errs[:len(errs):len(errs)], fmt.Errorf("%d more documents with errors not shown", n))
	}
	return errors.Join(errs...)
}
