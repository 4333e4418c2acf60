package source

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/history"
	"github.com/installstrategy/installstrategy/pkg/strategy"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// Revision is the kept strategy of a plugin installation's revision: its
// ConfigMap, which any ConfigMap editor of the namespace may write, is
// read through trust.Gate with a digest as the pin — the namespace
// anchor's (history.OpenRevision, which also compares the recorded
// digest and identity with the anchor before decoding), or, without an
// anchor, the history record's (whose word the user took with
// --allow-unanchored). The strategy's identity is the anchor's or the
// record's.
type Revision struct {
	// Get reads the revision's ConfigMap.
	Get func(ctx context.Context) (*corev1.ConfigMap, error)
	// Anchored is the anchor's record; nil uses Recorded.
	Anchored *history.Anchored
	// Recorded is the history record's revision.
	Recorded *history.Revision
	Decode   codec.DecodeOptions
}

// Load implements Source.
func (r Revision) Load(ctx context.Context) (*Loaded, error) {
	cm, err := r.Get(ctx)
	if err != nil {
		return nil, err
	}
	from := "configmap " + cm.Namespace + "/" + cm.Name
	var v *trust.Verified
	var id strategy.Identity
	switch {
	case r.Anchored != nil:
		v, err = history.OpenRevision(cm, *r.Anchored, history.OpenOptions{Decode: r.Decode})
		id = r.Anchored.Identity
	case r.Recorded != nil:
		v, err = trust.Gate{Policy: trust.Policy{Pinned: r.Recorded.Digest}, Decode: r.Decode}.Open(cm)
		id = r.Recorded.Identity
	default:
		return nil, fmt.Errorf("%s: neither an anchor nor a history record names the revision's digest", from)
	}
	if err != nil {
		return nil, err
	}
	v.Strategy.Identity = id
	l := verified(v, from)
	l.ConfigMap = cm.Namespace + "/" + cm.Name
	return l, nil
}
