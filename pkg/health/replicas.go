package health

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/kinds"
)

// Replicas counts the pods of a workload that keeps pods running
// (kinds.KeepsPods), as its status reports them.
type Replicas struct {
	// Desired is the number of pods wanted.
	Desired int32 `json:"desired"`
	// Updated is the number of pods of the current template.
	Updated int32 `json:"updated"`
	// Ready is the number of ready pods.
	Ready int32 `json:"ready"`
}

// replicasOf returns the pod counts of live by the health rule of its
// kind; nil for kinds that keep no pods running.
func replicasOf(live *unstructured.Unstructured, rule kinds.Health) *Replicas {
	get := func(path ...string) int32 {
		v, _, _ := unstructured.NestedInt64(live.Object, path...)
		return int32(v)
	}
	switch rule {
	case kinds.HealthDaemonSet:
		return &Replicas{Desired: get("status", "desiredNumberScheduled"), Updated: get("status", "updatedNumberScheduled"), Ready: get("status", "numberReady")}
	case kinds.HealthDeployment, kinds.HealthStatefulSet:
		r := &Replicas{Desired: 1, Updated: get("status", "updatedReplicas"), Ready: get("status", "readyReplicas")}
		if v, found, _ := unstructured.NestedInt64(live.Object, "spec", "replicas"); found {
			r.Desired = int32(v)
		}
		return r
	}
	return nil
}
