// Package render turns a Helm chart into a manifests text that becomes a
// strategy: HelmChart and HelmArchive render a chart exactly as
// `helm template --include-crds` does, with Helm's own chart, engine and
// release packages, and say what became of each of the chart's hooks.
// Neither touches a cluster, and neither links Helm's install action, CLI,
// getters or registry client: the operator's chart renderer
// (cmd/installstrategy-helm-render) renders the charts the operator pulled
// with this package alone.
//
// Subpackages: helmspec holds a render's inputs and outputs (this
// package's HelmOptions, HelmResult and Hook are its types) without Helm's
// engine; helmexec renders in that helper process, for a program that
// must not link the engine (the operator); helmchart finds and configures
// a chart as the helm CLI does (a folder, a .tgz or an oci:// reference;
// values files and --set); kustomize builds an overlay with kustomize's
// krusty, as `kubectl kustomize` does.
package render
