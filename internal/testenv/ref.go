package testenv

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"

	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// Mapper returns a REST mapper over fresh discovery of the cluster.
func (e *Env) Mapper() (meta.RESTMapper, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(e.Config)
	if err != nil {
		return nil, err
	}
	return restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), nil
}

// Live reads the live object of ref at the version the cluster prefers,
// through mapper (see Mapper). It returns nil and no error when the object
// does not exist or its kind is not served (any more).
func (e *Env) Live(ctx context.Context, mapper meta.RESTMapper, ref strategy.ObjectRef) (*unstructured.Unstructured, error) {
	m, err := mapper.RESTMapping(schema.GroupKind{Group: ref.Group, Kind: ref.Kind})
	if meta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	ri := e.Dynamic.Resource(m.Resource)
	var live *unstructured.Unstructured
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		live, err = ri.Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	} else {
		live, err = ri.Get(ctx, ref.Name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", ref, err)
	}
	return live, nil
}

// Survivors returns the refs whose objects still exist, leaving out
// Namespaces that are terminating (their content is being removed) and
// objects whose kind is no longer served (their CRD went first).
func (e *Env) Survivors(ctx context.Context, refs []strategy.ObjectRef) ([]strategy.ObjectRef, error) {
	mapper, err := e.Mapper()
	if err != nil {
		return nil, err
	}
	var out []strategy.ObjectRef
	for _, ref := range refs {
		live, err := e.Live(ctx, mapper, ref)
		if err != nil {
			return nil, err
		}
		if live == nil || (ref.Kind == "Namespace" && ref.Group == "" && live.GetDeletionTimestamp() != nil) {
			continue
		}
		out = append(out, ref)
	}
	return out, nil
}
