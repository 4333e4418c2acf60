package plan

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// IsSecret reports whether ref is of a kind with secret fields
// (kinds.Info.Masked: a Secret's data and stringData), whose values are
// never shown.
func IsSecret(ref strategy.ObjectRef) bool {
	info, _ := kinds.Lookup(ref.GroupKind())
	return len(info.Masked) > 0
}

// MaskSecrets replaces the values of the changes to a Secret's data and
// stringData with their sizes ("(secret, 12 bytes)"), in every step and
// the prune list, so no printer (table, yaml, json) shows a Secret value:
// a plan says that a key changed and how big it is, as kubectl diff does.
// Other fields of a Secret (type, labels) are shown as they are.
func MaskSecrets(p *Plan) {
	if p == nil {
		return
	}
	mask := func(items []Item) {
		for i := range items {
			if !IsSecret(items[i].Ref) {
				continue
			}
			for j, c := range items[i].Changes {
				if field, ok := secretField(items[i].Ref, c.Path); ok {
					items[i].Changes[j] = apply.Change{Path: c.Path, Live: MaskSecretValue(c.Live, field), Desired: MaskSecretValue(c.Desired, field)}
				}
			}
		}
	}
	for s := range p.Steps {
		mask(p.Steps[s].Items)
	}
	mask(p.Prune)
}

// secretField says whether a change path of ref is in one of its kind's
// secret fields (a Secret's "data" or "stringData"), and which.
func secretField(ref strategy.ObjectRef, path string) (string, bool) {
	info, _ := kinds.Lookup(ref.GroupKind())
	for _, f := range info.Masked {
		if path == "."+f || strings.HasPrefix(path, "."+f+".") || strings.HasPrefix(path, "."+f+"[") {
			return f, true
		}
	}
	return "", false
}

// MaskSecretValue returns what may be shown of a Secret value: nil stays
// nil (absent), a string becomes its size (the decoded size for data,
// whose values are base64), a map of values has each value masked.
func MaskSecretValue(v any, field string) any {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		n := len(x)
		if field == "data" {
			if b, err := base64.StdEncoding.DecodeString(x); err == nil {
				n = len(b)
			}
		}
		return fmt.Sprintf("(secret, %d bytes)", n)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = MaskSecretValue(e, field)
		}
		return out
	default:
		return "(secret)"
	}
}
