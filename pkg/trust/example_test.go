package trust_test

import (
	"fmt"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// Sign a strategy's text (through its digest) and check it against a key
// ring, as the operator does for a ConfigMap an Installation names.
func Example() {
	text := []byte("---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: a\n")
	release, _ := trust.GenerateKey() // or trust.ParsePrivateKey(cosign.key, password)

	annotations := map[string]string{}
	if err := trust.Sign(annotations, codec.Digest(text), release); err != nil {
		panic(err)
	}

	ring := &trust.KeyRing{}
	_ = ring.AddPEM("release.pub", release.PublicPEM())
	policy := trust.Policy{Keys: ring}
	how, err := policy.Check(trust.Subject{
		Digest:    codec.Digest(text),
		Signature: annotations[metakeys.SignatureAnnotation],
		KeyID:     annotations[metakeys.SignatureKeyAnnotation],
	})
	fmt.Println(how, err)

	// One byte changed: refused.
	_, err = policy.Check(trust.Subject{Digest: codec.Digest(append(text, '#')), Signature: annotations[metakeys.SignatureAnnotation]})
	fmt.Println(err != nil)
	// Output:
	// signed by release.pub <nil>
	// true
}
