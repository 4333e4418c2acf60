package trust_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/internal/alloctest"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// bombText is issue 39's input: 60 MiB of "---\nkind: A\n", which gzips
// to about 120 KB.
var bombText = bytes.Repeat([]byte("---\nkind: A\n"), 60<<20/12)

func gzipBase64(t testing.TB, text []byte) string {
	var b bytes.Buffer
	w, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if _, err := w.Write(text); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

// kubevirtCM is a KubeVirt-form strategy ConfigMap (no digest recorded).
func kubevirtCM(t testing.TB, text []byte) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns",
			Labels:      map[string]string{metakeys.KubeVirtStrategyLabel: ""},
			Annotations: map[string]string{metakeys.KubeVirtEncodingAnnotation: "", metakeys.KubeVirtVersionAnnotation: "v1"}},
		Data: map[string]string{codec.ManifestsKey: gzipBase64(t, text)},
	}
}

// nativeCM is a native-form ConfigMap recording the text's digest.
func nativeCM(t testing.TB, text []byte) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns",
			Labels: map[string]string{metakeys.StrategyLabel: ""},
			Annotations: map[string]string{metakeys.EncodingAnnotation: codec.EncodingGzipBase64, metakeys.VersionAnnotation: "v1",
				metakeys.DigestAnnotation: codec.Digest(text)}},
		Data: map[string]string{codec.ManifestsKey: gzipBase64(t, text)},
	}
}

const goodText = "---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: a\n  namespace: ns\n"

// Finding 5 of issue 39: an untrusted ConfigMap was decoded and parsed
// before its trust was decided (5 GB for 160 KB). Through the gate, one
// that nobody vouches for is refused from its metadata, before decoding.
func TestGateRefusesBeforeDecoding(t *testing.T) {
	key, _ := trust.GenerateKey()
	other, _ := trust.GenerateKey()
	var ring trust.KeyRing
	if err := ring.Add("release", key.Public()); err != nil {
		t.Fatal(err)
	}
	signedByOther := nativeCM(t, bombText)
	if err := trust.Sign(signedByOther.Annotations, codec.Digest(bombText), other); err != nil {
		t.Fatal(err)
	}
	lying := nativeCM(t, []byte(goodText)) // a signed digest, another text
	if err := trust.Sign(lying.Annotations, codec.Digest([]byte(goodText)), key); err != nil {
		t.Fatal(err)
	}
	lying.Data = nativeCM(t, bombText).Data
	chunkedPinnedElsewhere := nativeCM(t, bombText)
	chunkedPinnedElsewhere.Annotations[metakeys.ChunksAnnotation] = `[{"name":"c","size":1,"digest":"sha256:00"}]`
	for name, tc := range map[string]struct {
		cm     *corev1.ConfigMap
		policy trust.Policy
		// decodes: the policy needs the text's digest, so the bounded
		// decode runs (never the parse).
		decodes bool
	}{
		"kubevirt form, unsigned, nothing pinned":    {cm: kubevirtCM(t, bombText), policy: trust.Policy{Keys: &ring}},
		"native form, unsigned, nothing pinned":      {cm: nativeCM(t, bombText), policy: trust.Policy{Keys: &ring}},
		"native form, signed by an untrusted key":    {cm: signedByOther, policy: trust.Policy{Keys: &ring}},
		"native form, another pinned digest":         {cm: chunkedPinnedElsewhere, policy: trust.Policy{Keys: &ring, Pinned: codec.Digest([]byte(goodText))}},
		"kubevirt form, another pinned digest":       {cm: kubevirtCM(t, bombText), policy: trust.Policy{Keys: &ring, Pinned: codec.Digest([]byte(goodText))}, decodes: true},
		"kubevirt form, signed by an untrusted key":  {cm: withSignature(kubevirtCM(t, bombText), other), policy: trust.Policy{Keys: &ring}, decodes: true},
		"native form, signed digest of another text": {cm: lying, policy: trust.Policy{Keys: &ring}, decodes: true},
	} {
		t.Run(name, func(t *testing.T) {
			gate := trust.Gate{Policy: tc.policy}
			var err error
			n := alloctest.Allocated(func() { _, err = gate.Open(tc.cm) })
			if err == nil {
				t.Fatal("opened")
			}
			if !errors.As(err, new(*trust.UntrustedError)) && !errors.As(err, new(*trust.RefusedError)) {
				t.Fatalf("err = %T %v, want an *UntrustedError or *RefusedError", err, err)
			}
			if strings.Contains(err.Error(), "no apiVersion") {
				t.Fatalf("the text was parsed: %v", err)
			}
			bound := uint64(1 << 20)
			if tc.decodes {
				bound = 2*uint64(len(bombText)) + 8<<20 // the text and the decoder, no parse
			}
			if n > bound {
				t.Errorf("refusal allocated %d bytes, want at most %d", n, bound)
			}
			if len(err.Error()) > 4096 {
				t.Errorf("refusal message is %d bytes", len(err.Error()))
			}
		})
	}
}

func withSignature(cm *corev1.ConfigMap, s *trust.Signer) *corev1.ConfigMap {
	sig, id, _ := s.SignDigest(codec.Digest(bombText))
	cm.Annotations[metakeys.SignatureAnnotation] = sig
	cm.Annotations[metakeys.SignatureKeyAnnotation] = id
	return cm
}

// What is vouched for opens, says who vouched, and is parsed.
func TestGateOpensWhatIsVouchedFor(t *testing.T) {
	key, _ := trust.GenerateKey()
	var ring trust.KeyRing
	if err := ring.Add("release", key.Public()); err != nil {
		t.Fatal(err)
	}
	text := []byte(goodText)
	signed := nativeCM(t, text)
	if err := trust.Sign(signed.Annotations, codec.Digest(text), key); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		cm     *corev1.ConfigMap
		policy trust.Policy
		want   string
	}{
		"signed":                {signed, trust.Policy{Keys: &ring, Expect: &trust.Expect{}}, "signed by release"},
		"pinned, native form":   {nativeCM(t, text), trust.Policy{Keys: &ring, Pinned: codec.Digest(text)}, "pinned digest"},
		"pinned, kubevirt form": {kubevirtCM(t, text), trust.Policy{Pinned: codec.Digest(text)}, "pinned digest"},
	} {
		t.Run(name, func(t *testing.T) {
			v, err := trust.Gate{Policy: tc.policy}.Open(tc.cm)
			if err != nil {
				t.Fatal(err)
			}
			if v.VerifiedBy != tc.want || v.Digest != codec.Digest(text) || len(v.Strategy.Objects) != 1 || v.Strategy.Identity.Version != "v1" {
				t.Fatalf("verified %q digest %s objects %d identity %+v", v.VerifiedBy, v.Digest, len(v.Strategy.Objects), v.Strategy.Identity)
			}
		})
	}
	// A trusted text that does not parse is a parse refusal, after trust.
	bad := kubevirtCM(t, bombText)
	_, err := trust.Gate{Policy: trust.Policy{Pinned: codec.Digest(bombText)}}.Open(bad)
	var refused *trust.RefusedError
	if !errors.As(err, &refused) || refused.Step != "parse" || len(err.Error()) > 8192 {
		t.Fatalf("err = %v, want a short parse refusal", err)
	}
	// More than one ConfigMap can hold is refused before anything else.
	big := kubevirtCM(t, text)
	big.Data[codec.ManifestsKey] = strings.Repeat("A", codec.ObjectSizeLimit+4)
	if _, err := (trust.Gate{Policy: trust.Policy{Pinned: codec.Digest(text)}}).Open(big); !errors.As(err, &refused) || refused.Step != "size" {
		t.Fatalf("err = %v, want a size refusal", err)
	}
}

// Issue 39, finding 2: a signed statement vouches only for the product
// the policy binds ("" included, with ProductBound) and for the identity
// the ConfigMap claims; both are refused from the metadata, before the
// text is decoded, and the statement that vouched is returned.
func TestGateBindsProductAndClaimedIdentity(t *testing.T) {
	key, _ := trust.GenerateKey()
	var ring trust.KeyRing
	if err := ring.Add("release", key.Public()); err != nil {
		t.Fatal(err)
	}
	signed := func(product string, change func(map[string]string)) *corev1.ConfigMap {
		cm := nativeCM(t, []byte(goodText))
		if product != "" {
			cm.Annotations[metakeys.ProductAnnotation] = product
		}
		if err := trust.Sign(cm.Annotations, codec.Digest([]byte(goodText)), key); err != nil {
			t.Fatal(err)
		}
		if change != nil {
			change(cm.Annotations)
		}
		return cm
	}
	policy := func(product string, bound bool) trust.Policy {
		return trust.Policy{Keys: &ring, Expect: &trust.Expect{Product: product, ProductBound: bound}}
	}
	for name, tc := range map[string]struct {
		cm     *corev1.ConfigMap
		policy trust.Policy
		want   string
	}{
		"another product":                         {signed("other", nil), policy("sample", true), `product "other", want "sample"`},
		"a product where none was deployed":       {signed("other", nil), policy("", true), `product "other", want ""`},
		"no product where one is bound":           {signed("", nil), policy("sample", true), `product "", want "sample"`},
		"another identifier than signed":          {signed("sample", func(a map[string]string) { a[metakeys.IdentifierAnnotation] = "x" }), policy("sample", true), "the configmap claims"},
		"another version than signed":             {signed("sample", func(a map[string]string) { a[metakeys.VersionAnnotation] = "v9" }), policy("", false), "the configmap claims"},
		"another registry than signed, unchunked": {signed("sample", func(a map[string]string) { a[metakeys.RegistryAnnotation] = "evil.example" }), policy("", false), "the configmap claims"},
	} {
		t.Run(name, func(t *testing.T) {
			g := trust.Gate{Policy: tc.policy}
			if err := g.Admit(&tc.cm.ObjectMeta); err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, trust.ErrIdentityMismatch) {
				t.Errorf("Admit: %v, want %q", err, tc.want)
			}
			if _, err := g.Open(tc.cm); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open: %v, want %q", err, tc.want)
			}
		})
	}
	for _, p := range []trust.Policy{policy("sample", true), policy("sample", false), policy("", false)} {
		v, err := trust.Gate{Policy: p}.Open(signed("sample", nil))
		if err != nil || v.Statement == nil || v.Statement.Product != "sample" || v.VerifiedBy != "signed by release" {
			t.Errorf("%+v: %v %+v", p.Expect, err, v)
		}
	}
	v, err := trust.Gate{Policy: trust.Policy{Keys: &ring, Pinned: codec.Digest([]byte(goodText)), Expect: &trust.Expect{Product: "sample", ProductBound: true}}}.Open(nativeCM(t, []byte(goodText)))
	if err != nil || v.Statement != nil || v.VerifiedBy != "pinned digest" {
		t.Errorf("pinned: %v %+v", err, v)
	}
}
