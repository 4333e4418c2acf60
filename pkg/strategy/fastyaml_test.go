package strategy

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/installstrategy/installstrategy/internal/kubevirtdata"
	"github.com/installstrategy/installstrategy/pkg/jsonshare"
)

// TestFastPathMatchesYAMLOnRealStrategies: every document of the real
// KubeVirt strategies that the fast path accepts gives exactly what the
// full YAML parser gives, and the fast path accepts all of them.
func TestFastPathMatchesYAMLOnRealStrategies(t *testing.T) {
	for _, v := range kubevirtdata.Versions {
		docs := splitDocuments(kubevirtdata.Read(t, v, "manifests.yaml"))
		fast := 0
		for _, d := range docs {
			want, _, err := decodeYAML(d, new(jsonshare.Strings))
			if err != nil {
				t.Fatalf("%s document %d: %v", v, d.Index, err)
			}
			got, ok := fastParse(d.Data, new(jsonshare.Strings))
			if !ok {
				continue
			}
			fast++
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s document %d (line %d): the fast path and the YAML parser disagree", v, d.Index, d.Line)
			}
		}
		t.Logf("%s: fast path took %d of %d documents", v, fast, len(docs))
		// The codec benchmark's speed rests on this (#13): one large
		// document left to yaml.v3 costs as much as dozens taken here.
		if fast < len(docs) {
			t.Errorf("%s: fast path took only %d of %d documents", v, fast, len(docs))
		}
	}
}

func TestFastPathCases(t *testing.T) {
	cases := []struct {
		text string
		ok   bool
	}{
		{"a: 1\nb:\n  c: x\n  d:\n  - 1\n  - e: f\n    g: h\n", true},
		{"a: |\n  x\n\n  y\nb: |-\n  z\n", true},
		{"a: \"q\\n\\u00e9\"\nb: 'it''s'\n", true},
		{"a: {}\nb: []\nc:\nd: null\n", true},
		{"a: --flag\nb: -1\nc: 1.5e3\nd: 0x10\n", false},
		{"a: b # comment\n", false},
		{"a: &x 1\n", false},
		{"a: >\n  folded\n", false},
		{"a: plain\n  continued\n\n  para\nb:\n  own line\n", true},
		{"a: x\n  - y\n", true}, // a continuation line: "x - y"
		{"a: x\n  & *y ? [z\n", true},
		{"a: x\n  # not a comment\n", false},
		{"a: \"one\n  two  \n\n   three\"\nb: 'it''s\n  multi\n\n\n  line'\n", true},
		{"a: \"joined\\\n  here \\\n\n  \\ kept\\tx\"\n", true},
		{"- \"x\n  y\"\n- 'p\n  ''q'''\n", true},
		{"a: \"\\N\\_\\L\\P\\'\\x41\\u00e9\\U0001F600\"\n", true},
		{"a: \"x\ny\"\n", false},       // continuation not indented
		{"a: \"x\n  y\" # c\n", false}, // comment after the close
		{"a: \"x\n  y\"\n  b: c\n", false},
		{"a: \"x\n", false},
		{"a: \"x\\/y\"\n", false},    // yaml.v3 knows no "\/" escape
		{"a: \"x\u0085y\"\n", false}, // NEL is a line break to yaml.v3
		{"a: x\u2028 y\n", false},    // so is LS
		{"\"k\n  ey\": v\n", false},  // multi-line keys stay with the full parser
		{"a: 1\na: 2\n", false},
		{"a:\tb\n", false},
		{"- - x\n", false},
		{"a: 2024-01-01\n", false},
		{"... 0:\n", false}, // a document end marker to yaml.v3
		{"a:\n--- x\n", false},
		{"a: \"x\n... y\"\n", false},
	}
	for _, c := range cases {
		got, ok := fastParse([]byte(c.text), new(jsonshare.Strings))
		if ok != c.ok {
			t.Errorf("%q: ok = %v, want %v", c.text, ok, c.ok)
			continue
		}
		if !ok {
			continue
		}
		want, _, err := decodeYAML(document{Index: 1, Line: 1, Data: []byte(c.text)}, new(jsonshare.Strings))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: fast %#v, yaml %#v (%v)", c.text, got, want, err)
		}
	}
}

// FuzzFastPath: wherever the fast path accepts a document, the full YAML
// parser accepts it too and agrees on every value.
func FuzzFastPath(f *testing.F) {
	for _, seed := range []string{
		"a: 1\nb:\n  c: x\n  d:\n  - 1\n  - e: f\n    g: h\n",
		"a: |\n  x\n\n  y\nb: |-\n  z\n",
		"a: \"q\\n\"\nb: 'it''s'\nc: {}\nd: []\n",
		"k:\n- name: x\n  args:\n  - --v=2\n  image: r/i:v1\n",
		"- a\n-\n  b: c\n- |\n  lit\n",
		"a: \"one\\\n  two \\t\n\n  three\"\nb: 'x''\n  y'\nc: p\n  - q\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := fastParse(data, new(jsonshare.Strings))
		if !ok {
			return
		}
		want, _, err := decodeYAML(document{Index: 1, Line: 1, Data: data}, new(jsonshare.Strings))
		if err != nil {
			t.Fatalf("fast path accepted what the YAML parser rejects (%v):\n%q", err, data)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("disagreement on %q:\nfast %#v\nyaml %#v", data, got, want)
		}
	})
}

// TestFastPathQuotedAndFoldedScalars compares the fast path with yaml.v3 on
// many generated scalars over several lines (quoted in both styles, and
// plain), built from the characters that matter to folding and escaping,
// wherever the fast path accepts them. Deterministic, so it runs in every
// go test; FuzzFastPath explores beyond it.
func TestFastPathQuotedAndFoldedScalars(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 1))
	pieces := []string{"a", "b", " ", "  ", "\n", "\n  ", "\n    ", "\n\n  ", "\\", "\\\\", "\\n", "\\x4", "\\u00e9", "\\ ", "\\'", "\\/", "\"", "'", "''", "-", "- ", "#", " #", ":", ": ", "é", "...", "---", "&", "*", "[", "{"}
	accepted := 0
	for i := 0; i < 20000; i++ {
		var b strings.Builder
		for n := rng.IntN(12); n >= 0; n-- {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		body := b.String()
		var doc string
		switch rng.IntN(6) {
		case 0:
			doc = "k: \"" + body + "\"\nz: 1\n"
		case 1:
			doc = "k: '" + body + "'\nz: 1\n"
		case 2:
			doc = "l:\n- \"" + body + "\"\n- x\n"
		case 3:
			doc = "m:\n  k: '" + body + "'\n  z: 1\n"
		case 4:
			doc = "l:\n- p" + body + "\n- k: \"" + body + "\"\n"
		default:
			doc = "k: p" + body + "\nz: 1\n"
		}
		got, ok := fastParse([]byte(doc), new(jsonshare.Strings))
		if !ok {
			continue
		}
		accepted++
		want, _, err := decodeYAML(document{Index: 1, Line: 1, Data: []byte(doc)}, new(jsonshare.Strings))
		if err != nil {
			t.Fatalf("fast path accepted what yaml.v3 rejects (%v): %q", err, doc)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("disagreement on %q:\nfast %#v\nyaml %#v", doc, got, want)
		}
	}
	t.Logf("fast path took %d of 20000 generated documents", accepted)
	if accepted < 2000 {
		t.Errorf("only %d generated documents took the fast path: the generator tests little", accepted)
	}
}
