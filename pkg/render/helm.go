package render

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"helm.sh/helm/v4/pkg/chart"
	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	chartutilcommon "helm.sh/helm/v4/pkg/chart/common/util"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/engine"
	release "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"

	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/render/helmspec"
)

// The inputs and outputs of a render live in pkg/render/helmspec, which
// does not link Helm's engine; they are named here as they always were.
const (
	// ChartNameAnnotation holds the chart's name (Chart.yaml name).
	ChartNameAnnotation = metakeys.HelmChartAnnotation
	// ChartVersionAnnotation holds the chart's version.
	ChartVersionAnnotation = metakeys.HelmChartVersionAnnotation
	// ChartAppVersionAnnotation holds the chart's appVersion.
	ChartAppVersionAnnotation = metakeys.HelmAppVersionAnnotation
	// HookKept: the hook's object is in the strategy, marked as a hook.
	HookKept = helmspec.HookKept
	// HookDropped: the hook's object is not in the strategy.
	HookDropped = helmspec.HookDropped
)

type (
	// HelmOptions are the inputs of a chart's rendering (helmspec.Options).
	HelmOptions = helmspec.Options
	// Chart names the chart that was rendered.
	Chart = helmspec.Chart
	// HookAction is what became of a chart hook in the strategy.
	HookAction = helmspec.HookAction
	// Hook reports one hook of the chart and what became of it.
	Hook = helmspec.Hook
	// HelmResult is a rendered chart (helmspec.Result).
	HelmResult = helmspec.Result
	// HelmLookup is what a chart's lookup function sees (helmspec.Lookup).
	HelmLookup = helmspec.Lookup
)

// InProcess renders charts in the calling process with HelmArchive (a
// helmspec.Renderer). A render past its deadline is left to finish in the
// background; helmexec's Renderer runs it in a process it can kill.
type InProcess struct{}

// RenderArchive is HelmArchive.
func (InProcess) RenderArchive(ctx context.Context, name string, archive []byte, vals map[string]any, opts HelmOptions) (*HelmResult, error) {
	return HelmArchive(ctx, name, archive, vals, opts)
}

// keptEvents are the events of hooks a strategy keeps: those of install,
// upgrade, rollback and uninstall, which the reconciler runs around what it
// does (pkg/plan's SplitHooks, pkg/engine's hooks.go), as Helm does.
var keptEvents = []release.HookEvent{release.HookPreInstall, release.HookPostInstall, release.HookPreUpgrade, release.HookPostUpgrade, release.HookPreRollback, release.HookPostRollback, release.HookPreDelete, release.HookPostDelete}

// classify decides what becomes of a hook: one that runs on install,
// upgrade, rollback or delete is kept in the strategy with its annotations,
// which mark it as a hook (it is not one of the release's objects); a test
// hook is dropped (helm test runs it, install does not).
func classify(h *release.Hook) Hook {
	out := Hook{Kind: h.Kind, Name: h.Name, Path: h.Path}
	for _, e := range h.Events {
		out.Events = append(out.Events, string(e))
	}
	switch {
	case slices.ContainsFunc(h.Events, func(e release.HookEvent) bool { return slices.Contains(keptEvents, e) }):
		out.Action = HookKept
		out.Reason = "a hook of the strategy, marked by its helm.sh/hook annotations: run in its phases as Helm runs it, not one of the release's objects"
	case slices.Contains(h.Events, release.HookTest):
		out.Action = HookDropped
		out.Reason = "a test hook: helm test runs it, install does not"
	default:
		out.Action = HookDropped
		out.Reason = "runs on no event of install, upgrade, rollback or uninstall"
	}
	return out
}

// HelmArchive renders a packaged chart (.tgz bytes) as Helm does a
// client-only install (helm template): nothing is sent to a cluster,
// Helm's lookup function finds nothing (unless opts.Lookup gives it the
// installation's live objects, read before) and its DNS function is off. The
// values are vals alone (no file, no --set, no environment): what the
// caller gives, on top of the chart's own values.yaml. name names the
// chart in errors. The render stops waiting at ctx's deadline.
func HelmArchive(ctx context.Context, name string, archive []byte, vals map[string]any, opts HelmOptions) (*HelmResult, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	loaded, err := LoadArchive(name, archive)
	if err != nil {
		return nil, err
	}
	if vals == nil {
		vals = map[string]any{}
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("render chart %s: %w", name, context.Cause(ctx))
	}
	type result struct {
		res *HelmResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		// Helm's template engine does not watch ctx: a render past the
		// deadline is left to finish in the background.
		res, err := renderChart(ctx, name, loaded, vals, opts)
		done <- result{res, err}
	}()
	select {
	case r := <-done:
		return r.res, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("render chart %s: %w", name, context.Cause(ctx))
	}
}

// HelmChart renders a loaded chart with vals (the values given on top of
// the chart's own values.yaml) as a client-only `helm install --dry-run`
// (`helm template --include-crds`) does: the release is opts.ReleaseName
// (the chart's name when empty) in opts.Namespace ("default" when empty),
// an install of revision 1 unless opts.Upgrade and opts.Revision say
// otherwise (then rendered as helm upgrade renders); the capabilities are Helm's defaults with
// opts.KubeVersion and opts.APIVersions; values are checked against the
// chart's schema; disabled subcharts are dropped; lookup finds nothing
// (unless opts.Lookup gives it the installation's live objects) and DNS is
// off. ref names the chart in errors. It uses Helm's chart, engine
// and release packages directly, not its install action, whose
// dependencies (Kubernetes clients, storage drivers, kubectl) a program
// that only renders does not need.
func HelmChart(ctx context.Context, ref string, loaded chart.Charter, vals map[string]any, opts HelmOptions) (*HelmResult, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return renderChart(ctx, ref, loaded, vals, opts)
}

// renderChart checks a loaded chart and renders it with vals.
func renderChart(ctx context.Context, ref string, loaded chart.Charter, vals map[string]any, opts HelmOptions) (*HelmResult, error) {
	chrt, manifest, notes, hooks, err := renderParts(ctx, ref, loaded, vals, opts)
	if err != nil {
		return nil, err
	}
	res := assemble(chrt, manifest, hooks)
	res.Notes = notes
	return res, nil
}

// renderParts checks a loaded chart and renders it with vals: the chart,
// the release's manifest and its hooks, as action.Install's client-only
// dry run makes them, with the same errors.
func renderParts(ctx context.Context, ref string, loaded chart.Charter, vals map[string]any, opts HelmOptions) (*chartv2.Chart, string, string, []*release.Hook, error) {
	chrt, ok := loaded.(*chartv2.Chart)
	if !ok {
		return nil, "", "", nil, fmt.Errorf("load chart %s: a %T chart, want apiVersion v1 or v2", ref, loaded)
	}
	if t := chrt.Metadata.Type; t != "" && t != "application" {
		return nil, "", "", nil, fmt.Errorf("chart %s: a %s chart is not installable", ref, t)
	}
	if err := checkDependencies(chrt); err != nil {
		return nil, "", "", nil, fmt.Errorf("chart %s: its dependencies are missing, run helm dependency build: %w", ref, err)
	}
	if vals == nil {
		vals = map[string]any{}
	}
	fail := func(err error) (*chartv2.Chart, string, string, []*release.Hook, error) {
		return nil, "", "", nil, fmt.Errorf("render chart %s: %w", ref, err)
	}
	name := opts.ReleaseName
	if name == "" {
		name = chrt.Name()
	}
	namespace := opts.Namespace
	if namespace == "" {
		namespace = "default"
	}
	// What action.Install does, in its order, for a client-only dry run.
	if err := chartutil.ValidateReleaseName(name); err != nil {
		return fail(fmt.Errorf("release name check failed: release name %q: %w", name, err))
	}
	if err := chartutil.ProcessDependencies(chrt, vals); err != nil {
		return fail(fmt.Errorf("chart dependencies processing failed: %w", err))
	}
	caps := chartcommon.DefaultCapabilities.Copy()
	if opts.KubeVersion != "" {
		kv, _ := chartcommon.ParseKubeVersion(opts.KubeVersion) // checked by Validate
		caps.KubeVersion = *kv
	}
	// A new slice: Copy shares the default set, which concurrent renders
	// read (action.Install appends to it, which copies only while it is
	// full, as it is in Helm 4.3).
	caps.APIVersions = slices.Concat(caps.APIVersions, chartcommon.VersionSet(opts.APIVersions))
	relOpts := chartcommon.ReleaseOptions{Name: name, Namespace: namespace, Revision: opts.ReleaseRevision(), IsInstall: !opts.Upgrade, IsUpgrade: opts.Upgrade}
	toRender, err := chartutilcommon.ToRenderValuesWithSchemaValidation(chrt, vals, relOpts, caps, opts.SkipSchemaValidation)
	if err != nil {
		return fail(err)
	}
	if kv := chrt.Metadata.KubeVersion; kv != "" && !chartutil.IsCompatibleRange(kv, caps.KubeVersion.String()) {
		return fail(fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", kv, caps.KubeVersion.Version))
	}
	var lookup engine.ClientProvider
	if opts.Lookup != nil {
		l, err := newLookupObjects(opts.Lookup, namespace)
		if err != nil {
			return fail(err)
		}
		lookup = l
	}
	manifest, notes, hooks, err := renderRelease(ctx, chrt, toRender, lookup, opts)
	if err != nil {
		return fail(err)
	}
	return chrt, manifest, notes, hooks, nil
}

// renderRelease renders a chart's templates with the values of
// ToRenderValues as action.Install's renderResources does for a
// client-only install with IncludeCRDs: it returns what Helm keeps as the
// release's manifest (the chart's CRDs, then its objects in Helm's install
// order, each introduced by a --- line and a "# Source:" comment) and its
// hooks in Helm's order, and the notes: the chart's own
// templates/NOTES.txt rendered (a subchart's are left out, as without
// Helm's --render-subchart-notes). DNS is off.
// Helm's lookup function asks lookup for its clients (Helm's own engine
// hook, as action.Install and action.Upgrade give it a cluster's); nil
// means it finds nothing, as in helm template. opts.PostRenderer and
// opts.SkipCRDs act as Helm's --post-renderer and --skip-crds.
func renderRelease(ctx context.Context, chrt *chartv2.Chart, toRender chartcommon.Values, lookup engine.ClientProvider, opts HelmOptions) (string, string, []*release.Hook, error) {
	var (
		files map[string]string
		err   error
	)
	if lookup != nil {
		// Helm's engine takes a client provider only here (its Engine
		// keeps it unexported), without a context: the lookups are
		// answered from memory, so there is nothing to cancel, and
		// HelmArchive still stops waiting at ctx's deadline.
		files, err = engine.RenderWithClientProvider(chrt, toRender, lookup)
	} else {
		var eng engine.Engine
		files, err = eng.RenderWithContext(ctx, chrt, toRender)
	}
	if err != nil {
		return "", "", nil, err
	}
	notes := files[path.Join(chrt.Name(), "templates", "NOTES.txt")]
	for k := range files {
		if strings.HasSuffix(k, "NOTES.txt") {
			delete(files, k)
		}
	}
	if opts.PostRenderer != nil {
		if files, err = postRender(opts.PostRenderer, files); err != nil {
			return "", "", nil, err
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return "", "", nil, err
	}
	var manifest strings.Builder
	if !opts.SkipCRDs {
		for _, crd := range chrt.CRDObjects() {
			fmt.Fprintf(&manifest, "---\n# Source: %s\n%s\n", crd.Filename, string(crd.File.Data))
		}
	}
	for _, m := range manifests {
		fmt.Fprintf(&manifest, "---\n# Source: %s\n%s\n", m.Name, m.Content)
	}
	return manifest.String(), notes, hooks, nil
}

// assemble is what helm template prints of a release (its manifest, then
// each hook), less the dropped hooks, and what became of each hook.
func assemble(chrt *chartv2.Chart, manifest string, hooks []*release.Hook) *HelmResult {
	res := &HelmResult{Chart: Chart{Name: chrt.Name(), Version: chrt.Metadata.Version, AppVersion: chrt.Metadata.AppVersion}}
	var text strings.Builder
	if m := strings.TrimSpace(manifest); m != "" {
		text.WriteString(m)
		text.WriteByte('\n')
	}
	for _, h := range hooks {
		c := classify(h)
		res.Hooks = append(res.Hooks, c)
		if c.Action == HookKept {
			fmt.Fprintf(&text, "---\n# Source: %s\n%s\n", h.Path, h.Manifest)
		}
	}
	res.Manifests = []byte(text.String())
	return res
}

// checkDependencies reports the dependencies Chart.yaml names that the
// chart does not hold (charts/ not built), as helm install does.
func checkDependencies(chrt *chartv2.Chart) error {
	var missing []string
	for _, d := range chrt.Metadata.Dependencies {
		if !slices.ContainsFunc(chrt.Dependencies(), func(c *chartv2.Chart) bool { return c.Name() == d.Name }) {
			missing = append(missing, d.Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("found in Chart.yaml, but missing in charts/ directory: %s", strings.Join(missing, ", "))
	}
	return nil
}
