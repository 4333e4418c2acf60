package source

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// ConfigMapReader reads a stored strategy ConfigMap, a chunked one
// assembled, calling admit on its metadata before any chunk is fetched
// (*store.Store is one).
type ConfigMapReader interface {
	ReadConfigMap(ctx context.Context, e store.Entry, admit func(*metav1.ObjectMeta) error) (*corev1.ConfigMap, error)
}

// ConfigMap is a strategy ConfigMap of the cluster, read through
// trust.Gate: its metadata is judged before any chunk is fetched, its
// decoded text before it is parsed. A ConfigMap that the gate refuses for
// its size, or admits but that does not decode or parse as its metadata
// says, is a *store.CorruptError (wrapping the *trust.RefusedError), as
// the store reports its own.
type ConfigMap struct {
	Reader ConfigMapReader
	Entry  store.Entry
	// Gate holds the policy; its MaxEncodedBytes defaults to
	// store.MaxEncodedBytes (a chunked strategy may hold more than one
	// ConfigMap).
	Gate trust.Gate
}

// Load implements Source.
func (c ConfigMap) Load(ctx context.Context) (*Loaded, error) {
	gate := c.Gate
	if gate.MaxEncodedBytes <= 0 {
		gate.MaxEncodedBytes = store.MaxEncodedBytes
	}
	cm, err := c.Reader.ReadConfigMap(ctx, c.Entry, gate.Admit)
	if err != nil {
		return nil, err
	}
	v, err := gate.Open(cm)
	if refused := (*trust.RefusedError)(nil); errors.As(err, &refused) {
		return nil, &store.CorruptError{ConfigMap: c.Entry.String(), Chunk: -1, Err: err}
	}
	if err != nil {
		return nil, err
	}
	l := verified(v, "configmap "+c.Entry.String())
	l.Info.Name, l.Info.Namespace = c.Entry.Name, c.Entry.Namespace
	l.ConfigMap = c.Entry.String()
	return l, nil
}

// Check that *store.Store reads ConfigMaps as ConfigMap wants.
var _ ConfigMapReader = (*store.Store)(nil)
