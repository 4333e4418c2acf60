package deploy

import (
	"bytes"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/strategy"
)

const dir = "../../config/default"

func TestRenderOrderAndImage(t *testing.T) {
	objs, err := Render(dir, "registry.example/op@sha256:0123")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind())
	}
	want := "Namespace CustomResourceDefinition ServiceAccount ClusterRole ClusterRole ClusterRoleBinding Role RoleBinding Service Deployment" // the operator's role and the metrics reader
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("apply order %s, want %s", got, want)
	}
	d := objs[len(objs)-1]
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if img := containers[0].(map[string]any)["image"]; img != "registry.example/op@sha256:0123" {
		t.Errorf("image %v", img)
	}
	// Numbers are JSON numbers, so the objects can be deep-copied.
	_ = d.DeepCopy()

	objs, err = Render(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	containers, _, _ = unstructured.NestedSlice(objs[len(objs)-1].Object, "spec", "template", "spec", "containers")
	if img, _ := containers[0].(map[string]any)["image"].(string); !strings.HasPrefix(img, "ghcr.io/installstrategy/installstrategy-operator:") {
		t.Errorf("without an image: %s, want the kustomization's", img)
	}
}

func TestRenderErrors(t *testing.T) {
	for _, c := range []struct{ dir, image, want string }{
		{dir, "a b", `image "a b" is not an image reference`},
		{dir, "repo:", "not an image reference"},
		{"../../config/rbac", "x:y", "no Deployment installstrategy-operator rendered"},
		{"does-not-exist", "", "kustomize build does-not-exist"},
	} {
		if _, err := Render(c.dir, c.image); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Render(%s, %q): %v, want %q", c.dir, c.image, err, c.want)
		}
	}
}

func TestDeleteOrderKeepsCRDsLast(t *testing.T) {
	objs, err := Render(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, o := range deleteOrder(objs) {
		refs = append(refs, strategy.RefOf(o).Kind)
	}
	want := "Deployment Service RoleBinding Role ClusterRoleBinding ClusterRole ClusterRole ServiceAccount Namespace CustomResourceDefinition"
	if got := strings.Join(refs, " "); got != want {
		t.Errorf("delete order %s, want %s", got, want)
	}
}

func TestCommandLine(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		out  string
	}{
		{nil, 2, "usage: deploy COMMAND"},
		{[]string{"--help"}, 0, "usage: deploy COMMAND"},
		{[]string{"deploy", "-h"}, 0, "-keep-crd"},
		{[]string{"bogus", "--dir", dir}, 1, "bogus: unknown command"},
		{[]string{"render", "extra"}, 2, `unexpected arguments ["extra"]`},
		{[]string{"render", "--dir", dir, "--image", "registry.example/op:v9"}, 0, "image: registry.example/op:v9"},
		{[]string{"deploy", "--kubeconfig", "does-not-exist"}, 1, "deploy: kubeconfig:"},
	} {
		var out bytes.Buffer
		code := Main(t.Context(), c.args, &out, &out)
		if code != c.code || !strings.Contains(out.String(), c.out) {
			t.Errorf("Main(%q) = %d:\n%s\nwant %d and %q", c.args, code, out.String(), c.code, c.out)
		}
	}
}
