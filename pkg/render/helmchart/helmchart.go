// Package helmchart renders a chart the way the helm CLI finds and
// configures it: a chart folder, a packaged chart (.tgz) or an oci://
// reference pulled with Helm's registry client and credentials, values
// files and --set expressions merged as helm merges them. The rendering
// itself is pkg/render's; this package adds what needs Helm's CLI, getter
// and registry packages, which a program that renders charts it already
// holds (the operator) does not link.
package helmchart

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"helm.sh/helm/v4/pkg/chart"
	"helm.sh/helm/v4/pkg/chart/loader"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	"helm.sh/helm/v4/pkg/cli"
	"helm.sh/helm/v4/pkg/cli/values"
	"helm.sh/helm/v4/pkg/downloader"
	"helm.sh/helm/v4/pkg/getter"
	"helm.sh/helm/v4/pkg/registry"

	"github.com/installstrategy/installstrategy/pkg/render"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// Helm renders a chart: a chart folder, a packaged chart (.tgz) or an
// oci:// reference (registry credentials come from Helm's registry config,
// as for the helm CLI), as `helm template --include-crds` does (see
// render.HelmChart). Nothing is sent to a cluster. Errors name the input
// at fault: the chart, a values file, a --set expression, or the template
// and its line (Helm's own message).
func Helm(ctx context.Context, ref string, opts render.HelmOptions) (*render.HelmResult, error) {
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
	loaded, err := load(ref, path)
	if err != nil {
		return nil, err
	}
	return render.HelmChart(ctx, ref, loaded, vals, opts)
}

// load loads the chart at path: a folder with Helm's loader, an archive
// (given, or pulled) through render.LoadArchive's bounds.
func load(ref, path string) (chart.Charter, error) {
	if fi, err := os.Stat(path); err != nil || fi.IsDir() {
		loaded, err := loader.Load(path)
		if err != nil {
			return nil, fmt.Errorf("load chart %s: %w", ref, err)
		}
		return loaded, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", ref, err)
	}
	defer f.Close()
	if err := archive.EnsureArchive(path, f); err != nil {
		return nil, fmt.Errorf("load chart %s: %w", ref, err)
	}
	// An archive is no larger than what it decompresses to, give or take
	// its gzip framing.
	tgz, err := io.ReadAll(io.LimitReader(f, render.MaxArchiveBytes+1))
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", ref, err)
	}
	if len(tgz) > render.MaxArchiveBytes {
		return nil, fmt.Errorf("load chart %s: %w", ref, &trust.RefusedError{Step: "size",
			Err: fmt.Errorf("%w: the archive is over %d bytes", trust.ErrTooLarge, render.MaxArchiveBytes)})
	}
	return render.LoadArchive(ref, tgz)
}

// mergeValues merges the values files and --set expressions as helm does,
// after checking each alone so that an error names the input at fault.
func mergeValues(settings *cli.EnvSettings, opts render.HelmOptions) (map[string]any, error) {
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
