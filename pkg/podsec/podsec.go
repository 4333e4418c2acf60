// Package podsec holds the security contexts of the "restricted" Pod
// Security Standard, shared by the workloads the generator declares and the
// dump Jobs the loader runs.
package podsec

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// Pod returns the pod security context: non-root, RuntimeDefault seccomp
// profile.
func Pod() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// Container returns the container security context: non-root, no privilege
// escalation, every capability dropped, RuntimeDefault seccomp profile.
func Container() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		RunAsNonRoot:             ptr.To(true),
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}
