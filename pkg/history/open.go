package history

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// OpenOptions tune OpenRevision; the zero value decodes within codec's
// default limits.
type OpenOptions struct {
	Decode codec.DecodeOptions
}

// OpenRevision reads the ConfigMap of an anchored revision through the
// trust gate, with the anchor's digest as the pin: what the ConfigMap
// records (digest, identity) is compared with the anchor first, from its
// metadata alone; then trust.Gate bounds its size, refuses a chunked head,
// decodes within opts' limits and compares the text's digest with the
// anchor's before anything is parsed. Whoever may edit the namespace's
// ConfigMaps wrote cm as far as anyone knows: the error says what differs,
// and refusing costs at most the bounded decode.
func OpenRevision(cm *corev1.ConfigMap, a Anchored, opts OpenOptions) (*trust.Verified, error) {
	where := "configmap " + cm.Namespace + "/" + cm.Name
	if !digestRE.MatchString(a.Digest) {
		return nil, fmt.Errorf("%s: anchored digest %q is not sha256:<64 hex digits>", where, a.Digest)
	}
	info := codec.DescribeConfigMap(cm)
	if info.Digest != a.Digest {
		return nil, fmt.Errorf("%s records digest %s, the anchor %s", where, orNone(info.Digest), a.Digest)
	}
	if info.Identity != a.Identity {
		return nil, fmt.Errorf("%s records identity %s, the anchor %s", where, describe(info.Identity), describe(a.Identity))
	}
	if _, chunked := cm.Annotations[metakeys.ChunksAnnotation]; chunked {
		return nil, fmt.Errorf("%s is the head of chunks: a revision is kept whole", where)
	}
	v, err := trust.Gate{Policy: trust.Policy{Pinned: a.Digest}, Decode: opts.Decode}.Open(cm)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	v.Strategy.Identity = a.Identity
	return v, nil
}

// describe names an identity in an error.
func describe(id strategy.Identity) string {
	return fmt.Sprintf("{version %q, registry %q, identifier %q}", id.Version, id.Registry, id.Identifier)
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
