package apply

import (
	"reflect"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/installstrategy/installstrategy/pkg/kinds"
)

// shared holds, by object and place, the strategy's values of the kind
// table's bulky fields (kinds.Info.Bulky): the informer cache keeps an
// equal live value as that one instead of its own decoded copy. A
// KubeVirt install's CRD schemas were held twice, in the parsed strategy
// and in the CRD informer, about 10 MB of the operator's peak heap.
//
// Both sides treat the values as read-only: the strategy's objects are
// never changed (Prepare shares them, TestPrepareLeavesTheStrategyObjectAlone);
// cached objects are copied before a reader gets them, except by the
// applier's write decision (CachedShared), which only reads them, as do
// the consumers of its Result.Object.
type shared struct {
	mu   sync.Mutex
	vals map[sharedKey]any
}

type sharedKey struct {
	gk              schema.GroupKind
	namespace, name string
	// at is the field's place with list indices, e.g.
	// "spec.versions.1.schema".
	at string
}

// bulky calls fn with the place, the enclosing map and key, and the value
// of each field of obj at path ("*" steps into each element of a list),
// so fn can read or replace the value.
func bulky(obj map[string]any, path []string, at string, fn func(at string, parent map[string]any, key string, v any)) {
	if len(path) == 0 {
		return
	}
	key := path[0]
	if key == "*" {
		return // a list is walked from its parent below
	}
	v, ok := obj[key]
	if !ok {
		return
	}
	place := strings.TrimPrefix(at+"."+key, ".")
	if len(path) == 1 {
		fn(place, obj, key, v)
		return
	}
	if path[1] == "*" {
		list, _ := v.([]any)
		for i, el := range list {
			if m, ok := el.(map[string]any); ok {
				bulky(m, path[2:], place+"."+strconv.Itoa(i), fn)
			}
		}
		return
	}
	if m, ok := v.(map[string]any); ok {
		bulky(m, path[1:], place, fn)
	}
}

// Share records the bulky fields of obj, a strategy's object about to be
// applied, so that the cache holds its live copy's equal fields as these
// values. obj must not change afterwards (strategy objects do not).
func (c *InformerCache) Share(obj *unstructured.Unstructured) {
	gk := obj.GroupVersionKind().GroupKind()
	info, _ := kinds.Lookup(gk)
	if len(info.Bulky) == 0 {
		return
	}
	c.shared.mu.Lock()
	defer c.shared.mu.Unlock()
	if c.shared.vals == nil {
		c.shared.vals = map[sharedKey]any{}
	}
	bulky(obj.Object, info.Bulky, "", func(at string, _ map[string]any, _ string, v any) {
		k := sharedKey{gk, obj.GetNamespace(), obj.GetName(), at}
		// An equal value recorded before stays: the informer's objects
		// hold that one, and each reconcile's strategy is a new copy (a
		// resync that changes nothing would otherwise keep two).
		// (DeepEqual answers at once for the very same map.)
		if old, ok := c.shared.vals[k]; ok && reflect.DeepEqual(old, v) {
			return
		}
		c.shared.vals[k] = v
	})
}

// transform is the informers' transform: managed fields are dropped (no
// cached read needs them; adoption reads the live object), and a bulky
// field equal to the value Share recorded for it is replaced by that
// value, so the decoded copy is garbage at once.
func (c *InformerCache) transform(strip toolscache.TransformFunc) toolscache.TransformFunc {
	return func(in any) (any, error) {
		out, err := strip(in)
		if err != nil {
			return out, err
		}
		u, ok := out.(*unstructured.Unstructured)
		if !ok {
			return out, nil
		}
		gk := u.GroupVersionKind().GroupKind()
		info, _ := kinds.Lookup(gk)
		if len(info.Bulky) == 0 {
			return out, nil
		}
		c.shared.mu.Lock()
		defer c.shared.mu.Unlock()
		if len(c.shared.vals) == 0 {
			return out, nil
		}
		bulky(u.Object, info.Bulky, "", func(at string, parent map[string]any, key string, v any) {
			want, ok := c.shared.vals[sharedKey{gk, u.GetNamespace(), u.GetName(), at}]
			if ok && reflect.DeepEqual(v, want) {
				parent[key] = want
			}
		})
		return out, nil
	}
}
