// Package render turns the two forms most products ship in, Helm charts and
// kustomize overlays, into a manifests text that becomes a strategy.
//
// Helm renders a chart with Helm's own SDK (helm.sh/helm/v4) exactly as
// `helm template --include-crds` does, and says what it did with each of
// the chart's hooks; Kustomize builds an overlay with kustomize's krusty,
// as `kubectl kustomize` does. Neither touches a cluster.
package render
