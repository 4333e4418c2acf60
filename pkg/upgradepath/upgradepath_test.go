package upgradepath

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// fakeSource is a registry of strategies by listed version: each one's
// upgradeFrom, and the versions its trust gate refuses.
type fakeSource struct {
	from      map[string]string
	untrusted map[string]bool
	// signedAs is the version a listed one's strategy really is.
	signedAs map[string]string
	down     bool
	loads    []string
}

func (f *fakeSource) load(_ context.Context, v string) (Candidate, error) {
	f.loads = append(f.loads, v)
	if f.down {
		return Candidate{}, errors.New("connection refused")
	}
	if f.untrusted[v] {
		return Candidate{}, Unusable(v, errors.New("not signed by a trusted key"))
	}
	c := Candidate{Version: v, UpgradeFrom: f.from[v]}
	if s, ok := f.signedAs[v]; ok {
		c.Version = s
	}
	return c, nil
}

func TestPlan(t *testing.T) {
	chain := map[string]string{"v2.0.0": ">= 1.0.0", "v3.0.0": ">= 2.0.0", "v4.0.0": ">= 3.0.0"}
	for name, tc := range map[string]struct {
		installed string
		target    Candidate
		listed    []string
		from      map[string]string
		untrusted map[string]bool
		signedAs  map[string]string
		max       int
		down      bool
		want      string // the path, or the error's text
		loads     int
		skipped   int
	}{
		"direct: nothing loaded": {installed: "v1.0.0", target: Candidate{"v2.0.0", ">= 1.0.0"},
			listed: []string{"v1.5.0"}, want: "v1.0.0 -> v2.0.0", loads: 0},
		"no range admits any": {installed: "v1.0.0", target: Candidate{"v5.0.0", ""}, want: "v1.0.0 -> v5.0.0"},
		"one hop between": {installed: "v1.0.0", target: Candidate{"v3.0.0", ">= 2.0.0"},
			listed: []string{"v1.0.0", "v2.0.0", "v3.0.0", "latest", "sha256-abc.sig"}, from: chain,
			want: "v1.0.0 -> v2.0.0 -> v3.0.0", loads: 1},
		"two hops between": {installed: "v1.0.0", target: Candidate{"v4.0.0", ">= 3.0.0"},
			listed: []string{"v2.0.0", "v3.0.0"}, from: chain, want: "v1.0.0 -> v2.0.0 -> v3.0.0 -> v4.0.0", loads: 2},
		"highest on a shortest chain": {installed: "v1.0.0", target: Candidate{"v3.0.0", ">= 2.0.0"},
			listed: []string{"v2.0.0", "v2.1.0", "v2.2.0"},
			from:   map[string]string{"v2.0.0": ">= 1.0.0", "v2.1.0": ">= 1.0.0", "v2.2.0": ">= 2.0.0"},
			want:   "v1.0.0 -> v2.1.0 -> v3.0.0", loads: 3},
		"shortest, not greedy highest": {installed: "v1.0.0", target: Candidate{"v4.0.0", "~2.0.0"},
			listed: []string{"v2.0.0", "v3.0.0"}, from: map[string]string{"v2.0.0": ">= 1.0.0", "v3.0.0": ">= 1.0.0"},
			want: "v1.0.0 -> v2.0.0 -> v4.0.0"},
		"skip range (OLM skipRange)": {installed: "v1.0.0", target: Candidate{"v4.0.0", ">= 2.0.0"},
			listed: []string{"v2.0.0", "v3.0.0"}, from: map[string]string{"v2.0.0": ">= 1.0.0", "v3.0.0": ">= 1.0.0"},
			want: "v1.0.0 -> v3.0.0 -> v4.0.0"},
		"listed spellings without v": {installed: "1.0.0", target: Candidate{"3.0.0", ">= 2.0.0"},
			listed: []string{"2.0.0", "v2.0.0"}, from: map[string]string{"2.0.0": ">= 1.0.0"}, want: "1.0.0 -> 2.0.0 -> 3.0.0", loads: 1},
		"untrusted hop skipped, another taken": {installed: "v1.0.0", target: Candidate{"v3.0.0", ">= 2.0.0"},
			listed: []string{"v2.0.0", "v2.1.0"}, from: map[string]string{"v2.0.0": ">= 1.0.0", "v2.1.0": ">= 1.0.0"},
			untrusted: map[string]bool{"v2.1.0": true}, want: "v1.0.0 -> v2.0.0 -> v3.0.0", skipped: 1},
		"untrusted only hop: no path": {installed: "v1.0.0", target: Candidate{"v3.0.0", ">= 2.0.0"},
			listed: []string{"v2.0.0"}, from: chain, untrusted: map[string]bool{"v2.0.0": true},
			want: "no upgrade path from v1.0.0 to v3.0.0 through the listed versions: none between them can be loaded; skipped v2.0.0: not signed by a trusted key"},
		"tag holding another version skipped": {installed: "v1.0.0", target: Candidate{"v3.0.0", ">= 2.0.0"},
			listed: []string{"v2.0.0"}, from: chain, signedAs: map[string]string{"v2.0.0": "v2.5.0"},
			want: "skipped v2.0.0: listed as v2.0.0, the strategy is version v2.5.0"},
		"gap: no path": {installed: "v1.0.0", target: Candidate{"v4.0.0", ">= 3.0.0"},
			listed: []string{"v3.0.0"}, from: chain,
			want: `no upgrade path from v1.0.0 to v4.0.0 through v3.0.0 (upgradeFrom ">= 2.0.0"), v4.0.0 (upgradeFrom ">= 3.0.0")`},
		"older and newer listed ignored": {installed: "v2.0.0", target: Candidate{"v4.0.0", ">= 3.0.0"},
			listed: []string{"v1.0.0", "v3.0.0", "v5.0.0"}, from: chain, want: "v2.0.0 -> v3.0.0 -> v4.0.0", loads: 1},
		"too many candidates": {installed: "v1.0.0", target: Candidate{"v4.0.0", ">= 3.0.0"},
			listed: []string{"v2.0.0", "v3.0.0"}, from: chain, max: 1,
			want: "2 versions lie between them, more than the 1 this plan loads"},
		"registry down stops": {installed: "v1.0.0", target: Candidate{"v3.0.0", ">= 2.0.0"},
			listed: []string{"v2.0.0"}, down: true, want: "load v2.0.0: connection refused"},
		"installed not semver": {installed: "latest", target: Candidate{"v3.0.0", ">= 2.0.0"},
			want: `the installed version "latest" is not a semantic version`},
		"downgrade": {installed: "v3.0.0", target: Candidate{"v2.0.0", ""},
			want: "the target v2.0.0 is not newer than the installed v3.0.0"},
	} {
		t.Run(name, func(t *testing.T) {
			f := &fakeSource{from: tc.from, untrusted: tc.untrusted, signedAs: tc.signedAs, down: tc.down}
			p, err := Plan(t.Context(), tc.installed, tc.target, tc.listed, f.load, Options{MaxCandidates: tc.max})
			got := ""
			if err != nil {
				got = err.Error()
			} else {
				got = p.String()
				if len(p.Skipped) != tc.skipped {
					t.Errorf("skipped %v, want %d", p.Skipped, tc.skipped)
				}
				if last := p.Hops[len(p.Hops)-1]; last != (Hop{tc.target.Version, tc.target.UpgradeFrom}) {
					t.Errorf("last hop %v, want the target", last)
				}
			}
			if !strings.Contains(got, tc.want) || (err == nil && got != tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if tc.loads > 0 || strings.HasPrefix(name, "direct") {
				if len(f.loads) != tc.loads {
					t.Errorf("loaded %v, want %d loads", f.loads, tc.loads)
				}
			}
		})
	}
}

// TestPlanHopsAdmitEachOther checks every planned hop against the one
// before it, on a larger graph.
func TestPlanHopsAdmitEachOther(t *testing.T) {
	from := map[string]string{}
	var listed []string
	for _, v := range []string{"1.1.0", "1.2.0", "1.3.0", "2.0.0", "2.1.0", "2.2.0", "3.0.0", "3.1.0"} {
		listed = append(listed, "v"+v)
	}
	// Each minor admits the previous two minors of its major, a major
	// only the last minor of the previous one (KubeVirt-like).
	from["v1.1.0"], from["v1.2.0"], from["v1.3.0"] = ">= 1.0.0", ">= 1.0.0", ">= 1.1.0"
	from["v2.0.0"], from["v2.1.0"], from["v2.2.0"] = ">= 1.3.0", ">= 2.0.0", ">= 2.0.0"
	from["v3.0.0"], from["v3.1.0"] = ">= 2.2.0", ">= 3.0.0"
	f := &fakeSource{from: from}
	p, err := Plan(t.Context(), "v1.0.0", Candidate{"v3.2.0", ">= 3.1.0"}, listed, f.load, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"v1.0.0", "v1.2.0", "v1.3.0", "v2.0.0", "v2.2.0", "v3.0.0", "v3.1.0", "v3.2.0"}
	if !reflect.DeepEqual(p.Versions(), want) {
		t.Fatalf("path %v, want %v", p.Versions(), want)
	}
}

func TestNeeded(t *testing.T) {
	for _, c := range []struct {
		installed string
		target    Candidate
		want      bool
	}{
		{"v1.0.0", Candidate{Version: "v3.0.0", UpgradeFrom: ">= 2.0.0"}, true},
		{"v2.0.0", Candidate{Version: "v3.0.0", UpgradeFrom: ">= 2.0.0"}, false},
		{"v1.0.0", Candidate{Version: "v3.0.0"}, false},
		{"v4.0.0", Candidate{Version: "v3.0.0", UpgradeFrom: ">= 2.0.0"}, false},
		{"v3.0.0", Candidate{Version: "v3.0.0", UpgradeFrom: ">= 2.0.0"}, false},
		{"latest", Candidate{Version: "v3.0.0", UpgradeFrom: ">= 2.0.0"}, false},
		{"v1.0.0", Candidate{Version: "v3.0.0", UpgradeFrom: ">= nonsense"}, false},
	} {
		if got := Needed(c.installed, c.target); got != c.want {
			t.Errorf("Needed(%s, %+v) = %t, want %t", c.installed, c.target, got, c.want)
		}
	}
}
