package render

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart"
	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/loader"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/cli"
	"helm.sh/helm/v4/pkg/cli/values"
	"helm.sh/helm/v4/pkg/downloader"
	"helm.sh/helm/v4/pkg/getter"
	"helm.sh/helm/v4/pkg/registry"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/strvals"
)

// Annotations a strategy rendered from a chart carries on its ConfigMap,
// naming the chart it came from.
const (
	// ChartNameAnnotation holds the chart's name (Chart.yaml name).
	ChartNameAnnotation = "installstrategy.io/helm-chart"
	// ChartVersionAnnotation holds the chart's version.
	ChartVersionAnnotation = "installstrategy.io/helm-chart-version"
	// ChartAppVersionAnnotation holds the chart's appVersion (absent when
	// the chart has none).
	ChartAppVersionAnnotation = "installstrategy.io/helm-app-version"
)

// HelmOptions are the inputs of a chart's rendering, named after the helm
// CLI's flags. The zero value renders the chart's default values as
// `helm template` does, with the release named after the chart in
// namespace "default".
type HelmOptions struct {
	// ValuesFiles are YAML files of values merged in order (--values); a
	// later file wins.
	ValuesFiles []string
	// Set holds --set expressions (a.b=c,d=e), applied after the files.
	Set []string
	// ReleaseName is .Release.Name; empty means the chart's name (helm
	// template's "release-name" would name every object after it).
	ReleaseName string
	// Namespace is .Release.Namespace; empty means "default".
	Namespace string
	// KubeVersion is .Capabilities.KubeVersion (v1.36.0); empty means
	// Helm's default, which is derived from the client-go version Helm was
	// built with (v1.20.0 inside a test binary).
	KubeVersion string
	// APIVersions are added to .Capabilities.APIVersions.
	APIVersions []string
	// PlainHTTP talks plain HTTP to an oci:// registry.
	PlainHTTP bool
}

// Validate checks the inputs that need no chart and no file: the --set
// expressions and the Kubernetes version. Helm calls it too.
func (o HelmOptions) Validate() error {
	for _, s := range o.Set {
		if _, err := strvals.Parse(s); err != nil {
			return fmt.Errorf("--set %q: %w", s, err)
		}
	}
	if o.KubeVersion != "" {
		if _, err := chartcommon.ParseKubeVersion(o.KubeVersion); err != nil {
			return fmt.Errorf("kube version %q: %w", o.KubeVersion, err)
		}
	}
	return nil
}

// Chart names the chart that was rendered.
type Chart struct {
	Name       string
	Version    string
	AppVersion string
}

// Annotations returns the annotations naming the chart.
func (c Chart) Annotations() map[string]string {
	out := map[string]string{ChartNameAnnotation: c.Name, ChartVersionAnnotation: c.Version}
	if c.AppVersion != "" {
		out[ChartAppVersionAnnotation] = c.AppVersion
	}
	return out
}

// HookAction is what became of a chart hook in the strategy.
type HookAction string

const (
	// HookKept: the hook's object is an ordinary object of the strategy,
	// applied in its kind's stage of every install and upgrade.
	HookKept HookAction = "kept"
	// HookDropped: the hook's object is not in the strategy.
	HookDropped HookAction = "dropped"
)

// Hook reports one hook of the chart and what became of it.
type Hook struct {
	// Kind and Name of the hook's object.
	Kind, Name string
	// Path is the chart-relative template it came from.
	Path string
	// Events are the hook's helm.sh/hook events.
	Events []string
	Action HookAction
	// Reason says why, for people.
	Reason string
}

func (h Hook) String() string {
	return fmt.Sprintf("hook %s/%s (%s, %s): %s: %s", h.Kind, h.Name, strings.Join(h.Events, ","), h.Path, h.Action, h.Reason)
}

// HelmResult is a rendered chart.
type HelmResult struct {
	// Manifests is the text helm template --include-crds prints for the
	// same inputs, less the dropped hooks: the chart's CRDs, its objects,
	// then the kept hooks, each document introduced by a --- line and a
	// "# Source:" comment.
	Manifests []byte
	// Chart is the rendered chart's name and versions.
	Chart Chart
	// Hooks lists every hook of the chart, in Helm's order, with what was
	// done with it.
	Hooks []Hook
}

// keptEvents are the events of hooks that run on install or upgrade: a
// strategy is what install and upgrade apply, so such a hook's object
// belongs to it.
var keptEvents = []release.HookEvent{release.HookPreInstall, release.HookPostInstall, release.HookPreUpgrade, release.HookPostUpgrade}

// classify decides what becomes of a hook: one that runs on install or
// upgrade is kept, test, delete and rollback hooks are dropped (a strategy
// is applied, never tested, deleted or rolled back by Helm's rules:
// uninstall deletes what was applied and rollback applies the older
// strategy).
func classify(h *release.Hook) Hook {
	out := Hook{Kind: h.Kind, Name: h.Name, Path: h.Path}
	for _, e := range h.Events {
		out.Events = append(out.Events, string(e))
	}
	switch {
	case slices.ContainsFunc(h.Events, func(e release.HookEvent) bool { return slices.Contains(keptEvents, e) }):
		out.Action = HookKept
		out.Reason = "an object of the strategy, applied in its kind's stage with the others on every install and upgrade, not deleted after it runs"
	case slices.Contains(h.Events, release.HookTest):
		out.Action = HookDropped
		out.Reason = "a test hook: helm test runs it, install does not"
	default:
		out.Action = HookDropped
		out.Reason = "runs only on delete or rollback: uninstall deletes what was applied, rollback applies the older strategy"
	}
	return out
}

// Helm renders a chart: a chart folder, a packaged chart (.tgz) or an
// oci:// reference (registry credentials come from Helm's registry config,
// as for the helm CLI). Nothing is sent to a cluster. Errors name the
// input at fault: the chart, a values file, a --set expression, or the
// template and its line (Helm's own message).
func Helm(ctx context.Context, ref string, opts HelmOptions) (*HelmResult, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	settings := cli.New()
	vals, err := mergeValues(settings, opts)
	if err != nil {
		return nil, err
	}
	path, cleanup, err := locate(settings, ref, opts.PlainHTTP)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	loaded, err := loader.Load(path)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", ref, err)
	}
	return renderChart(ctx, ref, loaded, vals, opts)
}

// HelmArchive renders a packaged chart (.tgz bytes) as Helm does a
// client-only install (helm template): nothing is sent to a cluster,
// Helm's lookup function finds nothing and its DNS function is off. The
// values are vals alone (no file, no --set, no environment): what the
// caller gives, on top of the chart's own values.yaml. name names the
// chart in errors. The render stops waiting at ctx's deadline.
func HelmArchive(ctx context.Context, name string, archive []byte, vals map[string]any, opts HelmOptions) (*HelmResult, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	loaded, err := loader.LoadArchive(bytes.NewReader(archive))
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", name, err)
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

// renderChart checks a loaded chart and renders it with vals.
func renderChart(ctx context.Context, ref string, loaded chart.Charter, vals map[string]any, opts HelmOptions) (*HelmResult, error) {
	chrt, ok := loaded.(*chartv2.Chart)
	if !ok {
		return nil, fmt.Errorf("load chart %s: a %T chart, want apiVersion v1 or v2", ref, loaded)
	}
	if t := chrt.Metadata.Type; t != "" && t != "application" {
		return nil, fmt.Errorf("chart %s: a %s chart is not installable", ref, t)
	}
	if deps := chrt.Metadata.Dependencies; len(deps) > 0 {
		reqs := make([]chart.Dependency, len(deps))
		for i, d := range deps {
			reqs[i] = d
		}
		if err := action.CheckDependencies(chrt, reqs); err != nil {
			return nil, fmt.Errorf("chart %s: its dependencies are missing, run helm dependency build: %w", ref, err)
		}
	}

	// Libraries do not log: Helm's own log goes nowhere.
	inst := action.NewInstall(action.NewConfiguration(action.ConfigurationSetLogger(slog.DiscardHandler)))
	inst.DryRunStrategy = action.DryRunClient
	inst.Replace = true // no name check against a release store
	inst.IncludeCRDs = true
	inst.ReleaseName = opts.ReleaseName
	if inst.ReleaseName == "" {
		inst.ReleaseName = chrt.Name()
	}
	inst.Namespace = opts.Namespace
	if inst.Namespace == "" {
		inst.Namespace = "default"
	}
	if opts.KubeVersion != "" {
		inst.KubeVersion, _ = chartcommon.ParseKubeVersion(opts.KubeVersion) // checked by Validate
	}
	inst.APIVersions = chartcommon.VersionSet(opts.APIVersions)
	r, err := inst.RunWithContext(ctx, chrt, vals)
	if err != nil {
		return nil, fmt.Errorf("render chart %s: %w", ref, err)
	}
	rel, ok := r.(*release.Release)
	if !ok {
		return nil, fmt.Errorf("render chart %s: helm returned a %T, want a v1 release", ref, r)
	}
	res := &HelmResult{Chart: Chart{Name: chrt.Name(), Version: chrt.Metadata.Version, AppVersion: chrt.Metadata.AppVersion}}
	var text strings.Builder
	// What helm template prints: the manifest, then each hook.
	if m := strings.TrimSpace(rel.Manifest); m != "" {
		text.WriteString(m)
		text.WriteByte('\n')
	}
	for _, h := range rel.Hooks {
		c := classify(h)
		res.Hooks = append(res.Hooks, c)
		if c.Action == HookKept {
			fmt.Fprintf(&text, "---\n# Source: %s\n%s\n", h.Path, h.Manifest)
		}
	}
	res.Manifests = []byte(text.String())
	return res, nil
}

// mergeValues merges the values files and --set expressions as helm does,
// after checking each alone so that an error names the input at fault.
func mergeValues(settings *cli.EnvSettings, opts HelmOptions) (map[string]any, error) {
	providers := getter.All(settings)
	for _, f := range opts.ValuesFiles {
		if _, err := (&values.Options{ValueFiles: []string{f}}).MergeValues(providers); err != nil {
			return nil, fmt.Errorf("values file %s: %w", f, err)
		}
	}
	vals, err := (&values.Options{ValueFiles: opts.ValuesFiles, Values: opts.Set}).MergeValues(providers)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	return vals, nil
}

// locate returns the local path of the chart: ref itself for a folder or
// an archive, else a download of an oci:// reference into a temporary
// folder that cleanup removes.
func locate(settings *cli.EnvSettings, ref string, plainHTTP bool) (path string, cleanup func(), err error) {
	cleanup = func() {}
	if !registry.IsOCI(ref) {
		if _, err := os.Stat(ref); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return "", cleanup, fmt.Errorf("chart %s: no such chart folder or archive (a chart is a folder, a .tgz or an oci:// reference)", ref)
			}
			return "", cleanup, fmt.Errorf("chart %s: %w", ref, err)
		}
		return ref, cleanup, nil
	}
	ropts := []registry.ClientOption{registry.ClientOptWriter(io.Discard), registry.ClientOptCredentialsFile(settings.RegistryConfig)}
	if plainHTTP {
		ropts = append(ropts, registry.ClientOptPlainHTTP())
	}
	rc, err := registry.NewClient(ropts...)
	if err != nil {
		return "", cleanup, fmt.Errorf("chart %s: registry client: %w", ref, err)
	}
	dir, err := os.MkdirTemp("", "installstrategy-chart-")
	if err != nil {
		return "", cleanup, fmt.Errorf("chart %s: %w", ref, err)
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	gopts := []getter.Option{getter.WithRegistryClient(rc)}
	if plainHTTP {
		gopts = append(gopts, getter.WithPlainHTTP(true))
	}
	dl := downloader.ChartDownloader{
		Out:              io.Discard,
		Getters:          getter.All(settings),
		Options:          gopts,
		RegistryClient:   rc,
		RepositoryConfig: settings.RepositoryConfig,
		RepositoryCache:  settings.RepositoryCache,
		Cache:            &downloader.DiskCache{Root: dir},
	}
	path, _, err = dl.DownloadTo(ref, "", dir)
	if err != nil {
		return "", cleanup, fmt.Errorf("pull chart %s: %w", ref, err)
	}
	return path, cleanup, nil
}
