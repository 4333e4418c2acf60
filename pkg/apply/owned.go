package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/inventory"
)

// defaultMaxOwnedBytes bounds what OwnedObjects reads: the objects of one
// installation's namespace, as JSON (a strategy's whole text is at most
// 64 MiB; the objects a chart looks up are a small part of it).
const defaultMaxOwnedBytes = 32 << 20

// OwnedObjects reads the live objects of an inventory that a chart's
// lookup may see (pkg/render's HelmLookup): the namespaced objects in
// namespace that still carry the inventory owner's labels, read from the
// API server with the applier's identity, never from a cache. Objects
// that are gone, whose kind is no longer served, or that another owner
// (or nobody) now labels are left out. More than maxBytes of them as JSON
// (0 means defaultMaxOwnedBytes) is an error: reading stops there.
func (r *Reader) OwnedObjects(ctx context.Context, inv *inventory.Inventory, namespace string, maxBytes int64) ([]*unstructured.Unstructured, error) {
	if maxBytes <= 0 {
		maxBytes = defaultMaxOwnedBytes
	}
	var (
		out   []*unstructured.Unstructured
		total int64
	)
	for _, ref := range inv.Refs() {
		if ref.Namespace != namespace {
			continue
		}
		m, err := r.Mapping(ref, "")
		if _, gone := errors.AsType[*NotServedError](err); gone {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m.Scope.Name() != meta.RESTScopeNameNamespace {
			continue
		}
		obj, err := r.dyn.Resource(m.Resource).Namespace(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: read for lookup: %w", ref, err)
		}
		if !inv.Owner.Owns(obj.GetLabels()) {
			continue
		}
		b, err := json.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("%s: read for lookup: %w", ref, err)
		}
		if total += int64(len(b)); total > maxBytes {
			return nil, fmt.Errorf("objects of %s in namespace %s: over %d bytes for lookup", inv.Owner, namespace, maxBytes)
		}
		out = append(out, obj)
	}
	return out, nil
}
