package operator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/render/helmexec"
	"github.com/installstrategy/installstrategy/pkg/render/helmspec"
	"github.com/installstrategy/installstrategy/pkg/source"
)

// Bounds of a chart the operator renders: the chart runs as templates (in
// a helper process, unless Options.HelmRenderer says otherwise), so its
// size and its render time are capped.
const (
	// MaxChartBytes is the largest chart archive (compressed) pulled.
	MaxChartBytes = oci.DefaultMaxChartBytes
	// HelmRenderTimeout bounds one render.
	HelmRenderTimeout = 30 * time.Second
	// maxRenderedCharts bounds the render cache.
	maxRenderedCharts = 64
)

// helmRemote is the remote source of a Helm source.
func helmRemote(src *v1alpha1.HelmStrategySource) remoteSource {
	return remoteSource{what: "helm source", refs: []string{src.Chart}, Reference: src.Chart,
		Digest: src.Digest, SecretRef: src.SecretRef, Insecure: src.Insecure, kind: "chart", verify: src.Verify,
		pull: func(ctx context.Context, c *oci.Client, ref string) (*oci.Artifact, error) {
			return c.PullChart(ctx, ref, MaxChartBytes)
		}}
}

// renderedCharts caches renders by chart digest and inputs (a chart's
// render is a function of them), so a resync renders nothing again.
type renderedCharts struct {
	mu   sync.Mutex
	done map[string]*rendered
}

type rendered struct {
	res *helmspec.Result
	err error
}

// helmSource is the Installation's Helm source: its chart resolved,
// pulled (unless cached) and judged exactly as an OCI source's artifact
// (same clients, cache, pins and signatures; a signature must bind the
// chart's archive digest to the product and the chart's version), then
// rendered client-only with the Installation's values. Nothing is
// rendered of an untrusted chart (a *trust.UntrustedError).
func (r *Reconciler) helmSource(ctx context.Context, in *v1alpha1.Installation) (sourceLoad, error) {
	src := in.Spec.Strategy.Helm
	sl := sourceLoad{label: "helm", untrusted: true}
	rem, f, err := r.remote(ctx, in, helmRemote(src), src.Product)
	if err != nil {
		return sl, err
	}
	rem.MaxTextBytes = MaxChartBytes
	rem.Trusted = func(*oci.Artifact) { r.keepTrusted(helmRemote(src), f.ref, f.p) }
	opts := renderOptions(in)
	valuesDigest := ""
	render := func(ctx context.Context, a *oci.Artifact) (*helmspec.Result, error) {
		vals, vd, err := chartValues(src)
		if err != nil {
			return nil, err
		}
		valuesDigest = vd
		o := opts
		o.Upgrade, o.Revision = releaseOf(in, chartIdentifier(a.Digest, vd, o))
		return r.renderChart(ctx, in, a, vals, vd, o)
	}
	sl.Source = source.Helm{Remote: rem, Product: rem.Expect.Product, Render: render,
		Identifier: func(a *oci.Artifact) string { return chartIdentifier(a.Digest, valuesDigest, opts) }}
	sl.wrap = func(err error) error {
		if _, other := errors.AsType[*source.VersionError](err); other && f.p != nil {
			return fmt.Errorf("helm source %s (pinned %s): %w", f.ref, src.Digest, err)
		}
		return f.wrap("helm source", err)
	}
	sl.record = func(l *source.Loaded, st *v1alpha1.StrategyStatus) {
		a, res := l.Artifact, l.Rendered
		st.Chart, st.ValuesDigest, st.VerifiedBy = a.Reference, valuesDigest, l.VerifiedBy
		if l.Statement != nil {
			st.Product = ptr.To(l.Statement.Product)
		}
		if f.fresh {
			r.event(in, corev1.EventTypeNormal, v1alpha1.ReasonStrategyPulled, "Load", "%s",
				fmt.Sprintf("pulled chart %s (%s %s), %s; %s", a.Reference, res.Chart.Name, res.Chart.Version, l.VerifiedBy, hookSummary(res.Hooks)))
		}
	}
	return sl, nil
}

// renderOptions are the render inputs an Installation's Helm source gives,
// as helm install's flags of the same names.
func renderOptions(in *v1alpha1.Installation) helmspec.Options {
	src := in.Spec.Strategy.Helm
	return helmspec.Options{ReleaseName: src.ReleaseName, Namespace: in.Namespace, KubeVersion: src.KubeVersion, SkipCRDs: src.SkipCRDs}
}

// chartValues decodes the source's values and returns them with the
// digest of their canonical JSON (keys sorted), which is "" for none.
func chartValues(src *v1alpha1.HelmStrategySource) (map[string]any, string, error) {
	vals := map[string]any{}
	if src.Values == nil || len(src.Values.Raw) == 0 {
		return vals, "", nil
	}
	if err := json.Unmarshal(src.Values.Raw, &vals); err != nil {
		return nil, "", fmt.Errorf("spec.strategy.helm.values: %w", err)
	}
	if vals == nil { // "null"
		return map[string]any{}, "", nil
	}
	canonical, err := json.Marshal(vals)
	if err != nil {
		return nil, "", fmt.Errorf("spec.strategy.helm.values: %w", err)
	}
	return vals, codec.Digest(canonical), nil
}

// chartIdentifier is the deployment identifier of a chart's render: a hash
// of the chart's manifest digest and every render input, so another chart
// or other values are another strategy.
func chartIdentifier(chartDigest, valuesDigest string, opts helmspec.Options) string {
	inputs := []string{chartDigest, valuesDigest, opts.ReleaseName, opts.Namespace, opts.KubeVersion}
	if opts.SkipCRDs {
		// Only when set, so the identifiers of existing renders stay.
		inputs = append(inputs, "skip-crds")
	}
	sum := sha256.Sum256([]byte(strings.Join(inputs, "\n")))
	return "helm-" + hex.EncodeToString(sum[:8])
}

// releaseOf is what a render of the chart of identifier id for in is, as
// Helm numbers releases: the Installation's newest revision again when it
// rolled out this very chart and values (a render after the operator
// restarted: the same .Release as before, so the same objects), else an
// upgrade to the revision after it, or an install of revision 1 when it
// has rolled out nothing.
func releaseOf(in *v1alpha1.Installation, id string) (upgrade bool, revision int) {
	if len(in.Status.History) == 0 {
		return false, 1
	}
	newest := in.Status.History[0]
	if newest.Identifier == id && newest.Revision >= 1 {
		return newest.Revision > 1, int(newest.Revision)
	}
	return true, max(int(newest.Revision), 1) + 1
}

// renderChart renders a trusted chart with a timeout, or returns the
// cached render of the same chart digest, inputs and release revision
// (errors included). A render that is not cached first reads the
// Installation's live objects in its namespace, with the operator's
// identity, for the chart's lookup (helmspec.Lookup): a chart that keeps
// a generated secret with lookup keeps it across upgrades and restarts.
func (r *Reconciler) renderChart(ctx context.Context, in *v1alpha1.Installation, a *oci.Artifact, vals map[string]any, valuesDigest string, opts helmspec.Options) (*helmspec.Result, error) {
	key := fmt.Sprintf("%s/%t/%d", chartIdentifier(a.Digest, valuesDigest, opts), opts.Upgrade, opts.Revision)
	c := &r.charts
	c.mu.Lock()
	hit := c.done[key]
	c.mu.Unlock()
	if hit != nil {
		return hit.res, hit.err
	}
	if r.applier != nil {
		inv, err := inventory.NewStore(r.kube).Get(ctx, Owner(in))
		if err != nil {
			return nil, fmt.Errorf("objects for the chart's lookup: %w", err)
		}
		objs, err := r.applier.OwnedObjects(ctx, inv, in.Namespace, 0)
		if err != nil {
			return nil, fmt.Errorf("objects for the chart's lookup: %w", err)
		}
		opts.Lookup = &helmspec.Lookup{Objects: objs}
	}
	rctx, cancel := context.WithTimeout(ctx, HelmRenderTimeout)
	defer cancel()
	res, err := r.helmRenderer().RenderArchive(rctx, a.Reference, a.Text, vals, opts)
	if ctx.Err() != nil {
		return nil, err // the reconcile's end, not the chart's fault: not cached
	}
	if _, broken := errors.AsType[*helmspec.RendererError](err); broken {
		return nil, err // the renderer's failure, not the chart's: not cached
	}
	// A render killed at HelmRenderTimeout is cached like the chart's
	// other errors: a chart whose templates loop is not run again at every
	// reconcile (docs/SECURITY.md).
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil || len(c.done) >= maxRenderedCharts {
		c.done = map[string]*rendered{}
	}
	c.done[key] = &rendered{res: res, err: err}
	return res, err
}

// helmRenderer is Options.HelmRenderer, else the helper process beside
// the operator (helmexec).
func (r *Reconciler) helmRenderer() helmspec.Renderer {
	if r.opts.HelmRenderer != nil {
		return r.opts.HelmRenderer
	}
	return helmexec.Renderer{}
}

// hookSummary says what became of the chart's hooks, for the pull event.
func hookSummary(hooks []helmspec.Hook) string {
	if len(hooks) == 0 {
		return "no hooks"
	}
	kept, dropped := 0, 0
	for _, h := range hooks {
		if h.Action == helmspec.HookKept {
			kept++
		} else {
			dropped++
		}
	}
	return fmt.Sprintf("%d hooks kept (run in their phases), %d dropped", kept, dropped)
}
