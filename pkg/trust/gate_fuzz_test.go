package trust_test

import (
	"encoding/base64"
	"testing"

	"github.com/installstrategy/installstrategy/internal/alloctest"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// FuzzGate feeds arbitrary bytes to the gate as a ConfigMap's data (raw,
// as base64 of gzip data, as a plain text), unsigned, signed by an
// untrusted key and pinned to their own digest (so the decode and the
// parse run): nothing panics, nothing untrusted opens, and no input
// allocates more than alloctest.MaxPerInput.
func FuzzGate(f *testing.F) {
	f.Add([]byte(goodText))
	f.Add([]byte("---\nkind: A\n---\nkind: A\n"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Add([]byte("H4sIAAAAAAAA/+z9"))
	key, _ := trust.GenerateKey()
	var ring trust.KeyRing
	_ = ring.Add("release", key.Public())
	f.Fuzz(func(t *testing.T, data []byte) {
		cms := []struct {
			form string
			data string
		}{{"raw", string(data)}, {"base64", base64.StdEncoding.EncodeToString(data)}}
		for _, c := range cms {
			for _, native := range []bool{false, true} {
				cm := kubevirtCM(t, nil)
				if native {
					cm = nativeCM(t, data)
				}
				cm.Data[codec.ManifestsKey] = c.data
				var err error
				n := alloctest.Allocated(func() { _, err = trust.Gate{Policy: trust.Policy{Keys: &ring}}.Open(cm) })
				if err == nil {
					t.Fatalf("%s: opened an unsigned ConfigMap", c.form)
				}
				if n > alloctest.MaxPerInput {
					t.Fatalf("%s: refusal allocated %d bytes", c.form, n)
				}
				// Pinned: whatever decodes is parsed, within the bound.
				text, _, derr := codec.Decode(cm, codec.DecodeOptions{})
				if derr != nil {
					continue
				}
				n = alloctest.Allocated(func() { _, _ = trust.Gate{Policy: trust.Policy{Pinned: codec.Digest(text)}}.Open(cm) })
				if n > alloctest.MaxPerInput {
					t.Fatalf("%s: pinned input allocated %d bytes", c.form, n)
				}
			}
		}
	})
}
