package health

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// RunOutcome says whether a run-to-completion object (a Job, or a bare
// Pod) has finished, as Helm's hook wait (WatchUntilReady) decides it: a
// Job when its Complete or Failed condition is True, a Pod when its phase
// is Succeeded or Failed. Objects of any other kind are finished once they
// exist, and succeeded. reason says why a finished object failed.
func RunOutcome(live *unstructured.Unstructured) (finished, succeeded bool, reason string) {
	switch live.GroupVersionKind().GroupKind().String() {
	case "Job.batch":
		conds, _, _ := unstructured.NestedSlice(live.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m == nil || m["status"] != "True" {
				continue
			}
			switch m["type"] {
			case "Complete":
				return true, true, ""
			case "Failed":
				return true, false, fmt.Sprintf("job failed: %v: %v", m["reason"], m["message"])
			}
		}
		return false, false, ""
	case "Pod":
		phase, _, _ := unstructured.NestedString(live.Object, "status", "phase")
		switch phase {
		case "Succeeded":
			return true, true, ""
		case "Failed":
			msg, _, _ := unstructured.NestedString(live.Object, "status", "message")
			return true, false, "pod failed: " + msg
		}
		return false, false, ""
	}
	return true, true, ""
}
