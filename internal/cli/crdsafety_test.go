package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/crdsafety"
)

// TestClusterApplyRefusesUnsafeCRDChange: with the plugin on a real
// cluster, a strategy whose CRD drops a field a user's object uses is
// listed by plan as refused, and apply exits 1 writing nothing, while the
// strategy's own object using the field does not count; apply
// --allow-crd-change CRD=fieldRemoved applies it; a flag naming no rule is
// a usage error.
func TestClusterApplyRefusesUnsafeCRDChange(t *testing.T) {
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	ns := env.Namespace(ctx, t)
	group := strings.TrimPrefix(ns, "t-") + ".example.com"
	crdName := "things." + group
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	t.Cleanup(func() { _ = env.Dynamic.Resource(crds).Delete(context.Background(), crdName, metav1.DeleteOptions{}) })
	strategyFile := func(name, props, ownSpec string) string {
		text := testenv.ThingsCRD(group, "Namespaced", props) + fmt.Sprintf("---\napiVersion: %s/v1\nkind: Thing\nmetadata: {name: own, namespace: %s}\nspec: %s\n", group, ns, ownSpec)
		p := filepath.Join(t.TempDir(), name+".yaml")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	v1 := strategyFile("v1", "note: {type: string}, size: {type: integer}", "{note: ours}")
	v2 := strategyFile("v2", "size: {type: integer}", "{size: 1}")
	versions := map[string]string{v1: "v0.0.1", v2: "v0.0.2"}
	args := thingsArgs(ns, versions)
	if code, out, errOut := run(t, nil, args("apply", v1, "--wait", "--timeout", "2m")...); code != 0 {
		t.Fatalf("apply v1: exit %d\n%s\n%s", code, out, errOut)
	}
	// Only the strategy's own object uses note: v2 would pass; a user's
	// object using it is what refuses.
	createUsersThing(ctx, t, env, group, ns)
	crdVersion := func() string {
		t.Helper()
		crd, err := env.Dynamic.Resource(crds).Get(ctx, crdName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return crd.GetResourceVersion()
	}
	before := crdVersion()
	want := crdName + " v1 .spec.note: fieldRemoved"
	_, out, errOut := run(t, nil, args("plan", "--strategy", v2)...)
	var line string
	for l := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(l, "crd change refused: ") {
			line = l
		}
	}
	if !strings.Contains(line, want) || !strings.Contains(line, "1 stored objects affected, e.g. "+ns+"/users") {
		t.Errorf("plan does not list the refusal of %q for the user's object only:\n%s\n%s", want, out, errOut)
	}
	code, out, errOut := run(t, nil, args("apply", v2)...)
	if code != 1 || !strings.Contains(errOut, "unsafe CRD change refused before any write") || !strings.Contains(errOut, want) {
		t.Errorf("apply v2: exit %d, want 1 and the refusal of %q\n%s\n%s", code, want, out, errOut)
	}
	if after := crdVersion(); after != before {
		t.Errorf("refused, but the CRD was written: resourceVersion %s -> %s", before, after)
	}
	if code, _, errOut := run(t, nil, args("apply", v2, "--allow-crd-change", crdName+"=bogus")...); code != 2 || !strings.Contains(errOut, "unknown rule") {
		t.Errorf("--allow-crd-change with an unknown rule: exit %d\n%s", code, errOut)
	}
	if code, out, errOut := run(t, nil, args("apply", v2, "--allow-crd-change", crdName+"=fieldRemoved")...); code != 0 {
		t.Fatalf("apply v2 with the override: exit %d\n%s\n%s", code, out, errOut)
	}
	crd, err := env.Dynamic.Resource(crds).Get(ctx, crdName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(fmt.Sprint(crd.Object["spec"]), "note:") {
		t.Errorf("the accepted change was not applied: %v", crd.Object["spec"])
	}
}

// TestAllowCRDHelpListsEveryRule: --allow-crd-change's help names every
// rule pkg/crdsafety takes.
func TestAllowCRDHelpListsEveryRule(t *testing.T) {
	for _, r := range crdsafety.Rules {
		if !strings.Contains(allowCRDHelp, string(r)+",") && !strings.Contains(allowCRDHelp, string(r)+")") {
			t.Errorf("--allow-crd-change's help lacks rule %s: %s", r, allowCRDHelp)
		}
	}
}

// TestClusterApplyRefusesPrunedCRDWithObjects: with the plugin on a real
// cluster, v2 of a strategy drops a CRD a user's object is stored in:
// plan lists the crdPruned refusal with the object, `apply --prune-crds`
// exits 1 writing nothing (the CRD, the object and the strategy's
// ConfigMap stay as they were), `apply` without --prune-crds is not
// judged (the CRD is kept), and `apply --prune-crds --allow-crd-change
// CRD=crdPruned` deletes the CRD.
func TestClusterApplyRefusesPrunedCRDWithObjects(t *testing.T) {
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	ns := env.Namespace(ctx, t)
	group := strings.TrimPrefix(ns, "t-") + ".example.com"
	crdName := "things." + group
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	t.Cleanup(func() { _ = env.Dynamic.Resource(crds).Delete(context.Background(), crdName, metav1.DeleteOptions{}) })
	strategyFile := func(name, text string) string {
		p := filepath.Join(t.TempDir(), name+".yaml")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	settings := func(v string) string {
		return fmt.Sprintf("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: %s}\ndata: {v: %q}\n", ns, v)
	}
	v1 := strategyFile("v1", testenv.ThingsCRD(group, "Namespaced", "note: {type: string}")+settings("1"))
	v2 := strategyFile("v2", settings("2"))
	versions := map[string]string{v1: "v0.0.1", v2: "v0.0.2"}
	args := thingsArgs(ns, versions)
	if code, out, errOut := run(t, nil, args("apply", v1, "--wait", "--timeout", "2m")...); code != 0 {
		t.Fatalf("apply v1: exit %d\n%s\n%s", code, out, errOut)
	}
	things := createUsersThing(ctx, t, env, group, ns)
	state := func() string {
		t.Helper()
		crd, err := env.Dynamic.Resource(crds).Get(ctx, crdName, metav1.GetOptions{})
		if err != nil {
			return "crd: " + err.Error()
		}
		o, err := things.Get(ctx, "users", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("crd %s, users %s, settings %v", crd.GetResourceVersion(), o.GetResourceVersion(), cm.Data)
	}
	want := crdName + ": crdPruned"
	_, out, errOut := run(t, nil, args("plan", "--strategy", v2, "--prune-crds")...)
	var line, pruneLine string
	for l := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(l, "crd change refused: ") {
			line = l
		}
		if strings.HasPrefix(l, "prune ") && strings.Contains(l, crdName) {
			pruneLine = l
		}
	}
	if !strings.Contains(line, want) || !strings.Contains(line, "1 stored objects affected, e.g. "+ns+"/users") ||
		!strings.HasSuffix(pruneLine, "not in the target strategy; deletes 1 stored objects with it (crdPruned, refused)") {
		t.Errorf("plan does not list the refusal of %q for the user's object, nor the object on the CRD's prune line:\n%s\n%s", want, out, errOut)
	}
	before := state()
	code, out, errOut := run(t, nil, args("apply", v2, "--prune-crds")...)
	if code != 1 || !strings.Contains(errOut, "unsafe CRD change refused before any write") || !strings.Contains(errOut, want) {
		t.Errorf("apply v2 --prune-crds: exit %d, want 1 and the refusal of %q\n%s\n%s", code, want, out, errOut)
	}
	if after := state(); after != before {
		t.Errorf("refused, but written:\n before %s\n after  %s", before, after)
	}
	// Without --prune-crds the CRD is kept: nothing to judge.
	if code, out, errOut := run(t, nil, args("apply", v2)...); code != 0 {
		t.Fatalf("apply v2 without --prune-crds: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, err := env.Dynamic.Resource(crds).Get(ctx, crdName, metav1.GetOptions{}); err != nil {
		t.Fatalf("the CRD without --prune-crds: %v", err)
	}
	if code, out, errOut := run(t, nil, args("apply", v2, "--prune-crds", "--allow-crd-change", crdName+"=crdPruned")...); code != 0 {
		t.Fatalf("apply v2 with the override: exit %d\n%s\n%s", code, out, errOut)
	}
	testenv.WaitFor(ctx, t, crdName+" deleted", func(ctx context.Context) (bool, string, error) {
		crd, err := env.Dynamic.Resource(crds).Get(ctx, crdName, metav1.GetOptions{})
		return err != nil || crd.GetDeletionTimestamp() != nil, fmt.Sprint(err), nil
	})
}

// thingsArgs gives the plugin's arguments a, for the installation things
// of ns, the version versions gives the strategy file a[1] (or the file
// after --strategy).
func thingsArgs(ns string, versions map[string]string) func(a ...string) []string {
	return func(a ...string) []string {
		version := versions[a[1]]
		if a[1] == "--strategy" {
			version = versions[a[2]]
		}
		return append(a, "--kubeconfig", kubeconfigPath(), "-n", ns, "--name", "things", "--version", version)
	}
}

// createUsersThing creates, as a user would, the Thing "users" of ns with
// spec.note "precious", and returns the client of the namespace's Things.
func createUsersThing(ctx context.Context, t *testing.T, env *testenv.Env, group, ns string) dynamic.ResourceInterface {
	t.Helper()
	things := env.Dynamic.Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "things"}).Namespace(ns)
	user := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": "Thing",
		"metadata": map[string]any{"name": "users", "namespace": ns}, "spec": map[string]any{"note": "precious"}}}
	if _, err := things.Create(ctx, user, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return things
}
