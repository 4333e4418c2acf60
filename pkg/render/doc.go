// Package render turns a Helm chart into a manifests text that becomes a
// strategy: HelmChart and HelmArchive render a chart exactly as
// `helm template --include-crds` does, with Helm's own chart, engine and
// release packages, and say what became of each of the chart's hooks.
// Neither touches a cluster, and neither links Helm's install action, CLI,
// getters or registry client: the operator renders the charts it pulled
// itself with this package alone.
//
// Subpackages: helmchart finds and configures a chart as the helm CLI does
// (a folder, a .tgz or an oci:// reference; values files and --set), and
// kustomize builds an overlay with kustomize's krusty, as
// `kubectl kustomize` does.
package render
