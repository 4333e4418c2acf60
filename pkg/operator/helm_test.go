package operator

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/render"
)

// Values are decoded from the Installation alone; their digest is of
// their canonical JSON (the same values in another key order are the
// same strategy), and every render input changes the identifier.
func TestChartValuesAndIdentifier(t *testing.T) {
	digest := func(raw string) string {
		t.Helper()
		src := &v1alpha1.HelmStrategySource{}
		if raw != "" {
			src.Values = &apiextensionsv1.JSON{Raw: []byte(raw)}
		}
		_, d, err := chartValues(src)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := digest(""); d != "" {
		t.Errorf("no values: digest %q, want none", d)
	}
	if d := digest("null"); d != "" {
		t.Errorf("null values: digest %q, want none", d)
	}
	a, b := digest(`{"a":1,"b":{"c":"x"}}`), digest(`{"b":{"c":"x"},"a":1}`)
	if a == "" || a != b {
		t.Errorf("the same values in another order: %q, %q", a, b)
	}
	if c := digest(`{"a":2,"b":{"c":"x"}}`); c == a {
		t.Error("other values, same digest")
	}
	if _, _, err := chartValues(&v1alpha1.HelmStrategySource{Values: &apiextensionsv1.JSON{Raw: []byte(`[1]`)}}); err == nil {
		t.Error("a values list was accepted")
	}

	base := render.HelmOptions{ReleaseName: "r", Namespace: "ns", KubeVersion: "v1.36.0"}
	id := chartIdentifier("sha256:1", a, base)
	for name, other := range map[string]string{
		"chart":        chartIdentifier("sha256:2", a, base),
		"values":       chartIdentifier("sha256:1", "", base),
		"release name": chartIdentifier("sha256:1", a, render.HelmOptions{ReleaseName: "s", Namespace: "ns", KubeVersion: "v1.36.0"}),
		"namespace":    chartIdentifier("sha256:1", a, render.HelmOptions{ReleaseName: "r", Namespace: "ns2", KubeVersion: "v1.36.0"}),
		"kube version": chartIdentifier("sha256:1", a, render.HelmOptions{ReleaseName: "r", Namespace: "ns"}),
	} {
		if other == id {
			t.Errorf("another %s, the same identifier %s", name, id)
		}
	}
}
