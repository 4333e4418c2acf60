package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/loader"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	repo "helm.sh/helm/v4/pkg/repo/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/pkg/oci/ocitest"
)

// walkChartRepository serves, on loopback, a Helm chart repository (an
// index.yaml with digests, and the archives) of the chart "small": the
// small product at each version, declaring upgradeFrom where one is
// given; a version whose upgradeFrom is "broken" fails to render, and
// one whose upgradeFrom ends in " bad" also holds a Service the API
// server refuses.
func walkChartRepository(t *testing.T, ns string, versions [][2]string) string {
	t.Helper()
	for _, v := range []string{"HELM_CONFIG_HOME", "HELM_CACHE_HOME", "HELM_DATA_HOME"} {
		t.Setenv(v, filepath.Join(t.TempDir(), v))
	}
	idx := repo.NewIndexFile()
	archives := map[string][]byte{}
	for _, v := range versions {
		version, upgradeFrom := v[0], v[1]
		dir := t.TempDir()
		write := func(name, text string) {
			t.Helper()
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		write("Chart.yaml", "apiVersion: v2\nname: small\nversion: "+version+"\n")
		switch {
		case upgradeFrom == "broken":
			write("templates/all.yaml", `{{ fail "this version does not render" }}`)
		case strings.HasSuffix(upgradeFrom, " bad"):
			write("templates/all.yaml", walkStrategy(ns, version, strings.TrimSuffix(upgradeFrom, " bad")))
			write("templates/bad.yaml", "apiVersion: v1\nkind: Service\nmetadata:\n  name: bad\n  namespace: "+ns+"\nspec:\n  type: Bogus\n  ports:\n  - port: 80\n")
		default:
			write("templates/all.yaml", walkStrategy(ns, version, upgradeFrom))
		}
		tgz := ocitest.PackChart(t, dir)
		loaded, err := loader.LoadArchive(bytes.NewReader(tgz))
		if err != nil {
			t.Fatal(err)
		}
		name := "small-" + version + ".tgz"
		sum := sha256.Sum256(tgz)
		if err := idx.MustAdd(loaded.(*chartv2.Chart).Metadata, name, "", hex.EncodeToString(sum[:])); err != nil {
			t.Fatal(err)
		}
		archives["/"+name] = tgz
	}
	file := filepath.Join(t.TempDir(), "index.yaml")
	if err := idx.WriteFile(file, 0o644); err != nil {
		t.Fatal(err)
	}
	index, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/index.yaml" {
			_, _ = w.Write(index)
			return
		}
		if tgz, ok := archives[r.URL.Path]; ok {
			_, _ = w.Write(tgz)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// Issue 42 item 3 through a Helm repository over HTTP: the chart "small"
// at 1.0.0, 2.0.0 (upgradeFrom >= 1.0.0), 2.5.0 (does not render) and
// 3.0.0 (upgradeFrom >= 2.0.0). apply --from-helm of 3.0.0 over 1.0.0 is
// refused, writing nothing; --walk-upgrade-path needs --allow-unsigned
// (the repository signs nothing we verify) and refuses --key; plan shows
// the walk; apply walks 1.0.0 -> 2.0.0 -> 3.0.0, each hop rendered with
// the same values and rolled over, each a revision naming its chart; a
// hop the API server refuses stops the walk, naming 3.0.0.
func TestApplyWalksUpgradePathFromHelmRepository(t *testing.T) {
	env, ctx, ns := smallProduct(t)
	url := walkChartRepository(t, ns, [][2]string{{"1.0.0", ""}, {"2.0.0", ">= 1.0.0"}, {"2.5.0", "broken"}, {"3.0.0", ">= 2.0.0"}, {"5.0.0", ">= 4.0.0"}})
	_, pub := keyPair(t, "vendor")
	chart := func(version string, a ...string) []string {
		return append(append([]string{a[0], "--from-helm", "small", "--repo", url, "--version", version, "--name", "small"}, a[1:]...), clusterArgs(ns)...)
	}
	version := func() string {
		t.Helper()
		cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "config", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm.Data["version"]
	}

	mustRun(t, nil, chart("1.0.0", "apply", "--wait", "--timeout", "2m")...)
	if v := version(); v != "1.0.0" {
		t.Fatalf("config after apply --from-helm 1.0.0: %s", v)
	}
	code, out, errOut := run(t, nil, chart("3.0.0", "apply", "--wait", "--timeout", "2m")...)
	if code != 1 || !strings.Contains(errOut, `upgradeFrom ">= 2.0.0"`) || !strings.Contains(errOut, "--from-helm NAME --repo URL") || version() != "1.0.0" {
		t.Fatalf("3.0.0 over 1.0.0 without --walk-upgrade-path: exit %d, config at %s; want 1, refused, 1.0.0\n%s%s", code, version(), out, errOut)
	}
	code, out, errOut = run(t, nil, chart("3.0.0", "apply", "--walk-upgrade-path", "--wait")...)
	if code != 2 || !strings.Contains(errOut, "give --allow-unsigned") || version() != "1.0.0" {
		t.Fatalf("apply --walk-upgrade-path of a Helm repository without --allow-unsigned: exit %d, config at %s; want 2\n%s%s", code, version(), out, errOut)
	}
	code, out, errOut = run(t, nil, chart("3.0.0", "apply", "--walk-upgrade-path", "--key", pub, "--wait")...)
	if code != 2 || !strings.Contains(errOut, "--key can check none") || version() != "1.0.0" {
		t.Fatalf("apply --walk-upgrade-path of a Helm repository with --key: exit %d, config at %s; want 2\n%s%s", code, version(), out, errOut)
	}

	code, out, errOut = run(t, nil, chart("3.0.0", "plan", "--walk-upgrade-path")...)
	if code != 1 || !strings.Contains(out, "upgrade path: 1.0.0 -> 2.0.0 -> 3.0.0 (2 hops") ||
		!strings.Contains(out, "plan of hop 1/2, 1.0.0 -> 2.0.0 (chart small 2.0.0 of "+url+")") ||
		!strings.Contains(out, "skipped 2.5.0: ") || !strings.Contains(errOut, "takes them only with --allow-unsigned") || version() != "1.0.0" {
		t.Fatalf("plan --from-helm --walk-upgrade-path: exit %d, want 1 and the walk\n%s%s", code, out, errOut)
	}

	code, out, errOut = run(t, nil, chart("3.0.0", "apply", "--walk-upgrade-path", "--allow-unsigned", "--wait", "--timeout", "2m")...)
	if code != 0 || !strings.Contains(out, "upgrade path: hop 1/2: 1.0.0 -> 2.0.0 (chart small 2.0.0 of "+url+")") ||
		!strings.Contains(out, "upgrade path: hop 2/2: 2.0.0 -> 3.0.0") || strings.Count(out, "rolled over: true") != 2 || version() != "3.0.0" {
		t.Fatalf("apply --from-helm --walk-upgrade-path --allow-unsigned: exit %d, config at %s\n%s%s", code, version(), out, errOut)
	}
	versions, sources := walkHistory(t, ns)
	if want := []string{"3.0.0", "2.0.0", "1.0.0"}; !slices.Equal(versions, want) {
		t.Fatalf("history %v (sources %v), want %v: each hop a revision", versions, sources, want)
	}
	if want := "chart small 2.0.0 of " + url; sources[1] != want {
		t.Errorf("the intermediate revision's source is %q, want %q", sources[1], want)
	}

	code, out, errOut = run(t, nil, chart("5.0.0", "apply", "--walk-upgrade-path", "--allow-unsigned")...)
	if code != 1 || !strings.Contains(errOut, "apply would write nothing: no upgrade path from 3.0.0 to 5.0.0") || version() != "3.0.0" {
		t.Errorf("apply --from-helm --walk-upgrade-path with no chain: exit %d, config at %s\n%s%s", code, version(), out, errOut)
	}

	// A hop that fails stops the walk, naming the last version rolled
	// over: 4.0.0 holds a Service the API server refuses.
	url = walkChartRepository(t, ns, [][2]string{{"3.0.0", ">= 2.0.0"}, {"4.0.0", ">= 3.0.0 bad"}, {"6.0.0", ">= 4.0.0"}})
	code, out, errOut = run(t, nil, chart("6.0.0", "apply", "--walk-upgrade-path", "--allow-unsigned", "--wait", "--timeout", "1m")...)
	if code == 0 || !strings.Contains(errOut, "upgrade path 3.0.0 -> 4.0.0 -> 6.0.0 stopped at hop 1/2 (3.0.0 -> 4.0.0), the last version rolled over is 3.0.0") ||
		strings.Contains(out, "hop 2/2") || version() != "3.0.0" {
		t.Errorf("a walk whose first hop fails: exit %d, config at %s; want it stopped at hop 1 naming 3.0.0\n%s%s", code, version(), out, errOut)
	}
}

// apply's and plan's chart flags go with --from-helm only, and
// --from-helm takes the place of the strategy argument (usage errors,
// before anything is read or rendered).
func TestFromHelmUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"apply", "s.yaml", "--set", "a=b"}, "--set applies to --from-helm"},
		{[]string{"plan", "s.yaml", "--repo", "https://example.com"}, "--repo applies to --from-helm"},
		{[]string{"apply", "s.yaml", "--from-helm", "small"}, "take the place of the manifests argument"},
		{[]string{"apply", "--from-helm", "small", "--adopt-helm-release", "small"}, "--adopt-helm-release takes the strategy as an argument"},
		{[]string{"plan", "--from-helm", "small", "-f", "s.yaml"}, "-f is the manifests file here"},
	} {
		code, out, errOut := run(t, nil, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, want 2 and %q\n%s%s", tc.args, code, tc.want, out, errOut)
		}
	}
}
