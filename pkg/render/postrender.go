package render

import (
	"bytes"
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"

	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"sigs.k8s.io/kustomize/kyaml/kio"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/installstrategy/installstrategy/pkg/render/helmspec"
)

// postRenderFilename is the annotation Helm 4 marks each document with
// before a post-renderer sees it, so that the documents can be put back
// in the files they came from (Helm's pkg/action filenameAnnotation).
const postRenderFilename = "postrenderer.helm.sh/postrender-filename"

// postRender runs pr on a render's files as Helm 4's action.Install does
// with its default ("combined") post-render strategy: every document of
// every file (partials and empty files left out), annotated with its file,
// in one stream; the answer is split back into files by that annotation,
// a document without it named generated-by-postrender-N.yaml. The code
// follows Helm's annotateAndMerge and splitAndDeannotate (pkg/action,
// unexported there), so that hooks a post-renderer adds or changes are
// sorted as Helm sorts them.
func postRender(pr helmspec.PostRenderer, files map[string]string) (map[string]string, error) {
	var docs []*kyaml.RNode
	for _, fname := range slices.Sorted(maps.Keys(files)) {
		content := files[fname]
		if strings.HasPrefix(path.Base(fname), "_") || strings.TrimSpace(content) == "" {
			continue
		}
		split := releaseutil.SplitManifests(content)
		keys := slices.Collect(maps.Keys(split))
		sort.Sort(releaseutil.BySplitManifestsOrder(keys))
		for _, key := range keys {
			if strings.TrimSpace(split[key]) == "" {
				continue
			}
			nodes, err := kio.ParseAll(split[key])
			if err != nil {
				return nil, fmt.Errorf("post-render: parsing %s: %w", fname, err)
			}
			for _, n := range nodes {
				if err := n.PipeE(kyaml.SetAnnotation(postRenderFilename, fname)); err != nil {
					return nil, fmt.Errorf("post-render: annotating %s: %w", fname, err)
				}
				docs = append(docs, n)
			}
		}
	}
	merged, err := kio.StringAll(docs)
	if err != nil {
		return nil, fmt.Errorf("post-render: writing merged docs: %w", err)
	}
	out, err := pr.Run(bytes.NewBufferString(merged))
	if err != nil {
		return nil, fmt.Errorf("error while running post render on files: %w", err)
	}
	nodes, err := kio.ParseAll(out.String())
	if err != nil {
		return nil, fmt.Errorf("error while parsing post rendered output: %w", err)
	}
	byFile := map[string][]*kyaml.RNode{}
	for i, n := range nodes {
		meta, err := n.GetMeta()
		if err != nil {
			return nil, fmt.Errorf("error while parsing post rendered output: document %d: %w", i+1, err)
		}
		fname := meta.Annotations[postRenderFilename]
		if fname == "" {
			fname = fmt.Sprintf("generated-by-postrender-%d.yaml", i)
		}
		if err := n.PipeE(kyaml.ClearAnnotation(postRenderFilename)); err != nil {
			return nil, fmt.Errorf("post-render: clearing the filename annotation: %w", err)
		}
		byFile[fname] = append(byFile[fname], n)
	}
	rebuilt := make(map[string]string, len(byFile))
	for fname, docs := range byFile {
		text, err := kio.StringAll(docs)
		if err != nil {
			return nil, fmt.Errorf("post-render: re-writing %s: %w", fname, err)
		}
		rebuilt[fname] = text
	}
	return rebuilt, nil
}
