package helmrelease

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	release "helm.sh/helm/v4/pkg/release/v1"

	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/render"
)

// releaseSecret encodes a release as Helm's secret driver stores it.
func releaseSecret(t *testing.T, name string, version int, status, chartVersion string) *corev1.Secret {
	t.Helper()
	rel := release.Release{Name: name, Namespace: "apps", Version: version, Manifest: "# manifest of v" + strconv.Itoa(version),
		Chart: &chartv2.Chart{Metadata: &chartv2.Metadata{Name: "demo", Version: chartVersion, AppVersion: "1.0"}}}
	b, err := json.Marshal(rel)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1." + name + ".v" + strconv.Itoa(version), Namespace: "apps",
			Labels: map[string]string{"owner": "helm", "name": name, "status": status, "version": strconv.Itoa(version)}},
		Type: metakeys.HelmReleaseSecretType,
		Data: map[string][]byte{"release": []byte(base64.StdEncoding.EncodeToString(buf.Bytes()))},
	}
}

// Find picks the deployed revision (not the newest superseded or failed
// one), reads its chart and manifest, and keeps every revision's Secret in
// order; a release without Secrets or without a deployed revision is an
// error naming it.
func TestFind(t *testing.T) {
	kube := fake.NewClientset(
		releaseSecret(t, "web", 1, "superseded", "0.1.0"),
		releaseSecret(t, "web", 10, "failed", "0.3.0"),
		releaseSecret(t, "web", 2, "deployed", "0.2.0"),
		releaseSecret(t, "other", 1, "deployed", "9.9.9"),
		releaseSecret(t, "broken", 1, "failed", "0.1.0"),
	)
	r, err := Find(t.Context(), kube, "apps", "web")
	if err != nil {
		t.Fatal(err)
	}
	if r.Revision != 2 || r.Manifest != "# manifest of v2" || r.Chart != (render.Chart{Name: "demo", Version: "0.2.0", AppVersion: "1.0"}) {
		t.Errorf("release %+v", r)
	}
	var names []string
	for _, s := range r.Secrets {
		names = append(names, s.Name)
	}
	if strings.Join(names, " ") != "sh.helm.release.v1.web.v1 sh.helm.release.v1.web.v2 sh.helm.release.v1.web.v10" {
		t.Errorf("secrets %v", names)
	}
	if got := r.String(); got != "helm release apps/web revision 2 (chart demo 0.2.0)" {
		t.Errorf("String() = %q", got)
	}
	for name, want := range map[string]string{
		"absent": "helm release apps/absent: no release secrets",
		"broken": "helm release apps/broken: no deployed revision",
	} {
		if _, err := Find(t.Context(), kube, "apps", name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", name, err, want)
		}
	}
	bad := releaseSecret(t, "bad", 1, "deployed", "0.1.0")
	bad.Data["release"] = []byte("not base64!")
	if _, err := Find(t.Context(), fake.NewClientset(bad), "apps", "bad"); err == nil || !strings.Contains(err.Error(), "secret sh.helm.release.v1.bad.v1: decode release") {
		t.Errorf("undecodable release: %v", err)
	}
}
