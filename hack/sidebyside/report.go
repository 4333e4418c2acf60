package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// reprint prints the report of a results.json that writeResults wrote.
func reprint(w io.Writer, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc struct {
		Settings struct {
			Rounds        int     `json:"rounds"`
			Nodes         int     `json:"nodes"`
			SettleSeconds float64 `json:"settleSeconds"`
		} `json:"settings"`
		Phases []phaseResult `json:"phases"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	s := doc.Settings
	printReport(w, &config{rounds: s.Rounds, nodes: s.Nodes, settle: time.Duration(s.SettleSeconds * float64(time.Second))}, doc.Phases)
	return nil
}

func mib(kib int64) float64 { return float64(kib) / 1024 }

// row is one measured quantity of a phase.
type row struct {
	name  string
	value func(phaseResult) float64
	unit  string // printf verb for one value
	time  bool   // lower is faster: the ratio also says "x faster"
}

// The rows the goals are about.
const (
	rowTime     = "trigger -> done (s)"
	rowRequests = "own requests, trigger -> done"
	rowRSS      = "peak RSS after the idle window (MiB)"
)

var rows = []row{
	{rowTime, func(r phaseResult) float64 { return r.TriggerToDone }, "%.2f", true},
	{"process start -> ready (s)", func(r phaseResult) float64 { return r.StartToReady }, "%.2f", true},
	{"process start -> done (s)", func(r phaseResult) float64 { return r.StartToDone }, "%.2f", true},
	{rowRequests, func(r phaseResult) float64 { return r.Own.total() }, "%.0f", false},
	{"own requests, process start -> done", func(r phaseResult) float64 { return r.OwnFromStart.total() }, "%.0f", false},
	{"apiserver requests, trigger -> done (all clients)", func(r phaseResult) float64 { return r.APIServer.total() }, "%.0f", false},
	{"own requests per 30 s idle after done", func(r phaseResult) float64 { return per30(r.IdleOwn, r.IdleSeconds) }, "%.0f", false},
	{"apiserver requests per 30 s idle (all clients)", func(r phaseResult) float64 { return per30(r.IdleAPI, r.IdleSeconds) }, "%.0f", false},
	{"peak RSS at done (MiB)", func(r phaseResult) float64 { return mib(r.AtDone.PeakRSSKiB) }, "%.0f", false},
	{rowRSS, func(r phaseResult) float64 { return mib(r.Settled.PeakRSSKiB) }, "%.0f", false},
	{"CPU s at done (since process start)", func(r phaseResult) float64 { return r.AtDone.CPUSeconds }, "%.2f", false},
	{"CPU s after the idle window", func(r phaseResult) float64 { return r.Settled.CPUSeconds }, "%.2f", false},
	{"strategy objects present", func(r phaseResult) float64 { return float64(r.Objects.Present) }, "%.0f", false},
	{"error lines in the operator's log", func(r phaseResult) float64 { return float64(r.LogErrors) }, "%.0f", false},
}

func per30(c counts, seconds float64) float64 {
	if seconds <= 0 {
		return 0
	}
	return c.total() * 30 / seconds
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// printReport prints one table per phase: every round of each side, their
// means, and each side's mean ÷ virt-operator's (the baseline); then, for
// each phase in which virt-operator and the example operator both wrote
// the KubeVirt CR's status, the two statuses compared field by field.
func printReport(w io.Writer, c *config, results []phaseResult) {
	var phases []string
	present := map[string]bool{}
	for _, r := range results {
		if !slices.Contains(phases, r.Phase) {
			phases = append(phases, r.Phase)
		}
		present[r.Side] = true
	}
	var sides []string
	for _, s := range allSides {
		if present[s] {
			sides = append(sides, s)
		}
	}
	others := slices.DeleteFunc(slices.Clone(sides), func(s string) bool { return s == sideVirtOperator })
	fmt.Fprintf(w, "\nSide by side: %s (baseline %s), %d round(s), %d CPUs (%s), %d kwok nodes, idle window %s\n",
		strings.Join(sides, ", "), sideVirtOperator, c.rounds, runtime.NumCPU(), cpuModel(), c.nodes, c.settle)
	fmt.Fprintln(w, "done = virt-operator and example (examples/kubevirt-operator): KubeVirt Available=True at the version; installstrategy: Installation Deployed, Available=True, observedVersion the version")
	for _, ph := range phases {
		by := map[string][]phaseResult{}
		trigger := ""
		for _, r := range results {
			if r.Phase == ph {
				by[r.Side] = append(by[r.Side], r)
				trigger = r.Trigger
			}
		}
		fmt.Fprintf(w, "\n== %s (trigger: %s)\n", ph, trigger)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "\t%s", strings.Join(sides, "\t"))
		for _, o := range others {
			fmt.Fprintf(tw, "\t%s/vo", ratioName(o))
		}
		fmt.Fprintln(tw)
		for _, rw := range rows {
			fmt.Fprintf(tw, "%s", rw.name)
			for _, s := range sides {
				fmt.Fprintf(tw, "\t%s", cell(values(by[s], rw), rw.unit))
			}
			for _, o := range others {
				fmt.Fprintf(tw, "\t%s", ratio(values(by[sideVirtOperator], rw), values(by[o], rw), rw.time))
			}
			fmt.Fprintln(tw)
		}
		var loads []string
		for _, side := range sides {
			for _, r := range by[side] {
				loads = append(loads, fmt.Sprintf("%s r%d: %s", side, r.Round, r.Load))
			}
		}
		fmt.Fprintf(tw, "load average at done\t%s\n", strings.Join(loads, "; "))
		tw.Flush()
		for _, side := range sides {
			var missing []string
			for _, r := range by[side] {
				for _, m := range r.Objects.Missing {
					if !slices.Contains(missing, m) {
						missing = append(missing, m)
					}
				}
				for _, d := range r.Dumps {
					fmt.Fprintf(w, "%s r%d dump stand-in: %s\n", side, r.Round, d)
				}
			}
			if len(missing) > 0 {
				fmt.Fprintf(w, "strategy objects %s did not create: %s\n", side, strings.Join(missing, ", "))
			}
		}
		for _, o := range others {
			if len(by[sideVirtOperator]) > 0 && len(by[o]) > 0 {
				fmt.Fprintf(w, "%s: %s\n", o, goals(by[sideVirtOperator], by[o]))
			}
		}
		if a, b := firstStatus(by[sideVirtOperator]), firstStatus(by[sideExample]); a != nil && b != nil {
			fmt.Fprintf(w, "\nKubeVirt CR status after the idle window, %s: virt-operator and example (round 1 of each)\n", ph)
			printStatusComparison(w, sideVirtOperator, sideExample, compareStatus(a, b, statusReasons))
		}
	}
}

// ratioName is a side's name in a ratio column's heading.
func ratioName(side string) string {
	if side == sideOurs {
		return "ours"
	}
	return side
}

// firstStatus is the CR status of the first round that has one.
func firstStatus(rs []phaseResult) map[string]any {
	for _, r := range rs {
		if r.CRStatus != nil {
			return r.CRStatus
		}
	}
	return nil
}

func values(rs []phaseResult, rw row) []float64 {
	var v []float64
	for _, r := range rs {
		v = append(v, rw.value(r))
	}
	return v
}

func cell(v []float64, unit string) string {
	if len(v) == 0 {
		return "-"
	}
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf(unit, x)
	}
	if len(v) == 1 {
		return parts[0]
	}
	return strings.Join(parts, " ") + " (mean " + fmt.Sprintf(unit, mean(v)) + ")"
}

func ratio(vo, us []float64, isTime bool) string {
	if len(vo) == 0 || len(us) == 0 || mean(vo) == 0 {
		return "-"
	}
	q := mean(us) / mean(vo)
	if isTime && q > 0 {
		return fmt.Sprintf("%.2f (%.2fx faster)", q, 1/q)
	}
	return fmt.Sprintf("%.2f", q)
}

// goals checks issue #13's (b): at least 2x faster to done, fewer
// requests, under half the memory (means of the rounds).
func goals(vo, us []phaseResult) string {
	m := func(rs []phaseResult, name string) float64 {
		i := slices.IndexFunc(rows, func(r row) bool { return r.name == name })
		return mean(values(rs, rows[i]))
	}
	speed := m(vo, rowTime) / m(us, rowTime)
	req := m(us, rowRequests) / m(vo, rowRequests)
	mem := m(us, rowRSS) / m(vo, rowRSS)
	yes := func(ok bool) string {
		if ok {
			return "met"
		}
		return "MISSED"
	}
	return fmt.Sprintf("goals (#13 b): >= 2x faster to done: %s (%.2fx); fewer own requests: %s (%.2f of virt-operator's); under half the peak RSS: %s (%.2f)",
		yes(speed >= 2), speed, yes(req < 1), req, yes(mem < 0.5), mem)
}

func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}
