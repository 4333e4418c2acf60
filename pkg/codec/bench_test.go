package codec

import (
	"bytes"
	stdgzip "compress/gzip"
	"encoding/base64"
	"io"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	kapiregistration "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"sigs.k8s.io/yaml"

	"github.com/installstrategy/installstrategy/internal/benchcmp"
	"github.com/installstrategy/installstrategy/internal/kubevirtdata"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// kubevirtLoad does what KubeVirt's loader does with a strategy ConfigMap:
// base64 and gzip with the standard library into a string, split on the
// substring "---", read each entry's TypeMeta, then unmarshal it into its
// typed object. Kinds with no Go type here (KubeVirt's own, OpenShift's,
// Prometheus') go into a map, as cheap as a typed object or cheaper.
func kubevirtLoad(cm *corev1.ConfigMap) ([]any, error) {
	data := []byte(cm.Data[ManifestsKey])
	decoded := make([]byte, base64.StdEncoding.DecodedLen(len(data)))
	n, err := base64.StdEncoding.Decode(decoded, data)
	if err != nil {
		return nil, err
	}
	zr, err := stdgzip.NewReader(bytes.NewReader(decoded[:n]))
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, err
	}
	text := string(raw)
	var out []any
	for _, entry := range strings.Split(text, "---") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(entry), &tm); err != nil {
			return nil, err
		}
		obj := typedObject(tm)
		if err := yaml.Unmarshal([]byte(entry), obj); err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
	return out, nil
}

var benchScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = scheme.AddToScheme(s)
	_ = apiextensionsv1.AddToScheme(s)
	_ = kapiregistration.AddToScheme(s)
	return s
}()

func typedObject(tm metav1.TypeMeta) any {
	gv, _ := schema.ParseGroupVersion(tm.APIVersion)
	if tm.Kind == "ValidatingAdmissionPolicy" || tm.Kind == "ValidatingAdmissionPolicyBinding" {
		gv = schema.GroupVersion{Group: "admissionregistration.k8s.io", Version: "v1"}
	}
	if o, err := benchScheme.New(gv.WithKind(tm.Kind)); err == nil {
		return o
	}
	return &map[string]any{}
}

func benchConfigMap(b *testing.B) *corev1.ConfigMap {
	cms, err := ReadConfigMaps("v1.9.0", kubevirtdata.Read(b, "v1.9.0", "configmap.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	return cms[0]
}

// BenchmarkDecodeParse loads the real KubeVirt v1.9.0 strategy ConfigMap
// into objects: KubeVirt's loader against ours.
func BenchmarkDecodeParse(b *testing.B) {
	cm := benchConfigMap(b)
	size := int64(len(kubevirtdata.Read(b, "v1.9.0", "manifests.yaml")))
	benchcmp.Compare(b, size, func(b *testing.B, n int) {
		for i := 0; i < n; i++ {
			objs, err := kubevirtLoad(cm)
			if err != nil || len(objs) != 249 {
				b.Fatalf("baseline: %d objects, %v", len(objs), err)
			}
		}
	}, func(b *testing.B, n int) {
		for i := 0; i < n; i++ {
			l, err := LoadConfigMap("bench", cm, DecodeOptions{}, strategy.ParseOptions{})
			if err != nil || len(l.Strategy.Objects) != 245 {
				b.Fatalf("ours: %v", err)
			}
		}
	})
}

// kubevirtEncode does what KubeVirt's dump does with loaded objects: marshal
// each to JSON, into a map, strip fields, to YAML, join with "---", gzip and
// base64 with the standard library.
func kubevirtEncode(objs []map[string]any) (string, error) {
	var buf bytes.Buffer
	for _, o := range objs {
		j, err := yaml.Marshal(o)
		if err != nil {
			return "", err
		}
		buf.WriteString("---\n")
		buf.Write(j)
	}
	var z bytes.Buffer
	w := stdgzip.NewWriter(&z)
	if _, err := w.Write(buf.Bytes()); err != nil {
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(z.Bytes()), nil
}

// BenchmarkEncode serialises and encodes the parsed v1.9.0 strategy into a
// native ConfigMap, beside KubeVirt's way of doing the same.
func BenchmarkEncode(b *testing.B) {
	l, err := LoadConfigMap("bench", benchConfigMap(b), DecodeOptions{}, strategy.ParseOptions{})
	if err != nil {
		b.Fatal(err)
	}
	objs := make([]map[string]any, len(l.Strategy.Objects))
	for i, o := range l.Strategy.Objects {
		objs[i] = strategy.Stripped(o).Object
	}
	benchcmp.Compare(b, int64(len(l.Text)), func(b *testing.B, n int) {
		for i := 0; i < n; i++ {
			if _, err := kubevirtEncode(objs); err != nil {
				b.Fatal(err)
			}
		}
	}, func(b *testing.B, n int) {
		for i := 0; i < n; i++ {
			if _, err := Encode(l.Strategy, EncodeOptions{Format: FormatNative}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
