package identity

// KubeVirtReleaseLine names the KubeVirt release line whose field list the
// KubeVirt algorithm hashes a configuration of this version with: "v1.5",
// "v1.6", "v1.7", or "v1.8" (which holds for v1.8 and every later or
// other version).
func KubeVirtReleaseLine(version string) string { return kubeVirtLayoutOf(version).line }
