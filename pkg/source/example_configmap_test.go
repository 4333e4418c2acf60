package source_test

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/source"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/strategy"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// stored is a ConfigMapReader without a cluster: it hands over one
// ConfigMap after the gate admitted its metadata (*store.Store is the
// reader an operator passes).
type stored struct{ cm *corev1.ConfigMap }

func (s stored) ReadConfigMap(_ context.Context, _ store.Entry, admit func(*metav1.ObjectMeta) error) (*corev1.ConfigMap, error) {
	if err := admit(&s.cm.ObjectMeta); err != nil {
		return nil, err
	}
	return s.cm, nil
}

// Load a strategy ConfigMap through the trust gate: pinned by the digest
// of its text it is parsed; with no key and no pin it is refused before
// its text is parsed.
func ExampleConfigMap() {
	text := []byte("---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: a\n  namespace: demo\n")
	cm, err := codec.EncodeText(text, codec.EncodeOptions{
		Namespace: "demo", Name: "shop-v1",
		Identity: strategy.Identity{Version: "v1", Registry: "example.com", Identifier: "abc"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	entry := store.Entry{Namespace: "demo", Name: "shop-v1"}

	pinned := source.ConfigMap{Reader: stored{cm}, Entry: entry,
		Gate: trust.Gate{Policy: trust.Policy{Pinned: codec.Digest(text)}}}
	l, err := pinned.Load(context.Background())
	fmt.Println(l.From, "|", l.VerifiedBy, "|", l.Strategy.Identity.Version, len(l.Strategy.Objects), err)

	unsigned := source.ConfigMap{Reader: stored{cm}, Entry: entry,
		Gate: trust.Gate{Policy: trust.Policy{Keys: &trust.KeyRing{}}}}
	_, err = unsigned.Load(context.Background())
	fmt.Println(errors.As(err, new(*trust.UntrustedError)))
	// Output:
	// configmap demo/shop-v1 | pinned digest | v1 1 <nil>
	// true
}
