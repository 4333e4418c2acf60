package cli

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// forgeRelease writes what anyone who may write Secrets in ns can: a
// deployed release Secret sh.helm.release.v1.NAME.v1 in Helm's encoding
// (base64 of gzip of JSON) whose manifest is manifest.
func forgeRelease(ctx context.Context, t *testing.T, env *testenv.Env, ns, name, manifest string) {
	t.Helper()
	js, err := json.Marshal(map[string]any{
		"name": name, "namespace": ns, "version": 1, "manifest": manifest,
		"info":  map[string]any{"status": "deployed"},
		"chart": map[string]any{"metadata": map[string]any{"name": "forged", "version": "1.0.0"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	_, _ = w.Write(js)
	_ = w.Close()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1." + name + ".v1", Namespace: ns,
			Labels: map[string]string{"owner": "helm", "name": name, "status": "deployed", "version": "1"}},
		Type: metakeys.HelmReleaseSecretType,
		Data: map[string][]byte{"release": []byte(base64.StdEncoding.EncodeToString(gz.Bytes()))},
	}
	if _, err := env.Kube.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// helmMeta is the metadata Helm puts on an object of release ns/name.
func helmMeta(name, ns string) (labels, annotations map[string]string) {
	return map[string]string{metakeys.ManagedByLabel: metakeys.HelmManagedBy},
		map[string]string{metakeys.HelmReleaseNameAnnotation: name, metakeys.HelmReleaseNamespaceAnnotation: ns}
}

// configMap creates a ConfigMap with data a=b and the given metadata.
func configMap(ctx context.Context, t *testing.T, env *testenv.Env, ns, name string, labels, annotations map[string]string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, Annotations: annotations}, Data: map[string]string{"a": "b"}}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Kube.CoreV1().ConfigMaps(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// cmManifest is a ConfigMap of a manifest: its data changed to a=forged.
func cmManifest(ns, name string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\ndata:\n  a: forged\n", name, ns)
}

// version reads an object's resourceVersion ("" when it is absent).
func version(ctx context.Context, t *testing.T, env *testenv.Env, ref strategy.ObjectRef) string {
	t.Helper()
	var obj metav1.Object
	var err error
	switch ref.Kind {
	case "ConfigMap":
		obj, err = env.Kube.CoreV1().ConfigMaps(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	case "ClusterRoleBinding":
		obj, err = env.Kube.RbacV1().ClusterRoleBindings().Get(ctx, ref.Name, metav1.GetOptions{})
	case "ClusterRole":
		obj, err = env.Kube.RbacV1().ClusterRoles().Get(ctx, ref.Name, metav1.GetOptions{})
	default:
		t.Fatalf("version: kind %s", ref.Kind)
	}
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return obj.GetResourceVersion()
}

// TestClusterAdoptHelmReleaseProvenance: a release Secret is written by
// whoever may write Secrets in the namespace, so --adopt-helm-release takes
// only objects the live cluster proves are the release's (Helm's label and
// annotations naming it, as Helm itself requires), and never a system
// object unless --allow-system-object names it. The reproduction: a forged
// release naming the API server's cluster-admin ClusterRoleBinding with an
// extra subject; plan and apply refuse, and the binding is untouched. The
// variants: another release's object, an object in another namespace
// without Helm's marks, a system: ClusterRole, an object the release would
// create (a new binding to cluster-admin), and the cluster-admin binding
// again with --allow-system-object naming it (consent does not stand in
// for provenance).
func TestClusterAdoptHelmReleaseProvenance(t *testing.T) {
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	ns := env.Namespace(ctx, t)
	other := env.Namespace(ctx, t)
	l, a := helmMeta("other", ns)
	configMap(ctx, t, env, ns, "theirs", l, a)
	configMap(ctx, t, env, other, "bystander", nil, nil)
	admin := strategy.ObjectRef{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding", Name: "cluster-admin"}
	crb := fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: %%s
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: Group, name: system:masters}
- {kind: ServiceAccount, name: evil, namespace: %s}
`, ns)
	cases := []struct {
		name, manifest string
		ref            strategy.ObjectRef
		flags          []string
		why            string
	}{
		{"cluster-admin", fmt.Sprintf(crb, "cluster-admin"), admin, nil, "a system object (the API server's own: label kubernetes.io/bootstrapping=rbac-defaults)"},
		{"consented", fmt.Sprintf(crb, "cluster-admin"), admin, []string{"--allow-system-object", "ClusterRoleBinding.rbac.authorization.k8s.io/cluster-admin"}, `not the release's: label app.kubernetes.io/managed-by="", annotations meta.helm.sh/release-name=""`},
		{"another-release", cmManifest(ns, "theirs"), strategy.ObjectRef{Kind: "ConfigMap", Namespace: ns, Name: "theirs"}, nil, `not the release's: label app.kubernetes.io/managed-by="Helm", annotations meta.helm.sh/release-name="other"`},
		{"other-namespace", cmManifest(other, "bystander"), strategy.ObjectRef{Kind: "ConfigMap", Namespace: other, Name: "bystander"}, nil, `not the release's: label app.kubernetes.io/managed-by=""`},
		{"system-name", "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: system:aggregate-to-edit\nrules:\n- {apiGroups: ['*'], resources: ['*'], verbs: ['*']}\n",
			strategy.ObjectRef{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:aggregate-to-edit"}, nil, "a system object"},
		{"created", fmt.Sprintf(crb, "evil-admin"), strategy.ObjectRef{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding", Name: "evil-admin"}, nil, "not in the cluster"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rel := fmt.Sprintf("forged%d", i)
			genuine := fmt.Sprintf("own-%d", i)
			l, a := helmMeta(rel, ns)
			configMap(ctx, t, env, ns, genuine, l, a)
			forgeRelease(ctx, t, env, ns, rel, c.manifest+"---\n"+cmManifest(ns, genuine))
			before := version(ctx, t, env, c.ref)
			ownBefore := version(ctx, t, env, strategy.ObjectRef{Kind: "ConfigMap", Namespace: ns, Name: genuine})
			for _, verb := range []string{"plan", "apply"} {
				args := append([]string{verb, "--adopt-helm-release", rel, "-n", ns, "--name", rel, "--kubeconfig", kubeconfigPath()}, c.flags...)
				code, out, errOut := run(t, nil, args...)
				if code == 0 || code == 1 && verb == "plan" || !strings.Contains(errOut, c.ref.String()+": "+c.why) {
					t.Errorf("%s: exit %d, want a refusal naming %s: %s\n%s%s", verb, code, c.ref, c.why, tail(out), errOut)
				}
			}
			if got := version(ctx, t, env, c.ref); got != before {
				t.Errorf("%s changed (resourceVersion %q -> %q)", c.ref, before, got)
			}
			if got := version(ctx, t, env, strategy.ObjectRef{Kind: "ConfigMap", Namespace: ns, Name: genuine}); got != ownBefore {
				t.Errorf("the release's own ConfigMap %s was written though the takeover was refused", genuine)
			}
			if _, err := env.Kube.CoreV1().Secrets(ns).Get(ctx, "sh.helm.release.v1."+rel+".v1", metav1.GetOptions{}); err != nil {
				t.Errorf("the refused release was retired: %v", err)
			}
			inv, err := inventory.NewStore(env.Kube).Get(ctx, inventory.Owner{Namespace: ns, Name: rel, Kind: inventory.KindPlugin})
			if err != nil || inv.Exists() {
				t.Errorf("a refused takeover wrote an inventory (%v)", err)
			}
		})
	}
	b, err := env.Kube.RbacV1().ClusterRoleBindings().Get(ctx, "cluster-admin", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range b.Subjects {
		if s.Kind == "ServiceAccount" {
			t.Errorf("cluster-admin binds %s %s/%s", s.Kind, s.Namespace, s.Name)
		}
	}
}

// TestClusterAdoptSystemObjects: a genuine release (objects with Helm's
// marks) that holds an object in kube-system is taken over only with
// --allow-system-object naming it, and uninstall then keeps that object
// (adopted, not created) unless it is named again; plain --adopt never
// takes a system: ClusterRole unnamed; a user's strategy given with
// --adopt-helm-release adopts only the release's proven objects; and the
// API server's own objects are told from a product's that carry the same
// bootstrapping label.
func TestClusterAdoptSystemObjects(t *testing.T) {
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	ns := env.Namespace(ctx, t)
	kubeCM := ns + "-agent" // in kube-system, unique per test namespace
	l, a := helmMeta("good", ns)
	configMap(ctx, t, env, ns, "good-config", l, a)
	configMap(ctx, t, env, "kube-system", kubeCM, l, a)
	forgeRelease(ctx, t, env, ns, "good", cmManifest(ns, "good-config")+"---\n"+cmManifest("kube-system", kubeCM))
	sysRef := strategy.ObjectRef{Kind: "ConfigMap", Namespace: "kube-system", Name: kubeCM}

	code, out, errOut := run(t, nil, "apply", "--adopt-helm-release", "good", "-n", ns, "--kubeconfig", kubeconfigPath())
	if code == 0 || !strings.Contains(errOut, sysRef.String()+": a system object (in namespace kube-system)") {
		t.Fatalf("a release's kube-system object taken unnamed: exit %d\n%s%s", code, tail(out), errOut)
	}
	consent := "ConfigMap/kube-system/" + kubeCM
	code, out, errOut = run(t, nil, "apply", "--adopt-helm-release", "good", "-n", ns, "--allow-system-object", consent, "--kubeconfig", kubeconfigPath())
	if code != 0 {
		t.Fatalf("apply --allow-system-object %s: exit %d\n%s%s", consent, code, tail(out), errOut)
	}
	owner := inventory.Owner{Namespace: ns, Name: ns, Kind: inventory.KindPlugin}
	inv, err := inventory.NewStore(env.Kube).Get(ctx, owner)
	if err != nil || !inv.Exists() || !inv.Entries[sysRef].Adopted {
		t.Fatalf("inventory does not record %s as adopted: %v %+v", sysRef, err, inv.Entries)
	}
	// Named again, uninstall deletes it (the role below shows it kept
	// when not named).
	code, out, errOut = run(t, nil, "uninstall", ns, "-n", ns, "--allow-system-object", consent, "--kubeconfig", kubeconfigPath())
	if code != 0 || !strings.Contains(out, "delete "+sysRef.String()) {
		t.Errorf("uninstall --allow-system-object: exit %d, want %s deleted\n%s%s", code, sysRef, out, errOut)
	}
	for _, ref := range []strategy.ObjectRef{sysRef, {Kind: "ConfigMap", Namespace: ns, Name: "good-config"}} {
		if v := version(ctx, t, env, ref); v != "" {
			t.Errorf("uninstall left %s", ref)
		}
	}

	// Plain --adopt: a system: ClusterRole a person created is a conflict
	// until named; once adopted, uninstall deletes it only when named.
	role := "system:" + ns
	roleRef := strategy.ObjectRef{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role}
	if _, err := env.Kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Kube.RbacV1().ClusterRoles().Delete(context.Background(), role, metav1.DeleteOptions{})
	})
	file := writeFile(t, "role.yaml", fmt.Sprintf("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: %q\nrules:\n- {apiGroups: [''], resources: [pods], verbs: [get]}\n", role))
	code, out, errOut = run(t, nil, "apply", file, "--adopt", "--name", "roles", "--version", "1.0.0", "-n", ns, "--kubeconfig", kubeconfigPath())
	if code == 0 || !strings.Contains(out+errOut, roleRef.String()+" is a system object (its name starts with system:)") {
		t.Errorf("--adopt took %s unnamed: exit %d\n%s%s", roleRef, code, tail(out), errOut)
	}
	if r, _ := env.Kube.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{}); len(r.Rules) != 0 {
		t.Errorf("%s written: %v", roleRef, r.Rules)
	}
	code, out, errOut = run(t, nil, "apply", file, "--adopt", "--allow-system-object", "ClusterRole/"+role, "--name", "roles", "--version", "1.0.0", "-n", ns, "--kubeconfig", kubeconfigPath())
	if code != 0 {
		t.Fatalf("--adopt --allow-system-object: exit %d\n%s%s", code, tail(out), errOut)
	}
	// The adoption is marked on the role itself, where a ConfigMap editor
	// who clears the inventory's mark cannot reach: uninstall still keeps it.
	if r, err := env.Kube.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{}); err != nil || r.Annotations[metakeys.AdoptedAnnotation] != ns+"/roles" {
		t.Fatalf("the adopted %s carries no adoption mark: %v, %v", roleRef, r.Annotations, err)
	}
	rolesOwner := inventory.Owner{Namespace: ns, Name: "roles", Kind: inventory.KindPlugin}
	store := inventory.NewStore(env.Kube)
	rolesInv, err := store.Get(ctx, rolesOwner)
	if err != nil || !rolesInv.Entries[roleRef].Adopted {
		t.Fatalf("inventory does not record %s as adopted: %v", roleRef, err)
	}
	e := rolesInv.Entries[roleRef]
	e.Adopted = false
	rolesInv.Entries[roleRef] = e
	if err := store.Write(ctx, rolesInv); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := run(t, nil, "apply", file, "--name", "roles", "--version", "1.0.0", "-n", ns, "--kubeconfig", kubeconfigPath()); code != 0 || !strings.Contains(out, "0 created, 0 updated, 0 recreated") {
		t.Errorf("re-apply of the adopted role: exit %d, want no write (the mark is not the strategy's)\n%s%s", code, tail(out), errOut)
	}
	if code, out, errOut = run(t, nil, "uninstall", "roles", "-n", ns, "--kubeconfig", kubeconfigPath()); code != 0 || !strings.Contains(out, "kept   "+roleRef.String()) {
		t.Errorf("uninstall of an adopted system: role: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := env.Kube.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{}); err != nil {
		t.Fatalf("uninstall deleted the adopted %s: %v", roleRef, err)
	}

	// A user's strategy with --adopt-helm-release: what the release does
	// not prove is its own stays a conflict.
	l, a = helmMeta("mine", ns)
	configMap(ctx, t, env, ns, "mine-config", l, a)
	configMap(ctx, t, env, ns, "neighbour", nil, nil)
	forgeRelease(ctx, t, env, ns, "mine", cmManifest(ns, "mine-config"))
	src := writeFile(t, "mine.yaml", cmManifest(ns, "mine-config")+"---\n"+cmManifest(ns, "neighbour"))
	before := version(ctx, t, env, strategy.ObjectRef{Kind: "ConfigMap", Namespace: ns, Name: "neighbour"})
	code, out, errOut = run(t, nil, "apply", src, "--adopt-helm-release", "mine", "--name", "mine", "--version", "1.0.0", "-n", ns, "--kubeconfig", kubeconfigPath())
	if code == 0 || !strings.Contains(out+errOut, "ConfigMap/"+ns+"/neighbour exists and was not applied by installstrategy") {
		t.Errorf("a strategy's object that is not the release's was adopted: exit %d\n%s%s", code, tail(out), errOut)
	}
	if got := version(ctx, t, env, strategy.ObjectRef{Kind: "ConfigMap", Namespace: ns, Name: "neighbour"}); got != before {
		t.Error("neighbour was written")
	}

	// The bootstrapping label alone does not make an object the API
	// server's: KubeVirt labels its own kubevirt.io:default so.
	mine := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-default", Labels: map[string]string{metakeys.BootstrappingLabel: "rbac-defaults"}}}
	if _, err := env.Kube.RbacV1().ClusterRoles().Create(ctx, mine, metav1.CreateOptions{FieldManager: "virt-operator"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Kube.RbacV1().ClusterRoles().Delete(context.Background(), mine.Name, metav1.DeleteOptions{})
	})
	for name, want := range map[string]bool{"cluster-admin": true, "view": true, mine.Name: false} {
		r, err := env.Kube.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := inventory.APIServerBootstrapped(&unstructured.Unstructured{Object: m}); got != want {
			t.Errorf("APIServerBootstrapped(clusterrole %s) = %v, want %v", name, got, want)
		}
	}
}
