package codec

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/internal/kubevirtdata"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

func readCM(t *testing.T, version string) *corev1.ConfigMap {
	t.Helper()
	cms, err := ReadConfigMaps(version, kubevirtdata.Read(t, version, "configmap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cms) != 1 {
		t.Fatalf("got %d configmaps", len(cms))
	}
	return cms[0]
}

func TestDecodeRealKubeVirt(t *testing.T) {
	for _, v := range kubevirtdata.Versions {
		t.Run(v, func(t *testing.T) {
			cm := readCM(t, v)
			text, info, err := Decode(cm, DecodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := kubevirtdata.Read(t, v, "manifests.yaml")
			if !bytes.Equal(text, want) {
				t.Fatalf("decoded text differs from KubeVirt's decoded text (%d vs %d bytes)", len(text), len(want))
			}
			if info.Format != FormatKubeVirt || info.Encoding != EncodingGzipBase64 {
				t.Errorf("format/encoding = %s/%s", info.Format, info.Encoding)
			}
			wantID := strategy.Identity{Version: v, Registry: "quay.io/kubevirt", Identifier: kubevirtdata.ID(t, v)}
			if info.Identity != wantID {
				t.Errorf("identity = %+v, want %+v", info.Identity, wantID)
			}
			if info.Headroom() <= 0 || info.Ratio() < 5 {
				t.Errorf("headroom %d ratio %.1f", info.Headroom(), info.Ratio())
			}
		})
	}
}

// TestEncodeKubeVirtIsByteIdentical: encoding KubeVirt's text in the KubeVirt
// form gives KubeVirt's ConfigMap file back byte for byte.
func TestEncodeKubeVirtIsByteIdentical(t *testing.T) {
	for _, v := range kubevirtdata.Versions {
		t.Run(v, func(t *testing.T) {
			text := kubevirtdata.Read(t, v, "manifests.yaml")
			cm, err := EncodeText(text, EncodeOptions{Format: FormatKubeVirt, Namespace: "kubevirt",
				Identity: strategy.Identity{Version: v, Registry: "quay.io/kubevirt", Identifier: kubevirtdata.ID(t, v)}})
			if err != nil {
				t.Fatal(err)
			}
			got, err := MarshalYAML(cm)
			if err != nil {
				t.Fatal(err)
			}
			if want := kubevirtdata.Read(t, v, "configmap.yaml"); !bytes.Equal(got, want) {
				t.Fatalf("encoded ConfigMap differs from KubeVirt's (%d vs %d bytes)", len(got), len(want))
			}
		})
	}
}

// TestRoundTrip: decode → parse → serialise → encode (both forms) → decode
// gives the serialised text, and parsing it gives the same objects. With
// -short (make unit) over the newest release only: each release takes
// seconds per form, and make test runs them all.
func TestRoundTrip(t *testing.T) {
	versions := kubevirtdata.Versions
	if testing.Short() {
		versions = versions[len(versions)-1:]
	}
	for _, v := range versions {
		// Decoded, parsed and serialised once per release; each form
		// below only reads them.
		l, err := LoadConfigMap(v, readCM(t, v), DecodeOptions{}, strategy.ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want, err := l.Strategy.Serialize()
		if err != nil {
			t.Fatal(err)
		}
		for _, form := range []struct {
			f       Format
			compact bool
		}{{FormatKubeVirt, false}, {FormatNative, false}, {FormatNative, true}} {
			f := form.f
			name := v + "/" + string(f)
			if form.compact {
				name += "/compact"
			}
			t.Run(name, func(t *testing.T) {
				cm, err := Encode(l.Strategy, EncodeOptions{Format: f, Namespace: "kubevirt", Compact: form.compact})
				if err != nil {
					t.Fatal(err)
				}
				// Encode streams the text through gzip and sha256: the
				// same ConfigMap as encoding the whole text.
				var text bytes.Buffer
				serialize := l.Strategy.SerializeTo
				if form.compact {
					serialize = l.Strategy.SerializeCompactTo
				}
				if _, err := serialize(&text); err != nil {
					t.Fatal(err)
				}
				whole, err := EncodeText(text.Bytes(), EncodeOptions{Format: f, Namespace: "kubevirt", Identity: l.Strategy.Identity})
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(cm, whole) {
					t.Fatalf("streamed encode differs from the whole text's: annotations %v vs %v, data %d vs %d bytes",
						cm.Annotations, whole.Annotations, len(cm.Data[ManifestsKey]), len(whole.Data[ManifestsKey]))
				}
				y, err := MarshalYAML(cm)
				if err != nil {
					t.Fatal(err)
				}
				cms, err := ReadConfigMaps("encoded", y)
				if err != nil {
					t.Fatal(err)
				}
				l2, err := LoadConfigMap("encoded", cms[0], DecodeOptions{}, strategy.ParseOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(l2.Text, text.Bytes()) {
					t.Fatal("decoded text differs from the encoded one")
				}
				// Whatever the form, the same objects: serialised again
				// (block YAML), the same text.
				if again, err := l2.Strategy.Serialize(); err != nil || !bytes.Equal(again, want) {
					t.Fatalf("the round-tripped strategy serialises differently (%v)", err)
				}
				if len(l2.Warnings) != 0 {
					t.Errorf("a serialised strategy should need no repairs: %v", l2.Warnings)
				}
				if l2.Strategy.Identity != l.Strategy.Identity {
					t.Errorf("identity %+v != %+v", l2.Strategy.Identity, l.Strategy.Identity)
				}
				if f == FormatNative && !l2.Info.DigestVerified {
					t.Error("native digest not verified")
				}
				if len(l2.Strategy.Objects) != len(l.Strategy.Objects) {
					t.Errorf("objects %d != %d", len(l2.Strategy.Objects), len(l.Strategy.Objects))
				}
			})
		}
	}
}

const smallText = `---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: sa
  namespace: ns
`

func gz(data []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(data)
	w.Close()
	return buf.Bytes()
}

func cmWith(manifests string, annotations map[string]string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{Data: map[string]string{ManifestsKey: manifests}}
	cm.Name, cm.Namespace = "s", "ns"
	cm.Annotations = annotations
	return cm
}

var kvEnc = map[string]string{metakeys.KubeVirtEncodingAnnotation: EncodingGzipBase64, metakeys.KubeVirtVersionAnnotation: "v1"}

func TestDecodeErrors(t *testing.T) {
	good := base64.StdEncoding.EncodeToString(gz([]byte(smallText)))
	bomb := base64.StdEncoding.EncodeToString(gz(bytes.Repeat([]byte("a"), 10<<20)))
	native, err := EncodeText([]byte(smallText), EncodeOptions{Identity: strategy.Identity{Version: "v1"}})
	if err != nil {
		t.Fatal(err)
	}
	tampered := native.DeepCopy()
	tampered.Annotations[metakeys.DigestAnnotation] = Digest([]byte("other"))
	noDigest := native.DeepCopy()
	delete(noDigest.Annotations, metakeys.DigestAnnotation)
	noDigest.Labels[metakeys.StrategyLabel] = ""

	cases := []struct {
		name   string
		cm     *corev1.ConfigMap
		limit  int64
		step   string
		offset int64
		want   string
	}{
		{"missing manifests", &corev1.ConfigMap{Data: map[string]string{"x": "y"}}, 0, "configmap", -1, `data has no "manifests" key`},
		{"invalid base64", cmWith(good[:40]+"*"+good[41:], kvEnc), 0, "base64", 40, "invalid base64 at byte offset 40"},
		{"invalid base64 after whitespace", cmWith(good[:10]+"\n  "+good[10:40]+"!"+good[41:], kvEnc), 0, "base64", 43, "byte offset 43"},
		{"not gzip", cmWith(base64.StdEncoding.EncodeToString([]byte(smallText)), kvEnc), 0, "gzip", -1, "not gzip data"},
		{"truncated gzip", cmWith(base64.StdEncoding.EncodeToString(gz([]byte(smallText))[:30]), kvEnc), 0, "gzip", -1, "truncated gzip stream"},
		{"over the limit", cmWith(bomb, kvEnc), 1 << 20, "limit", -1, "exceeds the limit of 1048576 bytes"},
		{"plain over the limit", cmWith(smallText, nil), 10, "limit", -1, "exceeds the limit"},
		{"unsupported encoding", func() *corev1.ConfigMap {
			c := native.DeepCopy()
			c.Annotations[metakeys.EncodingAnnotation] = "zstd"
			return c
		}(), 0, "configmap", -1, `unsupported encoding "zstd"`},
		{"chunk head", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{metakeys.ChunksAnnotation: "[]"}}}, 0, "configmap", -1, "head of a strategy stored in chunks"},
		{"digest edited", tampered, 0, "digest", -1, "digest mismatch"},
		{"digest removed", noDigest, 0, "digest", -1, "has no installstrategy.io/digest"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := Decode(c.cm, DecodeOptions{MaxDecodedBytes: c.limit})
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %v is not a *DecodeError", err)
			}
			if de.Step != c.step || de.Offset != c.offset || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got step %q offset %d error %q; want step %q offset %d containing %q", de.Step, de.Offset, err, c.step, c.offset, c.want)
			}
		})
	}
}

func TestDecodeTolerates(t *testing.T) {
	enc := base64.StdEncoding.EncodeToString(gz([]byte(smallText)))
	var wrapped strings.Builder
	for i := 0; i < len(enc); i += 20 {
		wrapped.WriteString(enc[i:min(len(enc), i+20)] + "\r\n ")
	}
	for name, cm := range map[string]*corev1.ConfigMap{
		"wrapped base64":       cmWith(wrapped.String(), kvEnc),
		"legacy plain":         cmWith(smallText, map[string]string{metakeys.KubeVirtVersionAnnotation: "v1"}),
		"empty encoding value": cmWith(enc, map[string]string{metakeys.KubeVirtEncodingAnnotation: ""}),
	} {
		t.Run(name, func(t *testing.T) {
			text, _, err := Decode(cm, DecodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if string(text) != smallText {
				t.Fatalf("got %q", text)
			}
		})
	}
}

func TestTamperedManifestsByte(t *testing.T) {
	cm, err := EncodeText([]byte(smallText), EncodeOptions{Identity: strategy.Identity{Version: "v1"}})
	if err != nil {
		t.Fatal(err)
	}
	// Re-encode a text that differs in one byte, keeping the old digest.
	other, _ := EncodeText([]byte(strings.Replace(smallText, "name: sa", "name: sb", 1)), EncodeOptions{Identity: strategy.Identity{Version: "v1"}})
	cm.Data[ManifestsKey] = other.Data[ManifestsKey]
	if _, _, err := Decode(cm, DecodeOptions{}); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("want digest mismatch, got %v", err)
	}
}

func TestParseInputDetects(t *testing.T) {
	cm, _ := EncodeText([]byte(smallText), EncodeOptions{Identity: strategy.Identity{Version: "v1"}, Name: "x"})
	y, _ := MarshalYAML(cm)
	j := []byte(`{"apiVersion":"v1","kind":"List","items":[` + string(mustJSON(t, cm)) + `]}`)
	for name, tc := range map[string]struct {
		data []byte
		cms  int
	}{
		"configmap yaml":    {y, 1},
		"kubectl json list": {j, 1},
		"manifests text":    {[]byte(smallText), 0},
	} {
		t.Run(name, func(t *testing.T) {
			in, err := ParseInput(name, tc.data, strategy.ParseOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(in.ConfigMaps) != tc.cms || (tc.cms == 0) != (in.Strategy != nil) {
				t.Fatalf("configmaps %d strategy %v", len(in.ConfigMaps), in.Strategy != nil)
			}
			l, err := LoadInput(in, DecodeOptions{}, strategy.ParseOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(l.Strategy.Objects) != 1 {
				t.Fatalf("objects: %d", len(l.Strategy.Objects))
			}
		})
	}
	if _, err := ReadConfigMaps("text", []byte(smallText)); err == nil || !strings.Contains(err.Error(), "not a ConfigMap but v1 ServiceAccount") {
		t.Fatalf("want not-a-ConfigMap error, got %v", err)
	}
}

// TestParseInputSkipsAndRefuses: strategy ConfigMaps are taken from among
// other objects, which are listed as skipped; objects read from a cluster
// that hold no strategy are refused by name; a hand-written ConfigMap is a
// manifests text.
func TestParseInputSkipsAndRefuses(t *testing.T) {
	cm, _ := EncodeText([]byte(smallText), EncodeOptions{Identity: strategy.Identity{Version: "v1"}, Name: "x", Namespace: "ns"})
	live := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"kube-root-ca.crt","namespace":"ns","uid":"u1","resourceVersion":"7"},"data":{"ca.crt":"pem"}}`
	both := []byte(`{"apiVersion":"v1","kind":"List","items":[` + live + `,` + string(mustJSON(t, cm)) + `]}`)
	in, err := ParseInput("both", both, strategy.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(in.ConfigMaps) != 1 || in.ConfigMaps[0].Name != "x" || len(in.Skipped) != 1 || in.Skipped[0].Object() != "ConfigMap ns/kube-root-ca.crt" {
		t.Fatalf("configmaps %d, skipped %+v", len(in.ConfigMaps), in.Skipped)
	}
	for name, data := range map[string]string{
		"live configmap": live,
		"live secret":    `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"ns","creationTimestamp":"2026-01-01T00:00:00Z"}}`,
		"chunk":          `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"ns","labels":{"` + metakeys.ChunkLabel + `":""}},"data":{"part":"H4sI"}}`,
	} {
		_, err := ParseInput(name, []byte(data), strategy.ParseOptions{})
		var ns *NotStrategyError
		if !errors.As(err, &ns) || len(ns.Objects) != 1 || (name == "chunk") != ns.Objects[0].Chunk {
			t.Errorf("%s: want a NotStrategyError naming the object, got %v", name, err)
		}
	}
	text := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: n\n  creationTimestamp: null\ndata:\n  k: v\n"
	in, err = ParseInput("text", []byte(text), strategy.ParseOptions{})
	if err != nil || in.Strategy == nil || len(in.Strategy.Objects) != 1 {
		t.Fatalf("a hand-written ConfigMap is a one-object manifests text: %v", err)
	}
}

// A compact text is of the native form only: the KubeVirt form is
// KubeVirt's own text, byte for byte.
func TestEncodeCompactIsNativeOnly(t *testing.T) {
	l, err := LoadConfigMap("v1.9.0", readCM(t, "v1.9.0"), DecodeOptions{}, strategy.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Encode(l.Strategy, EncodeOptions{Format: FormatKubeVirt, Compact: true}); err == nil || !strings.Contains(err.Error(), "native form only") {
		t.Fatalf("Encode(KubeVirt form, Compact) = %v, want refused", err)
	}
}
