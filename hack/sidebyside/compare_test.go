package main

import (
	"strings"
	"testing"
)

func TestCompareStatus(t *testing.T) {
	cond := func(typ, status, reason, msg, at string) map[string]any {
		c := map[string]any{"type": typ, "status": status, "reason": reason, "lastTransitionTime": at, "lastProbeTime": at}
		if msg != "" {
			c["message"] = msg
		}
		return c
	}
	vo := map[string]any{
		"phase":                "Deployed",
		"observedDeploymentID": "26d9c187",
		"operatorVersion":      "v1.9.0",
		"conditions": []any{
			func() map[string]any {
				c := cond("Available", "True", "AllComponentsReady", "All components are ready.", "2026-12-03T07:00:00Z")
				c["lastProbeTime"] = nil
				return c
			}(),
			cond("Degraded", "False", "AllComponentsReady", "All components are ready.", "2026-12-03T07:00:00Z"),
		},
		"generations":              []any{map[string]any{"name": "virt-api"}, map[string]any{"name": "virt-handler"}},
		"observedDeploymentConfig": `{"id":"26d9c187","kubeVirtVersion":"v1.9.0","additionalProperties":{"HypervisorName":"kvm"},"passthroughEnvVars":{}}`,
		"odd":                      "a",
	}
	ex := map[string]any{
		"phase":                "Deployed",
		"observedDeploymentID": "26d9c187",
		"observedGeneration":   int64(1),
		"conditions": []any{
			cond("Available", "True", "AllComponentsReady", "all components are ready", "2026-12-03T08:00:00Z"),
			cond("Degraded", "False", "AllComponentsReady", "", "2026-12-03T08:00:00Z"),
			cond("Synchronized", "True", "AllResourcesSynchronized", "all resources were applied", "2026-12-03T08:00:00Z"),
		},
		"observedDeploymentConfig": `{"id":"26d9c187","kubeVirtVersion":"v1.9.0","additionalProperties":{"HypervisorName":"kvm"},"virtOperatorImage":"quay.io/kubevirt/virt-operator:v1.9.0"}`,
		"odd":                      "b",
	}
	reasons := map[string]string{
		"operatorVersion":                     "version stamp",
		"generations":                         "bookkeeping",
		"observedGeneration":                  "the SDK's",
		"conditions[Available].message":       "wording",
		"conditions[Degraded]":                "any Degraded field",
		"conditions[Degraded].message":        "Degraded message, the longer prefix",
		"conditions[Synchronized]":            "the SDK's condition",
		"observedDeploymentConfig":            "whole struct",
		"observedDeploymentConfig (text)":     "key order",
		"conditions[Available].lastProbeTime": "null is not set",
		"observedDeploymentConfig.passth":     "not a path prefix: never used",
	}
	got := map[string]statusRow{}
	for _, r := range compareStatus(vo, ex, reasons) {
		if _, dup := got[r.Field]; dup {
			t.Errorf("field %s twice", r.Field)
		}
		got[r.Field] = r
	}
	for _, want := range []statusRow{
		{Field: "phase", A: "Deployed", B: "Deployed", Same: true},
		{Field: "observedDeploymentID", A: "26d9c187", B: "26d9c187", Same: true},
		{Field: "operatorVersion", A: "v1.9.0", B: absent, Why: "version stamp"},
		{Field: "observedGeneration", A: absent, B: "1", Why: "the SDK's"},
		{Field: "generations", A: "2 entries", B: absent, Why: "bookkeeping"},
		{Field: "conditions[Available].status", A: "True", B: "True", Same: true},
		{Field: "conditions[Available].reason", A: "AllComponentsReady", B: "AllComponentsReady", Same: true},
		{Field: "conditions[Available].message", A: "All components are ready.", B: "all components are ready", Why: "wording"},
		// Times are each run's own: equal when both are set.
		{Field: "conditions[Available].lastTransitionTime", A: "2026-12-03T07:00:00Z", B: "2026-12-03T08:00:00Z", Same: true,
			Why: "set by both (times of each run's own writes, compared by presence)"},
		{Field: "conditions[Available].lastProbeTime", A: "null", B: "2026-12-03T08:00:00Z", Why: "null is not set"},
		{Field: "conditions[Degraded].message", A: "All components are ready.", B: absent, Why: "Degraded message, the longer prefix"},
		{Field: "conditions[Synchronized].status", A: absent, B: "True", Why: "the SDK's condition"},
		{Field: "conditions[Synchronized].lastProbeTime", A: absent, B: "2026-12-03T08:00:00Z", Why: "the SDK's condition"},
		// Deployment configs are compared by their JSON fields.
		{Field: "observedDeploymentConfig.id", A: "26d9c187", B: "26d9c187", Same: true},
		{Field: "observedDeploymentConfig.additionalProperties.HypervisorName", A: "kvm", B: "kvm", Same: true},
		{Field: "observedDeploymentConfig.passthroughEnvVars", A: "{}", B: absent, Why: "whole struct"},
		{Field: "observedDeploymentConfig.virtOperatorImage", A: absent, B: "quay.io/kubevirt/virt-operator:v1.9.0", Why: "whole struct"},
		{Field: "observedDeploymentConfig (text)", A: vo["observedDeploymentConfig"].(string), B: ex["observedDeploymentConfig"].(string), Why: "key order"},
		{Field: "odd", A: "a", B: "b", Why: "unexplained"},
	} {
		r, ok := got[want.Field]
		if !ok {
			t.Errorf("no row for %s", want.Field)
			continue
		}
		if r != want {
			t.Errorf("%s:\n got  %+v\n want %+v", want.Field, r, want)
		}
	}
	if _, ok := got["conditions"]; ok {
		t.Error("conditions compared as a whole list, not by type")
	}
	if _, ok := got["observedDeploymentConfig"]; ok {
		t.Error("a deployment config compared as one string, not by its fields")
	}

	var sb strings.Builder
	printStatusComparison(&sb, sideVirtOperator, sideExample, compareStatus(vo, ex, reasons))
	if head := strings.Fields(strings.SplitN(sb.String(), "\n", 2)[0]); len(head) != 4 || head[0] != "field" || head[1] != sideVirtOperator || head[2] != sideExample {
		t.Errorf("heading %q", head)
	}
	if strings.Contains(sb.String(), "conditions[Available].lastTransitionTime") {
		t.Errorf("timestamps set by both are listed:\n%s", sb.String())
	}
	for _, want := range []string{"phase", "equal", "differs", "3 condition timestamps set by both", "12 of 27 fields equal", "unexplained differences: 1 (odd)"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("table has no %q:\n%s", want, sb.String())
		}
	}
}

// Lists without distinct types stay one row, by length.
func TestFlattenStatusLists(t *testing.T) {
	got := flattenStatus(map[string]any{
		"sameType": []any{map[string]any{"type": "A"}, map[string]any{"type": "A"}},
		"plain":    []any{"x", "y", "z"},
		"empty":    []any{},
		"notJSON":  map[string]any{"targetDeploymentConfig": "{not json"},
	})
	want := map[string]string{"sameType": "2 entries", "plain": "3 entries", "empty": "0 entries", "notJSON.targetDeploymentConfig": "{not json"}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
}
