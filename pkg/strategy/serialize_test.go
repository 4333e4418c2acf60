package strategy

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Strings that kubectl apply takes but YAML's reader refuses raw (DEL, C1
// controls, U+FFFE) or reads as a line break (NEL) serialise escaped and read back to the same value.
func TestSerializeEscapesWhatYAMLCannotCarry(t *testing.T) {
	for _, value := range []string{"x\u007fy", "x\u0080y\u009fz", "a\ufffeb\uffff", "nel\u0085 tab\t", "ls\u2028ps\u2029", "ok"} {
		in := "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: " + quoteYAML(value) + "\n"
		s, _, err := Parse([]byte(in), ParseOptions{})
		if err != nil {
			t.Fatalf("%q: parse: %v", value, err)
		}
		block, err := s.Serialize()
		if err != nil {
			t.Fatalf("%q: serialise: %v", value, err)
		}
		var compact bytes.Buffer
		if _, err := s.SerializeCompactTo(&compact); err != nil {
			t.Fatalf("%q: serialise compact: %v", value, err)
		}
		for _, out := range [][]byte{block, compact.Bytes()} {
			back, _, err := Parse(out, ParseOptions{})
			if err != nil {
				t.Fatalf("%q: serialised text does not parse: %v\n%s", value, err, out)
			}
			got, _, _ := unstructured.NestedString(back.Objects[0].Object, "data", "k")
			if got != value {
				t.Errorf("%q came back as %q from\n%s", value, got, out)
			}
		}
	}
}

// quoteYAML writes v as a double-quoted YAML scalar with every control or
// non-ASCII character escaped.
func quoteYAML(v string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range v {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r >= 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// failAfter accepts n bytes, then fails every write.
type failAfter struct{ n int }

var errFull = errors.New("full")

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		n := f.n
		f.n = 0
		return n, errFull
	}
	f.n -= len(p)
	return len(p), nil
}

// SerializeTo writes Serialize's text across batches of objects (more
// objects than one batch holds, out of kind order), says how much it wrote,
// and stops at the writer's error with the count up to it.
func TestSerializeToStreamsTheText(t *testing.T) {
	var in strings.Builder
	for i := range 50 {
		fmt.Fprintf(&in, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%02d\n  namespace: ns\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: sa-%02d\n  namespace: ns\n", i, i)
	}
	s, _, err := Parse([]byte(in.String()), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := s.Serialize()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(want), "---\napiVersion: v1\nkind: ServiceAccount\n") || strings.Count(string(want), "---\n") != 100 {
		t.Fatalf("Serialize: not 100 documents, ServiceAccounts first:\n%.300s", want)
	}
	var buf bytes.Buffer
	n, err := s.SerializeTo(&buf)
	if err != nil || n != int64(len(want)) || !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("SerializeTo: %d bytes, %v; want Serialize's %d bytes", n, err, len(want))
	}
	w := &failAfter{n: len(want) / 2}
	if n, err := s.SerializeTo(w); !errors.Is(err, errFull) || n != int64(len(want)/2) {
		t.Fatalf("SerializeTo into a writer that fails halfway: %d bytes, %v; want %d and its error", n, err, len(want)/2)
	}
}
