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
