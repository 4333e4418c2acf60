package jsonshare

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unsafe"
)

// A held string is a copy: a key cut from a larger text does not keep the
// text alive. Equal strings share the copy, and its box: holding one again
// allocates nothing.
func TestStringsHoldOneCopyNotTheOriginal(t *testing.T) {
	text := "type: object\ndescription: " + strings.Repeat("long ", 100)
	key := text[:4]
	var s Strings
	held := s.String(key)
	if held != "type" {
		t.Fatalf("held %q", held)
	}
	if start, p := uintptr(unsafe.Pointer(unsafe.StringData(text))), uintptr(unsafe.Pointer(unsafe.StringData(held))); p >= start && p < start+uintptr(len(text)) {
		t.Error("the held string is part of the text it was cut from")
	}
	again := strings.Clone("type")
	if unsafe.StringData(s.String(again)) != unsafe.StringData(held) {
		t.Error("an equal string got a copy of its own")
	}
	if v, w := s.Value("type"), s.Value(again); !sameBox(v, w) {
		t.Error("equal values are boxed apart")
	}
	if n := testing.AllocsPerRun(100, func() { _ = s.Value(again) }); n != 0 {
		t.Errorf("holding a held string again: %v allocations, want 0", n)
	}
	if s.Len() != 1 {
		t.Errorf("%d strings held, want 1", s.Len())
	}
}

func sameBox(a, b any) bool {
	return (*[2]unsafe.Pointer)(unsafe.Pointer(&a))[1] == (*[2]unsafe.Pointer)(unsafe.Pointer(&b))[1]
}

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return numbers(v)
}

// numbers makes json.Number int64 or float64, as the strategy parser does.
func numbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	}
	return v
}

func mapPtr(v any) unsafe.Pointer { return reflect.ValueOf(v).UnsafePointer() }

// Equal maps and lists become one, in one value and across values; what
// differs in anything (a value, its type, a key, an order, null against
// empty) stays apart; and every value is as it was.
func TestTreesShareEqualMapsAndLists(t *testing.T) {
	const schema = `{"type":"object","properties":{"a":{"type":"string","enum":["x","y"]},"n":{"type":"integer","minimum":1}}}`
	one := decode(t, `{"versions":[{"name":"v1","schema":`+schema+`},{"name":"v2","schema":`+schema+`}],
		"same":{"a":{"type":"string","enum":["x","y"]}},
		"float":{"type":"integer","minimum":1.5},
		"string":{"type":"integer","minimum":"1"},
		"order":{"type":"string","enum":["y","x"]},
		"nullList":{"type":"string","enum":null},
		"emptyList":{"type":"string","enum":[]},
		"emptyList2":{"type":"string","enum":[]}}`)
	other := decode(t, `{"schema":`+schema+`}`)
	want := decode(t, `[`+mustJSON(t, one)+`,`+mustJSON(t, other)+`]`)

	var tr Trees
	tr.Strings = &Strings{}
	one = tr.Share(one)
	other = tr.Share(other)
	if got := []any{one, other}; !reflect.DeepEqual(got, want) {
		t.Fatalf("shared values changed:\n%s\nwant\n%s", mustJSON(t, got), mustJSON(t, want))
	}
	m := one.(map[string]any)
	versions := m["versions"].([]any)
	s1 := versions[0].(map[string]any)["schema"]
	s2 := versions[1].(map[string]any)["schema"]
	if mapPtr(s1) != mapPtr(s2) {
		t.Error("equal version schemas are two maps")
	}
	if mapPtr(s1) != mapPtr(other.(map[string]any)["schema"]) {
		t.Error("an equal schema of another value is another map")
	}
	a := s1.(map[string]any)["properties"].(map[string]any)["a"]
	if mapPtr(a) != mapPtr(m["same"].(map[string]any)["a"]) {
		t.Error("an equal nested map is another map")
	}
	n := s1.(map[string]any)["properties"].(map[string]any)["n"]
	for _, k := range []string{"float", "string"} {
		if mapPtr(n) == mapPtr(m[k]) {
			t.Errorf("%s: a map differing in a value's type was taken for another", k)
		}
	}
	enum := a.(map[string]any)["enum"].([]any)
	if order := m["order"].(map[string]any)["enum"].([]any); &order[0] == &enum[0] {
		t.Error("lists in another order were taken for one")
	}
	if mapPtr(m["nullList"]) == mapPtr(m["emptyList"]) {
		t.Error("a null list was taken for an empty one")
	}
	if mapPtr(m["emptyList"]) != mapPtr(m["emptyList2"]) {
		t.Error("equal maps holding empty lists are two maps")
	}
	// The keys are the held copies.
	for k := range s1.(map[string]any) {
		if unsafe.StringData(k) != unsafe.StringData(tr.Strings.String(k)) {
			t.Errorf("key %q is not the held copy", k)
		}
	}
}

// Values of other types than decoded JSON ones are kept, and the maps
// holding them are never taken for others (their equality is unknown).
func TestTreesKeepOtherTypes(t *testing.T) {
	type opaque struct{ s []string }
	a := map[string]any{"x": opaque{[]string{"1"}}, "y": int(1)}
	b := map[string]any{"x": opaque{[]string{"1"}}, "y": int(1)}
	var tr Trees
	ra, rb := tr.Share(a), tr.Share(b)
	if mapPtr(ra) == mapPtr(rb) {
		t.Error("maps of unknown values were taken for one")
	}
	if !reflect.DeepEqual(ra, map[string]any{"x": opaque{[]string{"1"}}, "y": int(1)}) {
		t.Errorf("changed: %v", ra)
	}
}

// Random JSON values come out of Share equal to what went in, whatever
// they share with each other.
func TestTreesKeepRandomValues(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var tr Trees
	tr.Strings = &Strings{}
	for i := range 300 {
		v := randomValue(r, 4)
		want := decode(t, mustJSON(t, v))
		got := tr.Share(v)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("value %d changed:\n%s\nwant\n%s", i, mustJSON(t, got), mustJSON(t, want))
		}
	}
}

func randomValue(r *rand.Rand, depth int) any {
	k := r.IntN(9)
	if depth == 0 {
		k = r.IntN(6)
	}
	switch k {
	case 0:
		return nil
	case 1:
		return r.IntN(2) == 0
	case 2:
		return int64(r.IntN(3))
	case 3:
		return float64(r.IntN(3)) + 0.5
	case 4, 5:
		return []string{"", "a", "b", "type"}[r.IntN(4)]
	case 6, 7:
		m := map[string]any{}
		for range r.IntN(4) {
			m[[]string{"a", "b", "type", "items"}[r.IntN(4)]] = randomValue(r, depth-1)
		}
		return m
	default:
		l := []any{}
		for range r.IntN(4) {
			l = append(l, randomValue(r, depth-1))
		}
		return l
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
