package strategy

import (
	"bytes"
	"testing"

	"github.com/installstrategy/installstrategy/internal/alloctest"
)

// FuzzParse: Parse never panics, no text makes it allocate more than
// 256 MB (issue 39's bound), and a text it accepts serialises to a fixed
// point (parse ∘ serialise is idempotent).
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: a\n",
		"--- {\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"s\"}}\n",
		"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  k: |\n    ---\n    x\n",
		"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Secret\n  metadata: {name: s}\n",
		"---\nbase: &b {apiVersion: v1}\n---\n<<: *b\nkind: Secret\nmetadata: {name: x}\n",
		"...\n---\n# comment\n---\n",
		"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {k: \"\\x7f\\u2028\\N\"}\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		var s *Strategy
		var err error
		if n := alloctest.Allocated(func() { s, _, err = Parse(text, ParseOptions{}) }); n > alloctest.MaxPerInput {
			t.Fatalf("parsing %d bytes allocated %d bytes", len(text), n)
		}
		if err != nil {
			return
		}
		out, err := s.Serialize()
		if err != nil {
			t.Fatalf("accepted but does not serialise: %v", err)
		}
		s2, _, err := Parse(out, ParseOptions{})
		if err != nil {
			t.Fatalf("serialised text does not parse: %v\n%s", err, out)
		}
		out2, err := s2.Serialize()
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("not a fixed point: %v\n%s\n---- vs ----\n%s", err, out, out2)
		}
	})
}
