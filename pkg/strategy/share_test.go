package strategy

import (
	"fmt"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"testing"
	"unsafe"

	"github.com/installstrategy/installstrategy/internal/kubevirtdata"
	"github.com/installstrategy/installstrategy/pkg/kinds"
)

// A parsed KubeVirt strategy holds one copy of what repeats in its CRDs'
// schemas: each key and string is held once (none of them is part of the
// text, which would keep the whole text alive), no two of its maps or lists
// are equal (most CRDs have the same schema at each version), and the
// whole strategy holds a small part of the heap it did: KubeVirt v1.9.0's
// 11.7 MB as its documents were read, 1.7 MB shared.
func TestParsedKubeVirtHoldsOneCopy(t *testing.T) {
	for _, v := range kubevirtdata.Versions {
		t.Run(v, func(t *testing.T) {
			text := kubevirtdata.Read(t, v, "manifests.yaml")
			before := liveHeap()
			// One worker: each worker holds its own copies.
			s, _, err := Parse(text, ParseOptions{Parallelism: 1})
			if err != nil {
				t.Fatal(err)
			}
			held := liveHeap() - before
			runtime.KeepAlive(text)
			if limit := int64(3 << 20); held > limit {
				t.Errorf("the parsed strategy holds %.1f MB, want at most %.1f", float64(held)/(1<<20), float64(limit)/(1<<20))
			}

			w := sharedWalk{t: t, strs: map[string]*byte{}, byValue: map[string]any{}, seen: map[unsafe.Pointer]bool{}}
			schemas, equalVersions := 0, 0
			for _, o := range s.Objects {
				info, _ := kinds.Lookup(o.GroupVersionKind().GroupKind())
				var first any
				info.EachBulky(o.Object, func(at string, _ map[string]any, _ string, v any) {
					schemas++
					if first != nil && reflect.DeepEqual(first, v) {
						equalVersions++
					}
					if first == nil {
						first = v
					}
					w.walk(RefOf(o).String()+" "+at, v)
				})
			}
			if schemas == 0 || equalVersions == 0 {
				t.Fatalf("%d schemas, %d equal to their CRD's first: the test reads no shared schema", schemas, equalVersions)
			}
			t.Logf("%d schemas (%d equal to their CRD's first version's), %d distinct strings, %d distinct maps and lists; %.2f MB held",
				schemas, equalVersions, len(w.strs), len(w.byValue), float64(held)/(1<<20))
		})
	}
}

func liveHeap() int64 {
	runtime.GC()
	runtime.GC() // and the line tables' pool
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// sharedWalk checks that each string it walks is the one copy of its
// content seen (strs), and that each map and list is the one of its
// content (byValue, by canonical form).
type sharedWalk struct {
	t       *testing.T
	strs    map[string]*byte
	byValue map[string]any
	seen    map[unsafe.Pointer]bool // maps and lists walked
}

func (w *sharedWalk) walk(at string, v any) {
	checkString := func(s string) {
		p := unsafe.StringData(s)
		if q, ok := w.strs[s]; ok && q != p && s != "" {
			w.t.Errorf("%s: %q is held twice", at, s)
		}
		w.strs[s] = p
	}
	var id unsafe.Pointer
	switch x := v.(type) {
	case string:
		checkString(x)
		return
	case map[string]any:
		if id = reflect.ValueOf(x).UnsafePointer(); w.seen[id] {
			return
		}
		for k, e := range x {
			checkString(k)
			w.walk(at+"."+k, e)
		}
	case []any:
		if len(x) == 0 {
			return
		}
		if id = unsafe.Pointer(&x[0]); w.seen[id] {
			return
		}
		for i, e := range x {
			w.walk(fmt.Sprintf("%s.%d", at, i), e)
		}
	default:
		return
	}
	w.seen[id] = true
	c := canonical(v)
	if _, ok := w.byValue[c]; ok {
		w.t.Errorf("%s: an equal %T is held twice", at, v)
	}
	w.byValue[c] = v
}

// canonical writes v with its types, maps by sorted key.
func canonical(v any) string {
	var b strings.Builder
	var write func(v any)
	write = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			b.WriteString("{")
			for _, k := range keys {
				fmt.Fprintf(&b, "%q:", k)
				write(x[k])
				b.WriteString(",")
			}
			b.WriteString("}")
		case []any:
			b.WriteString("[")
			for _, e := range x {
				write(e)
				b.WriteString(",")
			}
			b.WriteString("]")
		default:
			fmt.Fprintf(&b, "%T(%#v)", v, v)
		}
	}
	write(v)
	return b.String()
}
