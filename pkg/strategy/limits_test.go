package strategy

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/installstrategy/installstrategy/internal/alloctest"
)

// Finding 5 of issue 39: one error per document without limit made a text
// of a few million "kind: A" documents cost gigabytes and a status message
// no API server accepts. Each route to "many bad objects" lists at most
// defaultMaxErrors errors and counts the rest.
func TestParseErrorsAreCapped(t *testing.T) {
	list := func(n int) []byte {
		var b strings.Builder
		b.WriteString("apiVersion: v1\nkind: List\nitems:\n")
		for range n {
			b.WriteString("- {kind: A}\n")
		}
		return []byte(b.String())
	}
	for name, text := range map[string][]byte{
		"documents without apiVersion":  bytes.Repeat([]byte("---\nkind: A\n"), maxDocuments),
		"documents that are not YAML":   bytes.Repeat([]byte("---\n[\n"), maxDocuments),
		"documents that are no objects": bytes.Repeat([]byte("---\n- x\n"), maxDocuments),
		"list items without apiVersion": list(50000),
	} {
		t.Run(name, func(t *testing.T) {
			var err error
			_, _, err = Parse(text, ParseOptions{})
			if err == nil {
				t.Fatal("parsed")
			}
			msg := err.Error()
			if lines := strings.Count(msg, "\n") + 1; lines > defaultMaxErrors+1 {
				t.Errorf("%d lines of errors, want at most %d and a count", lines, defaultMaxErrors+1)
			}
			if !strings.Contains(msg, "more documents with errors not shown") {
				t.Errorf("error does not count the errors not shown: ...%s", msg[max(0, len(msg)-200):])
			}
		})
	}
}

// More than maxDocuments documents are refused before any is decoded: the
// cost is a scan of the text, not one object per document.
func TestParseRefusesTooManyDocuments(t *testing.T) {
	text := bytes.Repeat([]byte("---\nkind: A\n"), 5<<20/12) // 5 MiB, 436906 documents
	var err error
	n := alloctest.Allocated(func() { _, _, err = Parse(text, ParseOptions{}) })
	if !errors.Is(err, ErrTooManyDocuments) {
		t.Fatalf("err = %v, want ErrTooManyDocuments", err)
	}
	if n > 16<<20 {
		t.Errorf("refusing %d bytes allocated %d bytes, want at most 16 MiB", len(text), n)
	}
	// The limit itself is accepted (documents of valid objects).
	ok := strings.Repeat("---\napiVersion: v1\nkind: A\nmetadata: {name: a}\n", maxDocuments)
	if _, err := ReadDocuments([]byte(ok), ParseOptions{}); err != nil {
		t.Fatalf("%d documents: %v", maxDocuments, err)
	}
}

// aliasBomb is a document whose aliases expand to about 10^levels values,
// padded with a comment so the converter's node budget (16 per byte)
// would let it through: only maxAliasValues stops it.
func aliasBomb(levels int) []byte {
	var b bytes.Buffer
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
	b.WriteString("a0: &a0 [x,x,x,x,x,x,x,x,x,x]\n")
	for i := 1; i < levels; i++ {
		p := fmt.Sprintf("*a%d", i-1)
		fmt.Fprintf(&b, "a%d: &a%d [%s]\n", i, i, strings.Repeat(p+",", 9)+p)
	}
	b.WriteString("# " + strings.Repeat("p", 64<<10) + "\n")
	return b.Bytes()
}

func TestParseRefusesAliasBombs(t *testing.T) {
	for name, text := range map[string][]byte{
		"sequences": aliasBomb(6), // 1.1 million values, within 16 per byte of 64 KiB
		"merge keys": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n" +
			"a: &a {" + keys(60000) + "}\nb: {<<: *a}\nc: {<<: *a}\n"),
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := Parse(text, ParseOptions{})
			if err == nil || !strings.Contains(err.Error(), "alias") {
				t.Fatalf("err = %v, want an alias bomb refused", err)
			}
		})
	}
	// Aliases within the bound still work.
	if _, _, err := Parse([]byte("---\napiVersion: v1\nkind: Secret\nmetadata: &m {name: x}\nx: *m\ny: {<<: *m}\n"), ParseOptions{}); err != nil {
		t.Fatal(err)
	}
}

func keys(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "k%d: v,", i)
	}
	return b.String()
}

func TestParseRefusesDeepNesting(t *testing.T) {
	for name, text := range map[string]string{
		"flow sequences": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: " + strings.Repeat("[", maxDepth+10) + strings.Repeat("]", maxDepth+10) + "\n",
		"flow mappings":  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: " + strings.Repeat("{a: ", maxDepth+10) + "x" + strings.Repeat("}", maxDepth+10) + "\n",
		"through an alias": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\nd: &d " + strings.Repeat("[", maxDepth-5) + strings.Repeat("]", maxDepth-5) +
			"\ne: " + strings.Repeat("[", 10) + "*d" + strings.Repeat("]", 10) + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := Parse([]byte(text), ParseOptions{})
			if err == nil || !strings.Contains(err.Error(), "nested deeper") {
				t.Fatalf("err = %v, want nesting refused", err)
			}
		})
	}
	ok := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: " + strings.Repeat("[", 100) + strings.Repeat("]", 100) + "\n"
	if _, _, err := Parse([]byte(ok), ParseOptions{}); err != nil {
		t.Fatalf("100 levels: %v", err)
	}
}
