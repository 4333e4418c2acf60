package codec_test

import (
	"fmt"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

func ExampleEncodeText() {
	text := []byte("---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: sa\n  namespace: demo\n")
	cm, err := codec.EncodeText(text, codec.EncodeOptions{
		Format:    codec.FormatNative,
		Namespace: "demo",
		Identity:  strategy.Identity{Version: "v1.0.0", Registry: "example.com", Identifier: "abc"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cm.GenerateName, cm.Annotations[metakeys.DigestAnnotation] == codec.Digest(text))

	// Every read verifies the digest.
	l, err := codec.LoadConfigMap("example", cm, codec.DecodeOptions{}, strategy.ParseOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(l.Strategy.Identity.Version, len(l.Strategy.Objects), l.Info.DigestVerified)
	// Output:
	// installstrategy- true
	// v1.0.0 1 true
}

// Encode a strategy in KubeVirt's form (gzip+base64, what virt-operator
// stores and reads) and decode it back; KubeVirt's form records no digest.
func ExampleDecode() {
	s, _, err := strategy.Parse([]byte("---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: sa\n  namespace: demo\n"), strategy.ParseOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	s.Identity = strategy.Identity{Version: "v1.0.0", Registry: "example.com", Identifier: "abc"}
	cm, err := codec.Encode(s, codec.EncodeOptions{Format: codec.FormatKubeVirt, Namespace: "demo"})
	if err != nil {
		fmt.Println(err)
		return
	}
	text, info, err := codec.Decode(cm, codec.DecodeOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(info.Format, info.Encoding, info.Identity.Version, info.Digest == "")
	back, _, _ := strategy.Parse(text, strategy.ParseOptions{})
	fmt.Println(back.Objects[0].GetKind(), back.Objects[0].GetName())
	// Output:
	// kubevirt gzip+base64 v1.0.0 true
	// ServiceAccount sa
}
