package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// clusterTrust is the trust decision of a verb that acts on a strategy
// read from the cluster (cm/NAME): anyone who may edit ConfigMaps of the
// namespace may have written it, digest included, so it is read through
// trust.Gate and must be signed by one of the user's keys (--key), unless
// the user takes it as it is (--allow-unsigned).
type clusterTrust struct {
	keys          []string
	allowUnsigned bool
}

// addClusterTrust adds --key and --allow-unsigned to a verb that acts on
// cm/NAME; the verb sets options.clusterTrust to the result when it runs.
func addClusterTrust(cmd *cobra.Command) *clusterTrust {
	t := &clusterTrust{}
	cmd.Flags().StringArrayVar(&t.keys, "key", nil, "PEM public key file (e.g. cosign.pub; repeatable: any of them) whose signature a strategy read from the cluster (cm/NAME) must carry, checked before it is decoded")
	cmd.Flags().BoolVar(&t.allowUnsigned, "allow-unsigned", false, "take a strategy read from the cluster (cm/NAME) without a signature: its digest is then checked only against itself, which any ConfigMap editor of the namespace can recompute")
	return t
}

// load reads the stored strategy e through the gate: the head's metadata
// is judged (a signature by a key of --key over the recorded digest)
// before any chunk is fetched or anything decoded, the decode is bounded,
// and the text's own digest is judged again before it is parsed.
func (t *clusterTrust) load(ctx context.Context, o *options, c *cluster, e store.Entry) (*codec.Loaded, error) {
	switch {
	case len(t.keys) > 0 && t.allowUnsigned:
		return nil, usageError(errors.New("--allow-unsigned takes a strategy without a signature; --key requires one: give one of them"))
	case t.allowUnsigned:
		fmt.Fprintf(o.streams.ErrOut, "warning: configmap %s is taken without a signature (--allow-unsigned): any ConfigMap editor of namespace %s may have written it\n", e, e.Namespace)
		return c.loadEntry(ctx, e)
	case len(t.keys) == 0:
		return nil, fmt.Errorf("configmap %s: a strategy read from the cluster may have been written by any ConfigMap editor of namespace %s, digest included: give --key with the public key it must be signed by (see sign, verify --key), or --allow-unsigned to take it as it is", e, e.Namespace)
	}
	ring, err := readKeyRing(t.keys)
	if err != nil {
		return nil, err
	}
	dopts, err := o.decodeOptions()
	if err != nil {
		return nil, err
	}
	gate := trust.Gate{Policy: trust.Policy{Keys: ring}, MaxEncodedBytes: store.MaxEncodedBytes, Decode: dopts}
	cm, err := c.store.ReadConfigMap(ctx, e, gate.Admit)
	if err != nil {
		return nil, fmt.Errorf("configmap %s: %w", e, err)
	}
	v, err := gate.Open(cm)
	if err != nil {
		return nil, fmt.Errorf("configmap %s: %w", e, err)
	}
	fmt.Fprintf(o.streams.ErrOut, "configmap %s: %s\n", e, v.VerifiedBy)
	l := loadedOf(v)
	l.Info.Name, l.Info.Namespace = e.Name, e.Namespace
	return l, nil
}
