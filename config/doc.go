// Package config holds the operator's kustomize manifests: the Installation
// CRD (crd/, generated), its RBAC (rbac/, role.yaml generated), the
// operator's namespace, Deployment and metrics Service (manager/), all of
// them together (default/) and a sample Installation (samples/). It has no
// Go code; its tests build the kustomizations, check them against the Go
// types and the kind table, dry-run them against the test cluster, and
// deploy and undeploy them there as `make deploy` does (internal/deploy),
// running the operator with nothing but its ServiceAccount's token to
// prove that rbac/ suffices.
package config
