// Package kustomize builds kustomize overlays with kustomize's krusty, as
// `kubectl kustomize` does, into a manifests text that becomes a strategy.
// It touches no cluster.
package kustomize

import (
	"fmt"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Resources builds the kustomization in dir with krusty and
// kubectl's options (files only below the kustomization's root, no
// plugins, no helm charts, the kustomization's sortOptions else
// kustomize's legacy order): the objects `kubectl kustomize dir` prints,
// in its order.
func Resources(dir string) (resmap.ResMap, error) {
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionUnspecified // kustomize build's --reorder default
	rm, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	return rm, nil
}

// Build returns the text `kubectl kustomize dir` prints: the built
// objects as YAML documents separated by --- lines.
func Build(dir string) ([]byte, error) {
	rm, err := Resources(dir)
	if err != nil {
		return nil, err
	}
	out, err := rm.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	return out, nil
}
