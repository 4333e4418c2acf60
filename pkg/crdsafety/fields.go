package crdsafety

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// compareSchemas compares the schema of version (live) with its new one
// (desired); readAt is the version whose objects judge the findings.
func compareSchemas(crd, version, readAt string, live, desired *apiextv1.JSONSchemaProps, prefix string) []Finding {
	c := &comparer{crd: crd, version: version, readAt: readAt, prefix: prefix}
	if live == nil {
		return nil
	}
	if desired == nil {
		// No schema at all: nothing is pruned or validated.
		return nil
	}
	c.node(nil, live, desired)
	return c.out
}

type comparer struct {
	crd, version, readAt, prefix string
	out                          []Finding
}

func pathOf(segs []string) string {
	var b strings.Builder
	for _, s := range segs {
		if s == "[*]" || s == "{*}" {
			b.WriteString(s)
			continue
		}
		b.WriteString("." + s)
	}
	if b.Len() == 0 {
		return "."
	}
	return b.String()
}

func (c *comparer) add(segs []string, rule Rule, detail string, parent bool, check func(any, bool) bool) {
	f := Finding{CRD: c.crd, Version: c.version, Path: pathOf(segs), Rule: rule, Detail: c.prefix + detail,
		Judge: ObjectValues, ReadAt: c.readAt, check: check, parent: parent, segs: slices.Clone(segs)}
	c.out = append(c.out, f)
}

func present(_ any, ok bool) bool { return ok }

// preserves reports whether s keeps fields its properties do not name.
func preserves(s *apiextv1.JSONSchemaProps) bool {
	if s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields {
		return true
	}
	return s.AdditionalProperties != nil && (s.AdditionalProperties.Allows && s.AdditionalProperties.Schema == nil)
}

// node compares one schema node at segs.
func (c *comparer) node(segs []string, live, desired *apiextv1.JSONSchemaProps) {
	if preserves(desired) && len(desired.Properties) == 0 && desired.Items == nil && (desired.AdditionalProperties == nil || desired.AdditionalProperties.Schema == nil) && desired.Type == "" {
		// Everything below is kept as it is.
		return
	}
	if live.Type != desired.Type && live.Type != "" && desired.Type != "" {
		lt, dt := live.Type, desired.Type
		c.add(segs, RuleTypeChanged, fmt.Sprintf("type %s -> %s", lt, dt), false, func(v any, _ bool) bool { return !hasType(v, dt) })
		return
	}
	c.values(segs, live, desired)
	// Properties.
	names := make([]string, 0, len(live.Properties))
	for k := range live.Properties {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		lp := live.Properties[k]
		child := append(slices.Clone(segs), k)
		dp, ok := desired.Properties[k]
		if !ok {
			if preserves(desired) {
				continue
			}
			if desired.AdditionalProperties != nil && desired.AdditionalProperties.Schema != nil {
				// Kept as a map value: its schema compared.
				c.node(child, &lp, desired.AdditionalProperties.Schema)
				continue
			}
			c.add(child, RuleFieldRemoved, "field removed from the schema: the API server prunes its values", false, present)
			continue
		}
		c.node(child, &lp, &dp)
	}
	if preserves(live) && !preserves(desired) && len(desired.Properties) > 0 || preserves(live) && !preserves(desired) && desired.AdditionalProperties == nil && len(desired.Properties) == 0 && live.Type == "object" {
		known := make([]string, 0, len(desired.Properties))
		for k := range desired.Properties {
			known = append(known, k)
		}
		sort.Strings(known)
		c.add(append(slices.Clone(segs), "*", strings.Join(known, "\x00")), RuleFieldRemoved,
			"unknown fields were kept (x-kubernetes-preserve-unknown-fields), now pruned", false, present)
		c.out[len(c.out)-1].Path = pathOf(segs) + ".*"
	}
	if live.AdditionalProperties != nil && live.AdditionalProperties.Schema != nil {
		child := append(slices.Clone(segs), "{*}")
		switch {
		case desired.AdditionalProperties != nil && desired.AdditionalProperties.Schema != nil:
			c.node(child, live.AdditionalProperties.Schema, desired.AdditionalProperties.Schema)
		case !preserves(desired):
			known := make([]string, 0, len(desired.Properties))
			for k := range desired.Properties {
				known = append(known, k)
			}
			c.add(append(slices.Clone(segs), "*", strings.Join(known, "\x00")), RuleFieldRemoved,
				"map values (additionalProperties) no longer allowed: pruned", false, present)
			c.out[len(c.out)-1].Path = pathOf(segs) + ".*"
		}
	}
	if live.Items != nil && live.Items.Schema != nil {
		child := append(slices.Clone(segs), "[*]")
		if desired.Items != nil && desired.Items.Schema != nil {
			c.node(child, live.Items.Schema, desired.Items.Schema)
		}
	}
	// Required: judged where the parent exists.
	for _, r := range desired.Required {
		if slices.Contains(live.Required, r) {
			continue
		}
		c.add(append(slices.Clone(segs), r), RuleRequiredAdded, "field newly required", true, func(_ any, ok bool) bool { return !ok })
	}
}
