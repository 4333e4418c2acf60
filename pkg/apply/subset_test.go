package apply

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestDifferences(t *testing.T) {
	for _, tc := range []struct {
		name          string
		desired, live string
		want          []string
	}{
		{"equal", `{"a":1,"b":{"c":"x"}}`, `{"a":1,"b":{"c":"x"}}`, nil},
		{"server defaults ignored", `{"spec":{"c":[{"name":"m"}]}}`, `{"spec":{"c":[{"name":"m","tmp":"/dev"}]},"status":{}}`, nil},
		{"empty and null match absent", `{"a":{},"b":[],"c":null}`, `{}`, nil},
		{"zero scalars match absent", `{"a":false,"b":0,"c":""}`, `{}`, nil},
		{"false is not true", `{"a":false}`, `{"a":true}`, []string{".a"}},
		{"changed scalar", `{"spec":{"image":"a"}}`, `{"spec":{"image":"b"}}`, []string{".spec.image"}},
		{"missing field", `{"spec":{"image":"a"}}`, `{"spec":{}}`, []string{".spec.image"}},
		{"list length", `{"l":[1,2]}`, `{"l":[1]}`, []string{".l"}},
		{"list element", `{"l":[{"a":1},{"a":2}]}`, `{"l":[{"a":1},{"a":3}]}`, []string{".l[1].a"}},
		{"type change", `{"a":{"b":1}}`, `{"a":"x"}`, []string{".a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := changedPaths(t, differences, tc.desired, tc.live)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestNumbersCompareByValue(t *testing.T) {
	if !subset(map[string]any{"n": int64(3)}, map[string]any{"n": float64(3)}) {
		t.Error("int64(3) vs float64(3)")
	}
	if !subset(map[string]any{"n": json.Number("3")}, map[string]any{"n": int64(3)}) {
		t.Error("json.Number vs int64")
	}
}

func TestAdditions(t *testing.T) {
	for _, tc := range []struct {
		name          string
		desired, live string
		want          []string
	}{
		{"equal", `{"l":[1,2]}`, `{"l":[1,2]}`, nil},
		{"entries added around", `{"l":[{"k":"a"},{"k":"b"}]}`, `{"l":[{"k":"x"},{"k":"a","v":1},{"k":"y"},{"k":"b"},{"k":"z"}]}`, nil},
		{"fields added", `{"m":{"a":"1"}}`, `{"m":{"a":"1","b":"2"}}`, nil},
		{"order matters", `{"l":["a","b"]}`, `{"l":["b","a","c"]}`, []string{".l"}},
		{"entry missing", `{"l":["a","b"]}`, `{"l":["a","c","d"]}`, []string{".l"}},
		{"shorter list", `{"l":["a","b"]}`, `{"l":["a"]}`, []string{".l"}},
		{"same length compares by index", `{"l":[{"a":1}]}`, `{"l":[{"a":2}]}`, []string{".l[0].a"}},
		{"changed value", `{"m":{"a":"1"}}`, `{"m":{"a":"2","b":"1"}}`, []string{".m.a"}},
		{"nested lists", `{"c":[{"args":["--x"]}]}`, `{"c":[{"args":["--x","--y"]}]}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := changedPaths(t, additions, tc.desired, tc.live); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// changedPaths returns the paths of the changes compare finds between two
// JSON objects.
func changedPaths(t *testing.T, compare func(desired, live any) []Change, desired, live string) []string {
	t.Helper()
	var d, l map[string]any
	if err := json.Unmarshal([]byte(desired), &d); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(live), &l); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range compare(d, l) {
		got = append(got, c.Path)
	}
	return got
}
