package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
)

// statusRow is one field of two KubeVirt statuses compared.
type statusRow struct {
	Field string `json:"field"`
	A     string `json:"a"` // the baseline's value ("" when absent)
	B     string `json:"b"`
	Same  bool   `json:"same"`
	Why   string `json:"why,omitempty"` // why it differs (or why equal by presence only)
}

// absent stands for a field one status does not have.
const absent = "(absent)"

// timeField: a timestamp of the writer's own moment, compared by presence.
func timeField(field string) bool {
	return strings.HasSuffix(field, "lastProbeTime") || strings.HasSuffix(field, "lastTransitionTime")
}

// kstatusReason explains the conditions kstatus reads, which virt-operator
// does not write.
const kstatusReason = "the engine's kstatus conditions (Ready, Reconciling, Stalled as kstatus defines them, so that Flux, Helm 4's --wait and cli-utils can wait on the CR: docs/API.md); " +
	"SetStatus keeps every condition of the view, KubeVirt's tools ignore types they do not know"

// statusReasons say why a field differs between virt-operator's status
// and the example operator's, by field path or path prefix (the longest
// prefix wins). A difference no reason covers is reported as unexplained.
var statusReasons = map[string]string{
	"operatorVersion": "virt-operator's binary version stamp; the example's SetStatus has no such field",
	"generations":     "virt-operator's bookkeeping of the generation (and a hash) of each CRD, webhook, workload and policy it wrote, to skip unchanged ones; the engine keeps an applied hash on each object instead",
	"observedGeneration": "each is its CR's metadata.generation: virt-operator's first pass Updates the whole typed object (to set the latest-api-version annotation), which writes the spec's empty structs back and makes generation 2; " +
		"the example never writes the spec",
	"outdatedVirtualMachineInstanceWorkloads": "virt-operator's workload-update controller counts VMIs on old launchers; the example has no workload updater",
	"defaultArchitecture":                     "virt-operator records the architecture of its own node for new VMs; not part of installing, and the example does not do it",
	"conditions[Available].message":           "wording: virt-operator writes sentences (\"All components are ready.\"), the engine lower-case phrases",
	"conditions[Created].message":             "wording: virt-operator writes sentences, the engine lower-case phrases",
	"conditions[Progressing].message":         "virt-operator repeats Available's message; the engine writes none on a condition that is False with nothing in progress",
	"conditions[Degraded].message":            "virt-operator repeats Available's message; the engine writes none on a condition that is False with nothing wrong",
	"conditions[Created].lastTransitionTime":  "virt-operator leaves Created's lastTransitionTime null (it sets lastProbeTime only); the example sets both",
	"conditions[Synchronized]":                "the engine's own condition (every object applied as the strategy says); SetStatus keeps every condition of the view, KubeVirt's tools ignore types they do not know",
	"conditions[CertificatesServed]": "the engine's own condition (the certificate each webhook Service presents is the one its Secret holds); SetStatus keeps every condition of the view. " +
		"False here: the harness's stand-in virt-api serves the certificate it read from the Secret first, and the Secret was written again after that",
	"conditions[Ready]":               kstatusReason,
	"conditions[Reconciling]":         kstatusReason,
	"conditions[Stalled]":             kstatusReason,
	"observedDeploymentConfig (text)": "the same JSON fields and values, another key order: virt-operator marshals its struct (id, namespace, registry, …), the example a map (keys sorted)",
	"targetDeploymentConfig (text)":   "the same JSON fields and values, another key order: virt-operator marshals its struct (id, namespace, registry, …), the example a map (keys sorted)",
}

// reasonFor is the reason of the longest matching path prefix.
func reasonFor(field string, reasons map[string]string) string {
	best, why := "", ""
	for p, r := range reasons {
		if (field == p || strings.HasPrefix(field, p+".") || strings.HasPrefix(field, p+"[")) && len(p) > len(best) {
			best, why = p, r
		}
	}
	return why
}

// compareStatus compares two KubeVirt statuses field by field: scalars by
// value, conditions by type (their times by presence only: each is the
// moment of its own operator's write; null counts as not set), deployment
// configs (JSON strings) by their fields and as text, other lists by
// length. Each differing field carries
// the reason of reasons that covers it, or "unexplained". Rows are sorted
// by field.
func compareStatus(a, b map[string]any, reasons map[string]string) []statusRow {
	fa, fb := flattenStatus(a), flattenStatus(b)
	var fields []string
	for f := range fa {
		fields = append(fields, f)
	}
	for f := range fb {
		if _, ok := fa[f]; !ok {
			fields = append(fields, f)
		}
	}
	sort.Strings(fields)
	rows := make([]statusRow, 0, len(fields))
	for _, f := range fields {
		va, oka := fa[f]
		vb, okb := fb[f]
		if !oka {
			va = absent
		}
		if !okb {
			vb = absent
		}
		r := statusRow{Field: f, A: va, B: vb, Same: oka == okb && va == vb}
		if timeField(f) && oka && okb && va != "null" && vb != "null" {
			r.Same, r.Why = true, "set by both (times of each run's own writes, compared by presence)"
		}
		if !r.Same {
			if r.Why = reasonFor(f, reasons); r.Why == "" {
				r.Why = "unexplained"
			}
		}
		rows = append(rows, r)
	}
	return rows
}

// flattenStatus turns a status into field paths and printable values.
func flattenStatus(st map[string]any) map[string]string {
	out := map[string]string{}
	flattenInto(out, "", st)
	return out
}

func flattenInto(out map[string]string, prefix string, v any) {
	join := func(k string) string {
		if prefix == "" {
			return k
		}
		return prefix + "." + k
	}
	switch x := v.(type) {
	case map[string]any:
		for k, sub := range x {
			flattenInto(out, join(k), sub)
		}
		if len(x) == 0 && prefix != "" {
			out[prefix] = "{}"
		}
	case []any:
		if typed, ok := byType(x); ok {
			for t, m := range typed {
				for k, sub := range m {
					if k != "type" {
						flattenInto(out, prefix+"["+t+"]."+k, sub)
					}
				}
			}
			return
		}
		out[prefix] = fmt.Sprintf("%d entries", len(x))
	case string:
		if strings.HasSuffix(prefix, "DeploymentConfig") && strings.HasPrefix(x, "{") {
			var m map[string]any
			if json.Unmarshal([]byte(x), &m) == nil {
				flattenInto(out, prefix, m)
				// And the text itself, whose key order may differ.
				out[prefix+" (text)"] = x
				return
			}
		}
		out[prefix] = x
	case nil:
		out[prefix] = "null"
	default:
		out[prefix] = fmt.Sprint(x)
	}
}

// byType indexes a list of maps that each have a distinct string "type"
// (conditions).
func byType(list []any) (map[string]map[string]any, bool) {
	if len(list) == 0 {
		return nil, false
	}
	out := map[string]map[string]any{}
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, false
		}
		t, ok := m["type"].(string)
		if !ok || out[t] != nil {
			return nil, false
		}
		out[t] = m
	}
	return out, true
}

// printStatusComparison prints the rows as a table: field, both values,
// equal or differs, and why.
func printStatusComparison(w io.Writer, nameA, nameB string, rows []statusRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "field\t%s\t%s\t\twhy\n", nameA, nameB)
	same, times := 0, 0
	for _, r := range rows {
		verdict := "differs"
		if r.Same {
			verdict, same = "equal", same+1
		}
		if r.Same && timeField(r.Field) {
			times++ // summed up below
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Field, clip(r.A, 48), clip(r.B, 48), verdict, r.Why)
	}
	tw.Flush()
	if times > 0 {
		fmt.Fprintf(w, "(%d condition timestamps set by both, not listed: each is the moment of its own operator's write)\n", times)
	}
	var unexplained []string
	for _, r := range rows {
		if !r.Same && r.Why == "unexplained" {
			unexplained = append(unexplained, r.Field)
		}
	}
	fmt.Fprintf(w, "%d of %d fields equal; unexplained differences: %d%s\n", same, len(rows), len(unexplained), listSuffix(unexplained))
}

func listSuffix(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return " (" + strings.Join(slices.Clip(s), ", ") + ")"
}

// clip shortens a value for the table (results.json has it whole).
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
