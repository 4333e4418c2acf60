// Package helmchart renders a chart the way the helm CLI finds and
// configures it: a chart folder, a packaged chart (.tgz) or an oci://
// reference pulled with pkg/oci's bounded client and Helm's registry
// credentials, values
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
	"path/filepath"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/google/go-containerregistry/pkg/authn"
	"helm.sh/helm/v4/pkg/chart"
	"helm.sh/helm/v4/pkg/chart/loader"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/cli"
	"helm.sh/helm/v4/pkg/cli/values"
	"helm.sh/helm/v4/pkg/downloader"
	"helm.sh/helm/v4/pkg/getter"
	"helm.sh/helm/v4/pkg/registry"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"

	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/render"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// Helm renders a chart as `helm template --include-crds` does (see
// render.HelmChart), found as helm install finds it: a chart folder, a
// packaged chart (.tgz), an http(s):// URL of a packaged chart, REPO/CHART
// (a repository of the user's Helm repositories config, its index as helm
// repo update cached it), a chart name with opts.RepoURL (--repo), or an
// oci:// reference (registry credentials from Helm's registry config), of
// opts.ChartVersion when set. Downloads of http(s) charts and indexes are
// bounded by maxDownloadBytes, oci:// pulls by pkg/oci's bounds. Nothing is sent to a cluster. Errors name
// the input at fault: the chart or its URL, a values file, a --set
// expression, or the template and its line (Helm's own message).
func Helm(ctx context.Context, ref string, opts render.HelmOptions) (*render.HelmResult, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	settings := cli.New()
	vals, err := mergeValues(settings, opts)
	if err != nil {
		return nil, err
	}
	loaded, err := load(ctx, settings, ref, opts)
	if err != nil {
		return nil, err
	}
	return render.HelmChart(ctx, ref, loaded, vals, opts)
}

// loadPath loads the chart at path: a folder with Helm's loader, an archive
// (given, or pulled) through render.LoadArchive's bounds.
func loadPath(ref, path string) (chart.Charter, error) {
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

// ValuesOptions are opts' values flags as Helm's own pkg/cli/values
// takes them.
func ValuesOptions(opts render.HelmOptions) *values.Options {
	return &values.Options{ValueFiles: opts.ValuesFiles, Values: opts.Set, StringValues: opts.StringValues,
		FileValues: opts.FileValues, JSONValues: opts.JSONValues, LiteralValues: opts.LiteralValues}
}

// mergeValues merges the values files and the --set, --set-string,
// --set-file, --set-json and --set-literal expressions with Helm's own
// code, in its order (files, --set-json, --set, --set-string, --set-file,
// --set-literal), after checking each values file alone so that an error
// names the file at fault.
func mergeValues(settings *cli.EnvSettings, opts render.HelmOptions) (map[string]any, error) {
	providers := getter.All(settings)
	for _, f := range opts.ValuesFiles {
		if _, err := (&values.Options{ValueFiles: []string{f}}).MergeValues(providers); err != nil {
			return nil, fmt.Errorf("values file %s: %w", f, err)
		}
	}
	vals, err := ValuesOptions(opts).MergeValues(providers)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	return vals, nil
}

// load finds the chart as helm install does (see Helm), loads it, checks
// its version against opts.ChartVersion and, with opts.DependencyUpdate,
// downloads the dependencies a chart folder lacks.
func load(ctx context.Context, settings *cli.EnvSettings, ref string, opts render.HelmOptions) (*chartv2.Chart, error) {
	var (
		loaded chart.Charter
		err    error
		folder string
	)
	switch {
	case opts.RepoURL != "":
		loaded, err = loadBytes(fromRepoURL(ctx, opts.RepoURL, ref, opts.ChartVersion, maxDownloadBytes))
	case registry.IsOCI(ref):
		loaded, err = pullOCI(ctx, settings, ref, opts)
	case isURL(ref):
		data, dlErr := download(ctx, ref, nil, maxDownloadBytes)
		loaded, err = loadBytes(data, ref, dlErr)
		if err == nil {
			err = checkVersion(loaded, ref, opts.ChartVersion)
		}
	default:
		st, statErr := os.Stat(ref)
		switch {
		case statErr == nil:
			if st.IsDir() {
				folder = ref
			}
			loaded, err = loadPath(ref, ref)
			if err != nil {
				return nil, err
			}
			err = checkVersion(loaded, ref, opts.ChartVersion)
		case !errors.Is(statErr, os.ErrNotExist):
			return nil, fmt.Errorf("chart %s: %w", ref, statErr)
		case isRepoChart(ref):
			loaded, err = loadBytes(fromRepository(ctx, settings.RepositoryConfig, settings.RepositoryCache, ref, opts.ChartVersion, maxDownloadBytes))
		default:
			return nil, fmt.Errorf("chart %s: no such chart folder or archive (a chart is a folder, a .tgz, REPO/CHART, an http(s):// URL, a name with --repo, or an oci:// reference)", ref)
		}
	}
	if err != nil {
		return nil, err
	}
	chrt, ok := loaded.(*chartv2.Chart)
	if !ok {
		return nil, fmt.Errorf("load chart %s: a %T chart, want apiVersion v1 or v2", ref, loaded)
	}
	if !opts.DependencyUpdate || len(missingDependencies(chrt)) == 0 {
		return chrt, nil
	}
	if folder == "" {
		return nil, fmt.Errorf("chart %s: --dependency-update needs a chart folder (its charts/ is written), and this chart lacks %s", ref, strings.Join(missingDependencies(chrt), ", "))
	}
	return updateDependencies(settings, folder)
}

// isRepoChart reports whether ref has the form REPO/CHART.
func isRepoChart(ref string) bool {
	name, chart, ok := strings.Cut(ref, "/")
	return ok && name != "" && chart != "" && !strings.Contains(chart, "/") && !filepath.IsAbs(ref) && !strings.HasPrefix(ref, ".")
}

// loadBytes loads a downloaded archive, naming its URL in errors.
func loadBytes(archive []byte, from string, err error) (chart.Charter, error) {
	if err != nil {
		return nil, err
	}
	return render.LoadArchive(redact(from), archive)
}

// checkVersion refuses a chart that is not of version (a version or a
// semver range), given with --version for a chart folder, archive or URL.
// Helm ignores --version there; a user who typed it expects that version.
func checkVersion(loaded chart.Charter, ref, version string) error {
	chrt, ok := loaded.(*chartv2.Chart)
	if version == "" || !ok {
		return nil
	}
	have := chrt.Metadata.Version
	if have == version {
		return nil
	}
	c, err := semver.NewConstraint(version)
	if err != nil {
		return fmt.Errorf("--version %q: %w", version, err)
	}
	v, err := semver.NewVersion(have)
	if err != nil || !c.Check(v) {
		return fmt.Errorf("chart %s is version %s, --version asks for %s (with --from-helm, --version is the chart's version; the strategy's is --strategy-version)", ref, have, version)
	}
	return nil
}

// missingDependencies names the dependencies Chart.yaml lists that the
// chart does not hold.
func missingDependencies(chrt *chartv2.Chart) []string {
	var missing []string
	for _, d := range chrt.Metadata.Dependencies {
		if !slices.ContainsFunc(chrt.Dependencies(), func(c *chartv2.Chart) bool { return c.Name() == d.Name }) {
			missing = append(missing, d.Name)
		}
	}
	return missing
}

// updateDependencies runs helm dependency update on a chart folder, as
// helm install --dependency-update does for a chart that lacks them, and
// loads the chart again.
func updateDependencies(settings *cli.EnvSettings, folder string) (*chartv2.Chart, error) {
	rc, err := registry.NewClient(registry.ClientOptWriter(io.Discard), registry.ClientOptCredentialsFile(settings.RegistryConfig))
	if err != nil {
		return nil, fmt.Errorf("chart %s: registry client: %w", folder, err)
	}
	man := &downloader.Manager{
		Out:              io.Discard,
		ChartPath:        folder,
		Getters:          getter.All(settings),
		RegistryClient:   rc,
		RepositoryConfig: settings.RepositoryConfig,
		RepositoryCache:  settings.RepositoryCache,
		ContentCache:     settings.ContentCache,
	}
	if err := man.Update(); err != nil {
		return nil, fmt.Errorf("chart %s: --dependency-update: %w", folder, err)
	}
	loaded, err := loader.Load(folder)
	if err != nil {
		return nil, fmt.Errorf("load chart %s after its dependency update: %w", folder, err)
	}
	chrt, ok := loaded.(*chartv2.Chart)
	if !ok {
		return nil, fmt.Errorf("load chart %s: a %T chart, want apiVersion v1 or v2", folder, loaded)
	}
	return chrt, nil
}

// pullOCI pulls an oci:// chart with pkg/oci's bounded client (manifests
// within oci.MaxManifestBytes, the archive within render.MaxArchiveBytes,
// each refused as a *trust.RefusedError before it is read in full), with
// the credentials of Helm's registry config (then docker's, as Helm falls
// back), over plain HTTP with opts.PlainHTTP, and loads it through
// render.LoadArchive. A reference without a tag takes opts.ChartVersion as
// its tag, which must then be a version, not a range (Helm would list the
// repository's tags); with a tag, the chart's version is checked against
// opts.ChartVersion.
func pullOCI(ctx context.Context, settings *cli.EnvSettings, ref string, opts render.HelmOptions) (chart.Charter, error) {
	tagged, err := ociTag(ref, opts.ChartVersion)
	if err != nil {
		return nil, err
	}
	c, err := oci.New(oci.Options{Keychain: helmKeychain{ctx: ctx, path: settings.RegistryConfig}, Insecure: opts.PlainHTTP})
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", ref, err)
	}
	a, err := c.PullChart(ctx, tagged, render.MaxArchiveBytes)
	if err != nil {
		return nil, fmt.Errorf("pull chart %s: %w", ref, err)
	}
	loaded, err := loadBytes(a.Text, ref, nil)
	if err != nil {
		return nil, err
	}
	return loaded, checkVersion(loaded, ref, opts.ChartVersion)
}

// ociTag returns ref with version as its tag (Helm's: "+" written "_")
// when ref names no tag or digest.
func ociTag(ref, version string) (string, error) {
	rest := strings.TrimPrefix(ref, oci.Scheme)
	if last := rest[strings.LastIndexByte(rest, '/')+1:]; strings.ContainsAny(last, ":@") {
		return ref, nil
	}
	if version == "" {
		return "", fmt.Errorf("chart %s: the reference names no tag: give one (oci://HOST/REPOSITORY/CHART:VERSION) or --version VERSION (the newest tag is not looked up)", ref)
	}
	if _, err := semver.NewVersion(version); err != nil {
		return "", fmt.Errorf("chart %s: --version %q is not a version: an oci:// chart without a tag needs --version to be an exact version (a range would list the repository's tags, which is not done)", ref, version)
	}
	return ref + ":" + strings.ReplaceAll(version, "+", "_"), nil
}

// helmKeychain finds registry credentials as Helm's registry client does:
// in Helm's registry config (docker's config.json format, its credential
// helpers included), then in docker's.
type helmKeychain struct {
	ctx  context.Context
	path string
}

func (k helmKeychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	store, err := credentials.NewStore(k.path, credentials.StoreOptions{})
	if err != nil {
		return nil, fmt.Errorf("registry config %s: %w", k.path, err)
	}
	var s credentials.Store = store
	if docker, err := credentials.NewStoreFromDocker(credentials.StoreOptions{}); err == nil {
		s = credentials.NewStoreWithFallbacks(store, docker)
	}
	cred, err := s.Get(k.ctx, r.RegistryStr())
	if err != nil {
		return nil, fmt.Errorf("registry credentials for %s: %w", r.RegistryStr(), err)
	}
	if cred == (auth.Credential{}) {
		return authn.Anonymous, nil
	}
	return authn.FromConfig(authn.AuthConfig{Username: cred.Username, Password: cred.Password,
		IdentityToken: cred.RefreshToken, RegistryToken: cred.AccessToken}), nil
}
