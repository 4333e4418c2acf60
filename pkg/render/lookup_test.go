package render_test

import (
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/oci/ocitest"
	"github.com/installstrategy/installstrategy/pkg/render"
	"github.com/installstrategy/installstrategy/pkg/render/helmchart"
	"github.com/installstrategy/installstrategy/pkg/render/helmexec"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// object returns the object of a kind and name among rendered manifests.
func object(t *testing.T, res *render.HelmResult, kind, name string) *unstructured.Unstructured {
	t.Helper()
	docs, err := strategy.ReadDocuments(res.Manifests, strategy.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if d.Object.GetKind() == kind && d.Object.GetName() == name {
			return d.Object
		}
	}
	t.Fatalf("no %s %s in:\n%s", kind, name, res.Manifests)
	return nil
}

func stringData(t *testing.T, u *unstructured.Unstructured) map[string]string {
	t.Helper()
	d, _, err := unstructured.NestedStringMap(u.Object, "data")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// live returns a rendered object as the cluster would hold it: in its
// namespace, with what the API server and an apply add.
func live(u *unstructured.Unstructured, namespace string) *unstructured.Unstructured {
	l := u.DeepCopy()
	l.SetNamespace(namespace)
	l.SetResourceVersion("42")
	l.SetLabels(map[string]string{"app.kubernetes.io/managed-by": "installstrategy"})
	return l
}

func liveObject(apiVersion, kind, namespace, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: fields}
	if u.Object == nil {
		u.Object = map[string]any{}
	}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// .Release.IsInstall, .IsUpgrade and .Revision are those of helm install
// (true, false, 1) unless the options say it is an upgrade and its
// revision, then those of helm upgrade; impossible pairs are refused.
func TestHelmReleaseInstallOrUpgrade(t *testing.T) {
	chart := filepath.Join("testdata", "lookup")
	for _, tc := range []struct {
		name string
		opts render.HelmOptions
		want map[string]string
	}{
		{"default: an install", render.HelmOptions{}, map[string]string{"isInstall": "true", "isUpgrade": "false", "revision": "1"}},
		{"install of revision 1", render.HelmOptions{Revision: 1}, map[string]string{"isInstall": "true", "isUpgrade": "false", "revision": "1"}},
		{"upgrade to revision 2", render.HelmOptions{Upgrade: true, Revision: 2}, map[string]string{"isInstall": "false", "isUpgrade": "true", "revision": "2"}},
		{"upgrade to revision 7", render.HelmOptions{Upgrade: true, Revision: 7}, map[string]string{"isInstall": "false", "isUpgrade": "true", "revision": "7"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := helmchart.Helm(t.Context(), chart, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			got := stringData(t, object(t, res, "ConfigMap", "release"))
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf(".Release %s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
	for _, tc := range []struct {
		name string
		opts render.HelmOptions
		want string
	}{
		{"an upgrade of revision 1", render.HelmOptions{Upgrade: true}, "release revision 1 of an upgrade"},
		{"an upgrade of revision 1, given", render.HelmOptions{Upgrade: true, Revision: 1}, "release revision 1 of an upgrade"},
		{"an install of revision 3", render.HelmOptions{Revision: 3}, "release revision 3 of an install"},
		{"a negative revision", render.HelmOptions{Revision: -1}, "release revision -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := helmchart.Helm(t.Context(), chart, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			// The archive route (the operator's) checks the same.
			_, err = render.HelmArchive(t.Context(), "lookup", ocitest.PackChart(t, chart), nil, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("archive: error %v, want %q", err, tc.want)
			}
		})
	}
}

// With Lookup, Helm's own lookup function answers from the given objects
// alone, as a cluster holding only them would: a Secret of the release
// namespace is found and its generated password kept, a list of the
// namespace lists them, and what is not among them (another namespace, a
// cluster-scoped kind, a kind none of them has) is not found.
func TestHelmLookupSeesTheGivenObjectsOnly(t *testing.T) {
	chart := filepath.Join("testdata", "lookup")
	ctx := t.Context()
	const ns = "shop"
	first, err := helmchart.Helm(ctx, chart, render.HelmOptions{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	secret := object(t, first, "Secret", "kept")
	password := stringData(t, secret)["password"]
	if pw, err := base64.StdEncoding.DecodeString(password); err != nil || len(pw) != 32 {
		t.Fatalf("generated password %q: %v", password, err)
	}
	// Without Lookup (helm template, and every render before), a second
	// render draws another password.
	again, err := helmchart.Helm(ctx, chart, render.HelmOptions{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	if p := stringData(t, object(t, again, "Secret", "kept"))["password"]; p == password {
		t.Fatalf("two renders without lookup drew the same password %q", p)
	}

	objs := []*unstructured.Unstructured{
		live(secret, ns),
		live(object(t, first, "ConfigMap", "release"), ns),
		liveObject("v1", "ConfigMap", ns, "settings", nil),
		liveObject("apps/v1", "Deployment", ns, "web", map[string]any{"spec": map[string]any{"replicas": int64(3)}}),
	}
	upgrade := render.HelmOptions{Namespace: ns, Upgrade: true, Revision: 2, Lookup: &render.HelmLookup{Objects: objs}}
	for _, route := range []struct {
		name   string
		render func(opts render.HelmOptions) (*render.HelmResult, error)
	}{
		{"chart folder", func(opts render.HelmOptions) (*render.HelmResult, error) { return helmchart.Helm(ctx, chart, opts) }},
		{"archive", func(opts render.HelmOptions) (*render.HelmResult, error) {
			return render.HelmArchive(ctx, "lookup", ocitest.PackChart(t, chart), nil, opts)
		}},
		{"archive through JSON (the operator's helper process)", func(opts render.HelmOptions) (*render.HelmResult, error) {
			// What helmexec sends: the objects cross as JSON, numbers kept.
			b, err := json.Marshal(helmexec.Request{Name: "lookup", Archive: ocitest.PackChart(t, chart), Options: opts})
			if err != nil {
				return nil, err
			}
			var req helmexec.Request
			if err := json.Unmarshal(b, &req); err != nil {
				return nil, err
			}
			return render.HelmArchive(ctx, req.Name, req.Archive, req.Values, req.Options)
		}},
	} {
		t.Run(route.name, func(t *testing.T) {
			res, err := route.render(upgrade)
			if err != nil {
				t.Fatal(err)
			}
			if p := stringData(t, object(t, res, "Secret", "kept"))["password"]; p != password {
				t.Errorf("password after an upgrade with lookup %q, want the live one %q", p, password)
			}
			got := stringData(t, object(t, res, "ConfigMap", "release"))
			want := map[string]string{
				"isInstall": "false", "isUpgrade": "true", "revision": "2",
				"kept":           password,
				"other":          "absent", // namespace "other": not the release's
				"namespace":      "absent", // cluster-scoped: never among the objects
				"configMapsHere": "2",
				// every namespace: only the release namespace's given objects
				"secretsEverywhere": "1",
				"replicas":          "3",
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
		})
	}

	// An empty Lookup is a cluster without the installation's objects: a
	// new password, lists found empty.
	res, err := helmchart.Helm(ctx, chart, render.HelmOptions{Namespace: ns, Lookup: &render.HelmLookup{}})
	if err != nil {
		t.Fatal(err)
	}
	if p := stringData(t, object(t, res, "Secret", "kept"))["password"]; p == password {
		t.Errorf("empty lookup kept password %q", p)
	}
	if got := stringData(t, object(t, res, "ConfigMap", "release")); got["configMapsHere"] != "0" || got["kept"] != "absent" {
		t.Errorf("empty lookup: %v", got)
	}
}

// The objects given to lookup must be namespaced in the release
// namespace: a caller that hands over another namespace's object (or one
// without a kind or name) gets an error, not a render that reads it.
func TestHelmLookupRefusesObjectsOutsideTheRelease(t *testing.T) {
	chart := filepath.Join("testdata", "lookup")
	for _, tc := range []struct {
		name string
		obj  *unstructured.Unstructured
		want string
	}{
		{"another namespace", liveObject("v1", "Secret", "kube-system", "kept", nil), "not in the release namespace shop"},
		{"cluster-scoped", liveObject("v1", "Namespace", "", "shop", nil), "not in the release namespace shop"},
		{"no kind", liveObject("v1", "", "shop", "x", nil), "no apiVersion, kind or name"},
		{"no name", liveObject("v1", "Secret", "shop", "", nil), "no apiVersion, kind or name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := render.HelmOptions{Namespace: "shop", Lookup: &render.HelmLookup{Objects: []*unstructured.Unstructured{tc.obj}}}
			_, err := helmchart.Helm(t.Context(), chart, opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// Grafana's chart (grafana/helm-charts, unedited; kube-prometheus-stack's
// Grafana) keeps its generated admin password with lookup: rendered with
// its live Secret, an upgrade to the next chart release keeps it; without
// lookup every render draws a new one (what main did on every upgrade).
func TestHelmLookupKeepsGrafanaAdminPassword(t *testing.T) {
	ctx := t.Context()
	const ns = "monitoring"
	opts := render.HelmOptions{Namespace: ns, ReleaseName: "grafana", KubeVersion: "v1.36.0"}
	install, err := helmchart.Helm(ctx, filepath.Join(charts, "grafana-10.5.14.tgz"), opts)
	if err != nil {
		t.Fatal(err)
	}
	secret := object(t, install, "Secret", "grafana")
	password := stringData(t, secret)["admin-password"]
	if password == "" {
		t.Fatalf("no admin-password in %v", secret.Object)
	}
	next := filepath.Join(charts, "grafana-10.5.15.tgz")
	blind, err := helmchart.Helm(ctx, next, render.HelmOptions{Namespace: ns, ReleaseName: "grafana", KubeVersion: "v1.36.0", Upgrade: true, Revision: 2})
	if err != nil {
		t.Fatal(err)
	}
	if p := stringData(t, object(t, blind, "Secret", "grafana"))["admin-password"]; p == password {
		t.Fatalf("an upgrade without lookup kept the password: the test shows nothing")
	}
	upgrade := opts
	upgrade.Upgrade, upgrade.Revision = true, 2
	upgrade.Lookup = &render.HelmLookup{Objects: []*unstructured.Unstructured{live(secret, ns)}}
	res, err := helmchart.Helm(ctx, next, upgrade)
	if err != nil {
		t.Fatal(err)
	}
	if res.Chart.Version != "10.5.15" {
		t.Fatalf("rendered chart %s", res.Chart.Version)
	}
	if p := stringData(t, object(t, res, "Secret", "grafana"))["admin-password"]; p != password {
		t.Fatalf("admin-password after the upgrade %q, want the live %q", p, password)
	}
}
