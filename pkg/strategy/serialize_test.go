package strategy

import (
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
		out, err := s.Serialize()
		if err != nil {
			t.Fatalf("%q: serialise: %v", value, err)
		}
		back, _, err := Parse(out, ParseOptions{})
		if err != nil {
			t.Fatalf("%q: serialised text does not parse: %v\n%s", value, err, out)
		}
		got, _, _ := unstructured.NestedString(back.Objects[0].Object, "data", "k")
		if got != value {
			t.Errorf("%q came back as %q", value, got)
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
