package apply

import (
	"reflect"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/installstrategy/installstrategy/pkg/jsonshare"
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
	info.EachBulky(obj.Object, func(at string, _ map[string]any, _ string, v any) {
		k := sharedKey{gk, obj.GetNamespace(), obj.GetName(), at}
		// An equal value recorded before stays: the informer's objects
		// hold that one, and a strategy parsed again (a new operator
		// process's, another Installation's) holds a copy of its own (a
		// resync that changes nothing would otherwise keep two). The
		// loader's copies for each reconcile share the parsed value, for
		// which DeepEqual answers at once (the very same map).
		if old, ok := c.shared.vals[k]; ok && reflect.DeepEqual(old, v) {
			return
		}
		c.shared.vals[k] = v
	})
}

// transform is the informers' transform: managed fields are dropped (no
// cached read needs them; adoption reads the live object), and a bulky
// field equal to the value Share recorded for it is replaced by that
// value, so the decoded copy is garbage at once. Other bulky fields (those
// of an object no strategy applied since the operator started, such as
// the CRDs an upgrade starts from, listed before the new strategy is
// loaded) are held with one copy of what repeats in them
// (jsonshare.Trees): their keys and strings, and equal subschemas, most
// CRDs' versions having the same schema (KubeVirt v1.8.4's CRDs 6.8 MB
// as decoded, 1.9 MB so).
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
		k := keyOf(u)
		if !c.wanted(k) {
			return stubOf(u), nil
		}
		// Whole from here on: the copy Keep kept is not needed.
		c.side.Delete(k)
		gk := u.GroupVersionKind().GroupKind()
		info, _ := kinds.Lookup(gk)
		if len(info.Bulky) == 0 {
			return out, nil
		}
		type field struct {
			parent map[string]any
			key    string
		}
		var own []field
		c.shared.mu.Lock()
		info.EachBulky(u.Object, func(at string, parent map[string]any, key string, v any) {
			want, ok := c.shared.vals[sharedKey{gk, u.GetNamespace(), u.GetName(), at}]
			if ok && reflect.DeepEqual(v, want) {
				parent[key] = want
				return
			}
			own = append(own, field{parent, key})
		})
		c.shared.mu.Unlock()
		// The decoded object is the transform's own: shared in place.
		t := jsonshare.Trees{Strings: &jsonshare.Strings{}}
		for _, f := range own {
			f.parent[f.key] = t.Share(f.parent[f.key])
		}
		return out, nil
	}
}
