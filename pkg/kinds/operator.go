package kinds

import "k8s.io/apimachinery/pkg/runtime/schema"

// keepsPodsRules are the health rules of workloads that keep a number of
// pods running, which their status counts.
var keepsPodsRules = map[Health]bool{HealthDeployment: true, HealthDaemonSet: true, HealthStatefulSet: true}

// KeepsPods reports whether objects of the kind keep a number of pods
// running, which their status counts (desired, updated, ready): the
// workloads an installation reports as its components and whose changes
// the operator watches as drift. Jobs and CronJobs, whose pods run to
// completion, do not.
func KeepsPods(gk schema.GroupKind) bool {
	info, ok := Lookup(gk)
	return ok && info.PodTemplate != nil && keepsPodsRules[info.Health]
}

// PodKeepers returns the kinds that KeepsPods, in table order.
func PodKeepers() []Info {
	var out []Info
	for _, info := range table {
		if KeepsPods(info.GroupKind) {
			out = append(out, info)
		}
	}
	return out
}

// ConfiguresWebhooks reports whether objects of the kind configure
// admission webhooks: a list of webhooks (Dials.Each), each naming the
// Service the API server calls.
func ConfiguresWebhooks(gk schema.GroupKind) bool {
	info, _ := Lookup(gk)
	return info.Dials != nil && info.Dials.Each != nil
}
