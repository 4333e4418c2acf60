package oci

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Media types of a Helm chart in an OCI registry, as helm push writes it.
const (
	// ChartConfigMediaType is the media type of a chart's config: its
	// Chart.yaml as JSON.
	ChartConfigMediaType = "application/vnd.cncf.helm.config.v1+json"
	// ChartLayerMediaType is the media type of the chart archive layer.
	ChartLayerMediaType = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
	// maxChartConfigBytes bounds a chart's config blob.
	maxChartConfigBytes = 1 << 20
)

// DefaultMaxChartBytes is the largest chart archive PullChart reads unless
// told otherwise (Helm's own loader refuses archives over 20 MiB
// decompressed; a packaged chart is rarely over 1 MiB).
const DefaultMaxChartBytes = 4 << 20

// ErrNotChart: the reference names something that is not a Helm chart.
var ErrNotChart = errors.New("not a Helm chart")

// PullChart reads the Helm chart ref names (an OCI manifest with a chart
// config and one chart archive layer, as helm push writes it) and checks
// its layer's size and digest; limit bounds the archive (0 means
// DefaultMaxChartBytes). The returned Artifact's Text is the chart
// archive (.tgz), Digest the manifest's and Meta the chart's name (as
// Product) and version, from the config.
func (c *Client) PullChart(ctx context.Context, ref string, limit int64) (*Artifact, error) {
	r, err := c.Parse(ref)
	if err != nil {
		return nil, err
	}
	desc, err := remote.Get(r, c.remote(ctx)...)
	if err != nil {
		return nil, refError(ref, "pull manifest", err)
	}
	m, err := chartManifest(desc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	if limit <= 0 {
		limit = DefaultMaxChartBytes
	}
	config, err := c.readBlob(ctx, ref, r.Context(), m.Config, maxChartConfigBytes)
	if err != nil {
		return nil, fmt.Errorf("chart config: %w", err)
	}
	var meta struct{ Name, Version string }
	if err := json.Unmarshal(config, &meta); err != nil {
		return nil, fmt.Errorf("%s: chart config: %w", ref, err)
	}
	tgz, err := c.readBlob(ctx, ref, r.Context(), m.Layers[0], limit)
	if err != nil {
		return nil, err
	}
	return &Artifact{Reference: r.Context().Digest(desc.Digest.String()).String(), Repository: r.Context().String(),
		Digest: desc.Digest.String(), Meta: Meta{Product: meta.Name, Version: meta.Version, Digest: m.Layers[0].Digest.String()},
		Text: tgz, LayerBytes: m.Layers[0].Size}, nil
}

// chartManifest returns the manifest of a Helm chart, or an error wrapping
// ErrNotChart that says what the descriptor is instead.
func chartManifest(desc *remote.Descriptor) (*v1.Manifest, error) {
	if desc.MediaType != types.OCIManifestSchema1 {
		return nil, fmt.Errorf("%w: media type %s (want an OCI manifest with config %s)", ErrNotChart, desc.MediaType, ChartConfigMediaType)
	}
	m, err := v1.ParseManifest(bytes.NewReader(desc.Manifest))
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if m.Config.MediaType != ChartConfigMediaType {
		return nil, fmt.Errorf("%w: config media type %s (want %s)", ErrNotChart, m.Config.MediaType, ChartConfigMediaType)
	}
	return oneLayer(m, ChartLayerMediaType, ErrNotChart)
}
