package codec

import (
	"bytes"
	"encoding/base64"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// FuzzDecode feeds arbitrary bytes to every decoding path: as the
// base64 data of a gzip+base64 ConfigMap, as raw gzip (base64-encoded for
// it), as a legacy plain ConfigMap, and as a whole input file. Nothing may
// panic, the size limit must hold, and whatever decodes and parses must
// survive an encode/decode round trip unchanged.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(smallText))
	f.Add(gz([]byte(smallText)))
	f.Add([]byte(base64.StdEncoding.EncodeToString(gz([]byte(smallText)))))
	f.Add([]byte("H4sIAAAAAAAA/+z9"))
	f.Add([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, labels: {kubevirt.io/install-strategy: ''}}\ndata: {manifests: abc}\n"))
	f.Add([]byte(`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"}}]}`))
	f.Add([]byte("---\na: &a [*a]\n"))
	const limit = 1 << 20
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, cm := range []*corev1.ConfigMap{
			cmWith(string(data), kvEnc),
			cmWith(base64.StdEncoding.EncodeToString(data), kvEnc),
			cmWith(string(data), nil),
		} {
			text, _, err := Decode(cm, DecodeOptions{MaxDecodedBytes: limit})
			if err != nil {
				continue
			}
			if len(text) > limit {
				t.Fatalf("decoded %d bytes past the limit", len(text))
			}
			roundTrip(t, text)
		}
		if in, err := ParseInput("fuzz", data, strategy.ParseOptions{}); err == nil {
			_, _ = LoadInput(in, DecodeOptions{MaxDecodedBytes: limit}, strategy.ParseOptions{})
		}
	})
}

// roundTrip checks that a text that parses serialises, encodes and decodes
// back to the same serialised text.
func roundTrip(t *testing.T, text []byte) {
	s, _, err := strategy.Parse(text, strategy.ParseOptions{})
	if err != nil {
		return
	}
	canonical, err := s.Serialize()
	if err != nil {
		t.Fatalf("parsed but does not serialise: %v", err)
	}
	cm, err := EncodeText(canonical, EncodeOptions{Identity: strategy.Identity{Version: "v"}})
	if err != nil {
		t.Fatal(err)
	}
	back, _, err := Decode(cm, DecodeOptions{})
	if err != nil {
		t.Fatalf("own encoding does not decode: %v", err)
	}
	if !bytes.Equal(back, canonical) {
		t.Fatal("encode/decode changed the text")
	}
	s2, _, err := strategy.Parse(back, strategy.ParseOptions{})
	if err != nil {
		t.Fatalf("canonical text does not parse: %v\n%s", err, back)
	}
	if len(s2.Objects) != len(s.Objects) {
		t.Fatalf("objects %d -> %d", len(s.Objects), len(s2.Objects))
	}
}
