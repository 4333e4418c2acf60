package crdsafety

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// values compares the validations and the default of one node.
func (c *comparer) values(segs []string, live, desired *apiextv1.JSONSchemaProps) {
	if len(desired.Enum) > 0 {
		var removed []string
		if len(live.Enum) == 0 {
			removed = []string{"(any value): an enum is added"}
		}
		for _, lv := range live.Enum {
			if !slices.ContainsFunc(desired.Enum, func(dv apiextv1.JSON) bool { return string(dv.Raw) == string(lv.Raw) }) {
				removed = append(removed, string(lv.Raw))
			}
		}
		if len(removed) > 0 {
			allowed := enumValues(desired.Enum)
			c.add(segs, RuleEnumTightened, "enum values removed: "+strings.Join(removed, ", "), false, func(v any, _ bool) bool {
				return !slices.ContainsFunc(allowed, func(a any) bool { return equality.Semantic.DeepEqual(normalize(a), normalize(v)) })
			})
		}
	}
	num := func(name string, l, d *float64, lower bool, lex, dex bool) {
		if d == nil {
			return
		}
		tighter := l == nil || (lower && (*d > *l || *d == *l && dex && !lex)) || (!lower && (*d < *l || *d == *l && dex && !lex))
		if !tighter {
			return
		}
		bound, excl := *d, dex
		c.add(segs, RuleBoundTightened, fmt.Sprintf("%s %s -> %v", name, fmtFloat(l), bound), false, func(v any, _ bool) bool {
			f, ok := toFloat(v)
			if !ok {
				return false
			}
			if lower {
				return f < bound || excl && f == bound
			}
			return f > bound || excl && f == bound
		})
	}
	num("minimum", live.Minimum, desired.Minimum, true, live.ExclusiveMinimum, desired.ExclusiveMinimum)
	num("maximum", live.Maximum, desired.Maximum, false, live.ExclusiveMaximum, desired.ExclusiveMaximum)
	count := func(name string, l, d *int64, lower bool, size func(any) (int64, bool)) {
		if d == nil || l != nil && (lower && *d <= *l || !lower && *d >= *l) {
			return
		}
		bound := *d
		c.add(segs, RuleBoundTightened, fmt.Sprintf("%s %s -> %d", name, fmtInt(l), bound), false, func(v any, _ bool) bool {
			n, ok := size(v)
			return ok && (lower && n < bound || !lower && n > bound)
		})
	}
	count("minLength", live.MinLength, desired.MinLength, true, strLen)
	count("maxLength", live.MaxLength, desired.MaxLength, false, strLen)
	count("minItems", live.MinItems, desired.MinItems, true, listLen)
	count("maxItems", live.MaxItems, desired.MaxItems, false, listLen)
	count("minProperties", live.MinProperties, desired.MinProperties, true, mapLen)
	count("maxProperties", live.MaxProperties, desired.MaxProperties, false, mapLen)
	if desired.Pattern != "" && desired.Pattern != live.Pattern {
		re, err := regexp.Compile(desired.Pattern)
		c.add(segs, RuleBoundTightened, fmt.Sprintf("pattern %q -> %q", live.Pattern, desired.Pattern), false, func(v any, _ bool) bool {
			s, ok := v.(string)
			if !ok {
				return false
			}
			// A pattern Go cannot compile cannot be checked: every
			// value counts.
			return err != nil || !re.MatchString(s)
		})
	}
	ld, dd := rawOf(live.Default), rawOf(desired.Default)
	if ld != dd {
		c.add(segs, RuleDefaultChanged, fmt.Sprintf("default %s -> %s", orNone(ld), orNone(dd)), true, func(_ any, ok bool) bool { return !ok })
	}
}

func rawOf(j *apiextv1.JSON) string {
	if j == nil {
		return ""
	}
	return string(j.Raw)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func fmtFloat(f *float64) string {
	if f == nil {
		return "none"
	}
	return fmt.Sprint(*f)
}

func fmtInt(i *int64) string {
	if i == nil {
		return "none"
	}
	return fmt.Sprint(*i)
}

func enumValues(e []apiextv1.JSON) []any {
	out := make([]any, 0, len(e))
	for _, j := range e {
		var v any
		if err := jsonUnmarshal(j.Raw, &v); err == nil {
			out = append(out, v)
		}
	}
	return out
}

// normalize makes numbers comparable across int64 and float64.
func normalize(v any) any {
	if f, ok := toFloat(v); ok {
		return f
	}
	return v
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case float64:
		return n, true
	case float32:
		return float64(n), true
	}
	return 0, false
}

func strLen(v any) (int64, bool) {
	s, ok := v.(string)
	return int64(len([]rune(s))), ok
}

func listLen(v any) (int64, bool) {
	l, ok := v.([]any)
	return int64(len(l)), ok
}

func mapLen(v any) (int64, bool) {
	m, ok := v.(map[string]any)
	return int64(len(m)), ok
}

// hasType reports whether v is of the JSON schema type t.
func hasType(v any, t string) bool {
	switch t {
	case "string":
		_, ok := v.(string)
		return ok
	case "integer":
		switch n := v.(type) {
		case int64, int, int32:
			return true
		case float64:
			return n == float64(int64(n))
		}
		return false
	case "number":
		_, ok := toFloat(v)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	}
	return false
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
