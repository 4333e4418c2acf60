// Package config holds the operator's kustomize manifests: the Installation
// CRD (crd/, generated), its RBAC (rbac/, role.yaml generated), the
// operator's namespace, Deployment and metrics Service (manager/), all of
// them together (default/) and a sample Installation (samples/). It has no
// Go code; its tests build the kustomizations, check them against the Go
// types and the kind table, and dry-run them against the test cluster.
package config
