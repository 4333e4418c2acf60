package inventory

import (
	"strings"

	"github.com/installstrategy/installstrategy/pkg/metakeys"
)

// Resource policies: an object whose annotations say "keep" is never
// deleted by prune or uninstall. Helm's annotation is honoured for every
// strategy (a chart's rendering keeps it), and metakeys.ResourcePolicyAnnotation
// says the same for strategies from any source.
const (
	// keepPolicy keeps the object when prune or uninstall would delete it.
	keepPolicy = "keep"
)

// KeptBy returns the annotation (key=value) that keeps an object with
// these annotations from prune and uninstall, or "" when none does. A
// value is compared as Helm's uninstall compares it: surrounding white
// space and case do not matter (Helm's upgrade compares exactly; keeping
// on "Keep" too is the safe reading of both).
func KeptBy(annotations map[string]string) string {
	for _, key := range []string{metakeys.ResourcePolicyAnnotation, metakeys.HelmResourcePolicyAnnotation} {
		v, ok := annotations[key]
		if ok && strings.EqualFold(strings.TrimSpace(v), keepPolicy) {
			return key + "=" + v
		}
	}
	return ""
}
