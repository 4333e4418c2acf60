package source

import (
	"context"
	"fmt"
	"strings"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/strategy"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// NotVerified begins the VerifiedBy of a strategy nobody vouched for
// (Unverified, an OCI Remote with Unverified set): a display verb shows
// it and says so; a verb that acts on it does so only at the user's
// explicit word (the plugin's --allow-unsigned), and nothing caches it.
const NotVerified = "not verified"

// Verified says whether someone vouched for the strategy: false for what
// Unverified or an unverified Remote loaded.
func (l *Loaded) Verified() bool {
	return l != nil && l.VerifiedBy != "" && !strings.HasPrefix(l.VerifiedBy, NotVerified)
}

// Unverified is a stored strategy ConfigMap read with no signature or pin
// to judge it by: the trust decided is "not verified", and Load decides it
// first, before anything is decoded. It is for a verb that only shows a
// strategy (the plugin's inspect, get, decode, plan and diff without
// --key) or that acts on it because the user said so
// (--allow-unsigned). Trust aside, it keeps the gate's order: the size
// bound (the store bounds a chunked strategy's chunks; data.manifests is
// bounded by MaxEncodedBytes), the bounded decode (which checks a
// recorded digest against the text: a text that does not hash to what its
// ConfigMap records is refused, not shown), then the parse. A refusal is
// a *store.CorruptError naming the ConfigMap and wrapping the
// *trust.RefusedError, as ConfigMap's.
type Unverified struct {
	Reader ConfigMapReader
	Entry  store.Entry
	// Why says who may have written it; VerifiedBy is NotVerified: Why.
	Why string
	// MaxEncodedBytes bounds data.manifests (chunks assembled); 0 means
	// store.MaxEncodedBytes.
	MaxEncodedBytes int
	Decode          codec.DecodeOptions
	Parse           strategy.ParseOptions
}

// Load implements Source.
func (u Unverified) Load(ctx context.Context) (*Loaded, error) {
	cm, err := u.Reader.ReadConfigMap(ctx, u.Entry, nil)
	if err != nil {
		return nil, err
	}
	where := u.Entry.String()
	corrupt := func(err error) error { return &store.CorruptError{ConfigMap: where, Chunk: -1, Err: err} }
	max := u.MaxEncodedBytes
	if max <= 0 {
		max = store.MaxEncodedBytes
	}
	if err := bound("data."+codec.ManifestsKey, []byte(cm.Data[codec.ManifestsKey]), max); err != nil {
		return nil, corrupt(err)
	}
	text, info, err := codec.Decode(cm, u.Decode)
	if err != nil {
		return nil, corrupt(&trust.RefusedError{Step: "decode", Err: err})
	}
	st, warnings, err := parse("manifests", text, u.Parse)
	if err != nil {
		return nil, corrupt(err)
	}
	st.Identity = u.Entry.Identity
	info.Name, info.Namespace = u.Entry.Name, u.Entry.Namespace
	return &Loaded{Strategy: st, Text: text, Digest: codec.Digest(text), VerifiedBy: notVerifiedBy(u.Why), From: "configmap " + where,
		ConfigMap: where, Warnings: warnings, Info: &info}, nil
}

// notVerifiedBy is the VerifiedBy of an artifact taken unverified.
func notVerifiedBy(why string) string {
	if why == "" {
		return NotVerified
	}
	return fmt.Sprintf("%s: %s", NotVerified, why)
}
