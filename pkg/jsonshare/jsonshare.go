// Package jsonshare holds decoded JSON values (map[string]any, []any,
// string, int64, float64, bool and nil, as encoding/json and the strategy
// parser make them) with one copy of what repeats in them. A KubeVirt
// strategy's CRD schemas repeat a few hundred keys ("type", "description",
// "properties") tens of thousands of times, the same descriptions across
// CRDs, and whole subschemas: 13 of v1.9.0's 21 CRDs have the same schema
// at each of their versions. Parsed as written, KubeVirt v1.9.0 held 11.7
// MB of the heap, the text of every document included (the parser's
// strings were substrings of it); with one copy of each string 6.0 MB, and
// with one copy of each equal map and list of the schemas too 1.7 MB.
//
// Values that share parts must not be changed afterwards: a change through
// one place would show in every other. The strategy's bulky fields and the
// informer cache's copies of them are read-only already
// (kinds.Info.Bulky); strings are immutable anyway.
package jsonshare

import (
	"hash/maphash"
	"math"
	"math/bits"
	"reflect"
	"strings"
)

// Strings holds one copy of each string given to it. The zero value is
// ready; it is not safe for concurrent use.
type Strings struct {
	// held maps each string to its copy, boxed (a string in a
	// map[string]any or []any is an interface holding a pointer to a
	// string header): the values that hold it share the box too. The
	// key is that same copy.
	held map[string]any
}

// String returns the held copy of s. The first time, it holds a copy of s,
// never s itself: a string cut from a larger one (a substring of the
// document text) would keep all of that text alive.
func (t *Strings) String(s string) string { return t.Value(s).(string) }

// Value returns the held copy of s (see String) as a value for a
// map[string]any or []any: equal values share the box as well as the
// bytes.
func (t *Strings) Value(s string) any {
	if v, ok := t.held[s]; ok {
		return v
	}
	if t.held == nil {
		t.held = map[string]any{}
	}
	c := strings.Clone(s)
	v := any(c)
	t.held[c] = v
	return v
}

// Len is the number of distinct strings held.
func (t *Strings) Len() int { return len(t.held) }

// Trees holds one copy of each map and list given to it that equals
// another (hash consing), and, with Strings, one copy of their keys and
// strings. The zero value is ready (it leaves strings as they are); it is
// not safe for concurrent use.
type Trees struct {
	// Strings, when not nil, holds the keys and strings; nil leaves them
	// (the strategy parser's are held already).
	Strings *Strings
	seed    maphash.Seed
	// held maps a value's hash to the maps and lists of that hash held.
	held map[uint64][]any
}

// Share returns v with each map and list in it (v included) that equals
// one given before replaced by that one, and its keys and strings by the
// held copies (with Strings). The maps and lists of v are changed in place
// (their keys and elements replaced), so v must be the caller's own, and
// neither v nor what Share returns may be changed afterwards. Values of
// other types than the decoded JSON ones are kept, and a map or list that
// holds one is never taken for another.
func (t *Trees) Share(v any) any {
	if t.held == nil {
		t.held = map[uint64][]any{}
		t.seed = maphash.MakeSeed()
	}
	v, _, _ = t.share(v)
	return v
}

// Hash kinds, so that equal bits of different types hash apart.
const (
	hashNil = 0x51ed2701f3a5c1b7 + iota
	hashTrue
	hashFalse
	hashInt
	hashFloat
	hashString
	hashMap
	hashList
	hashOther
)

// mix is a 64-bit finaliser (MurmurHash3's fmix64).
func mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// share returns the held copy of v, v's hash, which depends only on its
// content, and whether the copy is another value than v.
func (t *Trees) share(v any) (any, uint64, bool) {
	switch x := v.(type) {
	case nil:
		return nil, hashNil, false
	case bool:
		if x {
			return v, hashTrue, false
		}
		return v, hashFalse, false
	case int64:
		return v, mix(uint64(x) ^ hashInt), false
	case float64:
		return v, mix(math.Float64bits(x) ^ hashFloat), false
	case string:
		h := mix(maphash.String(t.seed, x) ^ hashString)
		if t.Strings == nil {
			return v, h, false
		}
		return t.Strings.Value(x), h, true
	case map[string]any:
		if x == nil {
			return v, hashOther, false
		}
		// Entries in any order: a sum of the entries' hashes.
		h := uint64(hashMap) + uint64(len(x))
		for k, e := range x {
			c, ch, other := t.share(e)
			if t.Strings != nil {
				x[t.Strings.String(k)] = c // replaces the key too
			} else if other {
				x[k] = c
			}
			h += mix(maphash.String(t.seed, k) ^ bits.RotateLeft64(ch, 31))
		}
		return t.hold(v, mix(h))
	case []any:
		if x == nil {
			return v, hashOther, false
		}
		h := uint64(hashList) + uint64(len(x))
		for i, e := range x {
			c, ch, other := t.share(e)
			if other {
				x[i] = c
			}
			h = mix(h ^ ch)
		}
		return t.hold(v, h)
	}
	return v, hashOther, false
}

// hold returns the held map or list equal to v, holding v when there is
// none. v's own maps and lists are held ones already, so equality is one
// level deep: the same keys, and the same (identical) values.
func (t *Trees) hold(v any, h uint64) (any, uint64, bool) {
	for _, c := range t.held[h] {
		if sameShape(c, v) {
			return c, h, true
		}
	}
	t.held[h] = append(t.held[h], v)
	return v, h, false
}

// sameShape reports whether a and b, a map or list each, have identical
// entries.
func sameShape(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !identical(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !identical(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return false
}

// identical reports whether a and b are the same held value: the same map
// or list (not only an equal one), or equal scalars of the decoded JSON
// types.
func identical(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		return ok && reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer()
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) || (x == nil) != (y == nil) {
			return false
		}
		return len(x) == 0 || &x[0] == &y[0]
	case string:
		y, ok := b.(string)
		return ok && x == y
	case int64:
		y, ok := b.(int64)
		return ok && x == y
	case float64:
		y, ok := b.(float64)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case nil:
		return b == nil
	}
	return false
}
