package apply

import (
	"context"
	"reflect"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// Prepare is prepare with the pod template's identity annotations.
func Prepare(obj *unstructured.Unstructured, id strategy.Identity, owner inventory.Owner) (*unstructured.Unstructured, error) {
	return prepare(obj, id, owner, true)
}

// SharesForTest reports how many bulky fields the informer's own copy of
// an object holds as the very value Share recorded, and how many it has.
func (c *InformerCache) SharesForTest(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (same, all int, err error) {
	u, err := c.InformerObjectForTest(ctx, gvk, namespace, name)
	if err != nil {
		return 0, 0, err
	}
	info, _ := kinds.Lookup(gvk.GroupKind())
	c.shared.mu.Lock()
	defer c.shared.mu.Unlock()
	info.EachBulky(u.Object, func(at string, _ map[string]any, _ string, v any) {
		all++
		if want, ok := c.shared.vals[sharedKey{gvk.GroupKind(), namespace, name, at}]; ok && reflect.ValueOf(v).Pointer() == reflect.ValueOf(want).Pointer() {
			same++
		}
	})
	return same, all, nil
}

// InformerObjectForTest is the informer's own copy of an object (no copy).
func (c *InformerCache) InformerObjectForTest(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err := c.cache.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u, &client.GetOptions{UnsafeDisableDeepCopy: ptr.To(true)})
	return u, err
}
