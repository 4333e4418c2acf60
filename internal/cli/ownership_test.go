package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// styledStrategy is a product written the way many upstream manifests are:
// its own Namespace with labels, no metadata.namespace on namespaced
// objects (for `kubectl apply -n`), a typed List, a custom resource of a
// namespaced CRD of the same file, and a Job that Kubernetes deletes as
// soon as it completes (ttlSecondsAfterFinished: 0).
func styledStrategy(ns, group, jobArg string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
  labels:
    pod-security.kubernetes.io/enforce: baseline
  annotations:
    example.com/owner: styled
---
apiVersion: v1
kind: ConfigMapList
items:
- metadata: {name: settings}
  data: {mode: fast}
- metadata: {name: extra}
  data: {k: v}
---
`+crdYAML(group, "widget", "Widget")+`---
apiVersion: %[2]s/v1
kind: Widget
metadata: {name: default-widget}
spec: {size: 3}
---
apiVersion: batch/v1
kind: Job
metadata: {name: migrate}
spec:
  ttlSecondsAfterFinished: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: migrate
        image: example.com/migrate:v1
        args: [%[3]q]
`, ns, group, jobArg)
}

// crdYAML is a namespaced CRD of kind in group that keeps any field.
func crdYAML(group, singular, kind string) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: %[2]ss.%[1]s}
spec:
  group: %[1]s
  scope: Namespaced
  names: {plural: %[2]ss, singular: %[2]s, kind: %[3]s, listKind: %[3]sList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`, group, singular, kind)
}

func TestClusterManifestStyles(t *testing.T) {
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	suffix := strings.ToLower(t.Name())[len("testcluster"):] + fmt.Sprint(time.Now().UnixNano()%100000)
	ns := "styled-" + suffix
	group := suffix + ".example.com"
	owner := inventory.Owner{Namespace: ns, Name: ns, Kind: inventory.KindPlugin}
	t.Cleanup(func() {
		ctx := context.Background()
		_, _, _ = run(t, nil, "uninstall", ns, "-n", ns, "--kubeconfig", kubeconfigPath())
		_ = env.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	})
	v1 := writeFile(t, "v1.yaml", styledStrategy(ns, group, "--step=1"))
	apply1 := func(file string, extra ...string) string {
		t.Helper()
		code, out, errOut := run(t, nil, append([]string{"apply", file, "-n", ns, "--version", "v1", "--wait", "--timeout", "2m", "--kubeconfig", kubeconfigPath()}, extra...)...)
		if code != 0 {
			t.Fatalf("apply %s: exit %d\n%s%s", file, code, tail(out), errOut)
		}
		return out
	}
	out := apply1(v1)

	// The strategy's Namespace is the installation's, with its labels.
	nsObj, err := env.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if nsObj.Labels["pod-security.kubernetes.io/enforce"] != "baseline" || nsObj.Annotations["example.com/owner"] != "styled" || !owner.Owns(nsObj.Labels) {
		t.Errorf("namespace %s: labels %v annotations %v", ns, nsObj.Labels, nsObj.Annotations)
	}
	// The List's items, the custom resource and the Job went into -n.
	for _, name := range []string{"settings", "extra"} {
		if cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); err != nil || !owner.Owns(cm.Labels) {
			t.Errorf("configmap %s/%s of the List: %v", ns, name, err)
		}
	}
	widgets := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}
	if _, err := env.Dynamic.Resource(widgets).Namespace(ns).Get(ctx, "default-widget", metav1.GetOptions{}); err != nil {
		t.Errorf("widget without a namespace, applied into -n: %v", err)
	}
	// The Job ran and Kubernetes removed it; apply waited for it all the
	// same.
	if !strings.Contains(out, "rolled over: true") {
		t.Errorf("apply did not roll over:\n%s", tail(out))
	}
	testenv.WaitFor(ctx, t, "the completed Job removed by its TTL", func(ctx context.Context) (bool, string, error) {
		_, err := env.Kube.BatchV1().Jobs(ns).Get(ctx, "migrate", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err), nil
	})

	// A resync does not run the Job again, and writes nothing.
	before := liveVersions(ctx, t, env, owner)
	out = apply1(v1)
	if sum := summaryCounts(t, out); sum["created"]+sum["updated"]+sum["recreated"]+sum["pruned"] != 0 {
		t.Errorf("re-apply: %v\n%s", sum, tail(out))
	}
	if !strings.Contains(out, "Job.batch/"+ns+"/migrate (completed before, removed since") {
		t.Errorf("re-apply does not say the Job ran before:\n%s", tail(out))
	}
	sameVersions(t, "re-apply", before, liveVersions(ctx, t, env, owner))
	if _, err := env.Kube.BatchV1().Jobs(ns).Get(ctx, "migrate", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the re-apply ran the completed Job again: %v", err)
	}
	if code, out, errOut := run(t, nil, "plan", "--strategy", v1, "-n", ns, "--version", "v1", "--kubeconfig", kubeconfigPath()); code != 0 {
		t.Errorf("plan after the re-apply: exit %d\n%s%s", code, out, errOut)
	}

	// A changed Job template runs the Job again, and apply waits for it.
	v2 := writeFile(t, "v2.yaml", styledStrategy(ns, group, "--step=2"))
	out = apply1(v2)
	if !strings.Contains(out, "create    Job.batch/"+ns+"/migrate") || !strings.Contains(out, "rolled over: true") {
		t.Errorf("apply of a changed Job:\n%s", tail(out))
	}

	// Objects that are not the installation's: one made by someone else,
	// and one labelled by hand with the installation's labels (it never
	// was in its inventory).
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses", Namespace: ns}}
	handmade := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hand-labelled", Namespace: ns, Labels: owner.Labels(),
		Annotations: map[string]string{metakeys.AppliedHashAnnotation: "0123", metakeys.InstallStrategyVersionAnnotation: "v1"}}}
	for _, cm := range []*corev1.ConfigMap{foreign, handmade} {
		if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A version that drops a ConfigMap prunes it, and only it.
	v3 := writeFile(t, "v3.yaml", strings.Replace(styledStrategy(ns, group, "--step=2"), "- metadata: {name: extra}\n  data: {k: v}\n", "", 1))
	out = apply1(v3)
	if sum := summaryCounts(t, out); sum["pruned"] != 1 || !strings.Contains(out, "pruned ConfigMap/"+ns+"/extra") {
		t.Errorf("apply of v3 pruned %d:\n%s", sum["pruned"], tail(out))
	}

	// Uninstall: the installation's objects go; the namespace stays, since
	// it holds objects that are not the installation's, and so do they.
	code, out, errOut := run(t, nil, "uninstall", ns, "-n", ns, "--wait", "--kubeconfig", kubeconfigPath())
	if code != 0 {
		t.Fatalf("uninstall: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "kept   Namespace/"+ns+" (namespace kept: it holds objects that are not this installation's, e.g. ConfigMap/"+ns+"/hand-labelled, ConfigMap/"+ns+"/someone-elses)") {
		t.Errorf("uninstall does not say why the namespace stays:\n%s", out)
	}
	for _, name := range []string{"someone-elses", "hand-labelled"} {
		if _, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("uninstall touched %s: %v", name, err)
		}
	}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("configmap settings after uninstall: %v", err)
	}
	if n, err := env.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil || n.DeletionTimestamp != nil {
		t.Errorf("namespace %s after uninstall: %v", ns, err)
	}
	crd := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	if _, err := env.Dynamic.Resource(crd).Get(ctx, "widgets."+group, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("crd after uninstall: %v", err)
	}
}

// TestClusterAdoptFromKubectl: a product installed with `kubectl apply
// --server-side` (field manager kubectl, no installation labels) is a
// conflict for apply, and is taken over with --adopt; after that an upgrade
// updates and prunes it like anything the plugin created.
func TestClusterAdoptFromKubectl(t *testing.T) {
	env, ctx, ns := smallProduct(t)
	owner := inventory.Owner{Namespace: ns, Name: ns, Kind: inventory.KindPlugin}
	// What kubectl apply --server-side -f v1.yaml would have done.
	kubectlApply(ctx, t, env, smallStrategy(ns, "v1"))
	v1 := writeFile(t, "v1.yaml", smallStrategy(ns, "v1"))
	args := func(a ...string) []string {
		return append(a, "-n", ns, "--version", "v1", "--kubeconfig", kubeconfigPath())
	}
	code, out, errOut := run(t, nil, args("apply", v1, "--wait")...)
	if code == 0 || !strings.Contains(out+errOut, "not overwritten (adopt it to take it over)") {
		t.Fatalf("apply over kubectl's objects without --adopt: exit %d\n%s%s", code, tail(out), errOut)
	}
	code, out, errOut = run(t, nil, args("apply", v1, "--wait", "--adopt")...)
	if code != 0 {
		t.Fatalf("apply --adopt: exit %d\n%s%s", code, tail(out), errOut)
	}
	if !strings.Contains(out, "adopted ConfigMap/"+ns+"/dropped") || !strings.Contains(out, "field managers kubectl") {
		t.Errorf("apply --adopt does not report what it took over:\n%s", tail(out))
	}
	cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "dropped", metav1.GetOptions{})
	if err != nil || !owner.Owns(cm.Labels) {
		t.Fatalf("adopted configmap: %v %v", err, cm)
	}
	// The upgrade drops "dropped" and adds "added": prune takes the adopted
	// object, since it is in the inventory now.
	v2 := writeFile(t, "v2.yaml", smallStrategy(ns, "v2"))
	code, out, errOut = run(t, nil, args("apply", v2, "--wait")...)
	if code != 0 || !strings.Contains(out, "pruned ConfigMap/"+ns+"/dropped") {
		t.Fatalf("upgrade after adoption: exit %d\n%s%s", code, tail(out), errOut)
	}
	if code, out, errOut := run(t, nil, args("plan", "--strategy", v2)...); code != 0 {
		t.Errorf("plan after the upgrade: exit %d\n%s%s", code, out, errOut)
	}
	// The test's namespace, which someone else made, was merged into, not
	// adopted: --adopt takes strategy objects, never the namespace they
	// happen to live in.
	if n, err := env.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil || owner.Owns(n.Labels) {
		t.Errorf("namespace %s adopted: %v %v", ns, err, n.Labels)
	}
}

// kubectlApply server-side applies every document of a manifests text with
// field manager kubectl, as `kubectl apply --server-side` does.
func kubectlApply(ctx context.Context, t *testing.T, env *testenv.Env, text string) {
	t.Helper()
	s, _, err := strategy.Parse([]byte(text), strategy.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := env.Mapper()
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range s.Objects {
		m, err := mapper.RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
		if err != nil {
			t.Fatal(err)
		}
		ri := env.Dynamic.Resource(m.Resource)
		var rerr error
		if u.GetNamespace() != "" {
			_, rerr = ri.Namespace(u.GetNamespace()).Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: "kubectl"})
		} else {
			_, rerr = ri.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: "kubectl"})
		}
		if rerr != nil {
			t.Fatalf("kubectl apply %s: %v", strategy.RefOf(u), rerr)
		}
	}
}
