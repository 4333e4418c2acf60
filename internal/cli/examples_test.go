package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/loader"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	helmcli "helm.sh/helm/v4/pkg/cli"
	"helm.sh/helm/v4/pkg/helmpath"
	repo "helm.sh/helm/v4/pkg/repo/v1"

	"github.com/installstrategy/installstrategy/internal/kubevirtdata"
	"github.com/installstrategy/installstrategy/internal/testtier"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/oci/ocitest"
)

// offlineVerbs work on files only; their --help examples are run here as
// written. (The cluster verbs' examples name a KubeVirt cluster's objects;
// their behaviour is covered by the cluster tests.)
var offlineVerbs = []string{"decode", "encode", "inspect", "diff", "verify", "id", "sign", "copy", "pull"}

// TestOfflineExamplesRunAsWritten runs every `kubectl installstrategy` line
// of the offline verbs' examples, in order, in a folder holding the files
// they name: the real KubeVirt testdata, manifests.yaml (v1.9.0's text),
// strategies.yaml (what `kubectl get cm -o yaml` prints for the v1.9.0
// strategy ConfigMap), the charts and overlay of pkg/render's testdata;
// the registries they name are one on loopback
// (exampleRegistry). Lines that read from a cluster are skipped; what a
// line redirects with > is written to that file.
func TestOfflineExamplesRunAsWritten(t *testing.T) {
	testtier.Heavy(t) // runs every offline example on the real KubeVirt releases
	dir := t.TempDir()
	for _, v := range kubevirtdata.Versions {
		for _, suffix := range []string{"configmap.yaml", "config.json", "manifests.yaml"} {
			name := "kubevirt-" + v + "." + suffix
			if err := os.WriteFile(filepath.Join(dir, name), kubevirtdata.Read(t, v, suffix), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "manifests.yaml"), kubevirtdata.Read(t, "v1.9.0", "manifests.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	cms, err := codec.ReadConfigMaps("v1.9.0", kubevirtdata.Read(t, "v1.9.0", "configmap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cm := cms[0]
	cm.Name, cm.GenerateName = "kubevirt-install-strategy-abcde", ""
	item, err := codec.MarshalYAML(cm)
	if err != nil {
		t.Fatal(err)
	}
	list := "apiVersion: v1\nkind: List\nitems:\n- " + strings.ReplaceAll(strings.TrimSuffix(string(item), "\n"), "\n", "\n  ") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "strategies.yaml"), []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
	// encode --from-helm and --from-kustomize: the upstream charts and the
	// overlay of pkg/render's and pkg/render/kustomize's testdata, and a
	// values file.
	for src, dst := range map[string]string{
		"charts/metallb-v0.15.3":                  "charts/metallb",
		"../kustomize/testdata/kustomize/overlay": "overlays/prod",
		"../kustomize/testdata/kustomize/base":    "overlays/base",
	} {
		if err := os.CopyFS(filepath.Join(dir, dst), os.DirFS(filepath.Join(renderTestdata, src))); err != nil {
			t.Fatal(err)
		}
	}
	tgz, err := os.ReadFile(filepath.Join(renderTestdata, "charts", "ingress-nginx-4.15.1.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"ingress-nginx-4.15.1.tgz": tgz, "prod.yaml": []byte("controller:\n  logLevel: debug\n")} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	registry := exampleRegistry(t, dir)
	chartRepo := exampleChartRepository(t, filepath.Join(renderTestdata, "charts", "metallb-v0.15.3"))
	t.Chdir(dir)

	root := NewRootCommand(Streams{})
	ran := 0
	for _, verb := range offlineVerbs {
		cmd, _, err := root.Find([]string{verb})
		if err != nil || cmd.Name() != verb {
			t.Fatalf("no %s command", verb)
		}
		for _, line := range exampleLines(cmd.Example) {
			args, ok := strings.CutPrefix(line, "kubectl installstrategy ")
			if !ok || strings.Contains(args, "cm/") || strings.Contains(args, "--live") {
				continue
			}
			args, _, _ = strings.Cut(args, "|") // what is piped onwards is kubectl's
			args, redirect, _ := strings.Cut(args, ">")
			code, out, errOut := run(t, nil, strings.Fields(chartRepo(registry(args)))...)
			ran++
			if code != 0 && !(verb == "diff" && code == 1) {
				t.Errorf("example %q: exit %d\n%s%s", line, code, tail(out), errOut)
			}
			if f := strings.TrimSpace(redirect); f != "" {
				if err := os.WriteFile(filepath.Join(dir, f), []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	t.Logf("ran %d examples", ran)
	if ran < 8 {
		t.Fatalf("ran %d examples; the examples were not found", ran)
	}
}

// exampleLines returns the command lines of an Example text, with
// backslash continuations joined and comments dropped.
func exampleLines(example string) []string {
	var out []string
	var cur strings.Builder
	for _, l := range strings.Split(example, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if strings.HasSuffix(l, "\\") {
			cur.WriteString(strings.TrimSuffix(l, "\\") + " ")
			continue
		}
		cur.WriteString(l)
		out = append(out, cur.String())
		cur.Reset()
	}
	return out
}

// exampleChartRepository serves the examples' Helm chart repository
// (https://metallb.github.io/metallb) on loopback: an index.yaml and the
// archive of chart, the repository added as "metallb" to a Helm
// configuration of the test (helm repo add and helm repo update write the
// same files). It returns what rewrites the repository's URL in a line.
func exampleChartRepository(t *testing.T, chart string) func(string) string {
	t.Helper()
	tgz := ocitest.PackChart(t, chart)
	loaded, err := loader.LoadArchive(bytes.NewReader(tgz))
	if err != nil {
		t.Fatal(err)
	}
	meta := loaded.(*chartv2.Chart).Metadata
	name := meta.Name + "-" + meta.Version + ".tgz"
	idx := repo.NewIndexFile()
	sum := sha256.Sum256(tgz)
	if err := idx.MustAdd(meta, name, "", hex.EncodeToString(sum[:])); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	for _, v := range []string{"HELM_CONFIG_HOME", "HELM_CACHE_HOME", "HELM_DATA_HOME"} {
		t.Setenv(v, filepath.Join(home, v))
	}
	settings := helmcli.New()
	if err := os.MkdirAll(settings.RepositoryCache, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := idx.WriteFile(filepath.Join(settings.RepositoryCache, helmpath.CacheIndexFile("metallb")), 0o644); err != nil {
		t.Fatal(err)
	}
	index, err := os.ReadFile(filepath.Join(settings.RepositoryCache, helmpath.CacheIndexFile("metallb")))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metallb/index.yaml":
			_, _ = w.Write(index)
		case "/metallb/" + name:
			_, _ = w.Write(tgz)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	f := repo.NewFile()
	f.Add(&repo.Entry{Name: "metallb", URL: srv.URL + "/metallb"})
	if err := os.MkdirAll(filepath.Dir(settings.RepositoryConfig), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := f.WriteFile(settings.RepositoryConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return func(line string) string {
		return strings.ReplaceAll(line, "https://metallb.github.io/metallb", srv.URL+"/metallb")
	}
}
