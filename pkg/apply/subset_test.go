package apply

import (
	"encoding/json"
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
			var d, l map[string]any
			if err := json.Unmarshal([]byte(tc.desired), &d); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tc.live), &l); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range Differences(d, l) {
				got = append(got, c.Path)
			}
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
	if !Subset(map[string]any{"n": int64(3)}, map[string]any{"n": float64(3)}) {
		t.Error("int64(3) vs float64(3)")
	}
	if !Subset(map[string]any{"n": json.Number("3")}, map[string]any{"n": int64(3)}) {
		t.Error("json.Number vs int64")
	}
}
