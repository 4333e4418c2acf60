package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/cli"
	"github.com/installstrategy/installstrategy/internal/dump"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/operator"
)

// Issue #24, item 2: the cluster-scoped objects of a product (CRDs,
// ClusterRoles, the webhook) are acted on by one installation per cluster.
// A second Installation of the sample product in another namespace writes
// nothing and says ClaimedByOther naming the first, whichever comes first;
// when the first is deleted with its CRDs kept, the second takes over and
// the kept CRDs carry its labels.
func TestClaimSecondInstallationWaitsThenTakesOver(t *testing.T) {
	e := setup(t, withNamespaces(2))
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	first, second := e.ns, e.more[0]
	claimOrder(ctx, t, e, first, second, true)
}

// The same with the namespaces the other way round: the claim goes to the
// installation that acted first, not to a namespace or name order.
func TestClaimReverseOrder(t *testing.T) {
	e := setup(t, withNamespaces(2))
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	first, second := e.more[0], e.ns
	claimOrder(ctx, t, e, first, second, false)
}

func claimOrder(ctx context.Context, t *testing.T, e *e2e, first, second string, handOver bool) {
	spec := sampleSpec("v1.0.0")
	spec.UninstallStrategy = v1alpha1.UninstallRemoveWorkloads
	e.createIn(ctx, t, first, "a", spec)
	e.waitDeployedIn(ctx, t, first, "a", "v1.0.0")
	e.createIn(ctx, t, second, "b", spec)
	b := e.waitClaimed(ctx, t, second, "b", "Installation "+first+"/a")
	assertCondition(t, b, v1alpha1.ConditionProgressing, metav1.ConditionFalse, v1alpha1.ReasonClaimedByOther)
	owner := inventory.Owner{Namespace: second, Name: "b", Kind: inventory.KindInstallation}
	// Another reconcile or two, to see that waiting writes nothing either.
	time.Sleep(operator.ClaimRequeue + 2*time.Second)
	if got := labelledBy(ctx, t, e.c, owner); len(got) > 0 {
		t.Errorf("the waiting installation %s wrote %v", owner, got)
	}
	crds := sampleCRDs(t, first)
	aOwner := inventory.Owner{Namespace: first, Name: "a", Kind: inventory.KindInstallation}
	assertCRDsOwnedBy(ctx, t, e.c, crds, aOwner)
	if !handOver {
		return
	}
	// Delete A; pruneCRDs is false, so its CRDs stay, labelled as A's.
	e.deleteIn(ctx, t, first, "a")
	e.waitDeployedIn(ctx, t, second, "b", "v1.0.0")
	assertCRDsOwnedBy(ctx, t, e.c, crds, owner)
}

// An Installation and a plugin installation of the same product: the one
// that holds the cluster-scoped objects keeps them, the other refuses
// (plugin: non-zero exit, nothing written, the Installation named) or
// waits (Installation: ClaimedByOther naming the plugin installation);
// the plan of the refused apply says so. When the holder goes, the other
// takes over.
func TestClaimPluginAndInstallation(t *testing.T) {
	e := setup(t, withNamespaces(2))
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	opNS, pluginNS := e.ns, e.more[0]
	spec := sampleSpec("v1.0.0")
	spec.UninstallStrategy = v1alpha1.UninstallRemoveWorkloads
	e.createIn(ctx, t, opNS, "a", spec)
	e.waitDeployedIn(ctx, t, opNS, "a", "v1.0.0")

	file := sampleFile(t, pluginNS)
	plugin := inventory.Owner{Namespace: pluginNS, Name: "sample", Kind: inventory.KindPlugin}
	code, out, errOut := pluginRun(plugin, "plan", file)
	if code == 0 || !strings.Contains(out, "blocked: claimed by Installation "+opNS+"/a") {
		t.Errorf("plan while the Installation holds the product: exit %d, want non-zero and the claim shown\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = pluginRun(plugin, "apply", file)
	if code == 0 || !strings.Contains(errOut, "claimed by Installation "+opNS+"/a") {
		t.Errorf("apply while the Installation holds the product: exit %d, want non-zero naming the Installation\n%s\n%s", code, out, errOut)
	}
	if got := labelledBy(ctx, t, e.c, plugin); len(got) > 0 {
		t.Errorf("the refused plugin apply wrote %v", got)
	}

	// The Installation goes (CRDs kept): the plugin takes over.
	e.deleteIn(ctx, t, opNS, "a")
	if code, out, errOut = pluginRun(plugin, "apply", file); code != 0 {
		t.Fatalf("apply after the Installation was deleted: exit %d\n%s\n%s", code, out, errOut)
	}
	t.Cleanup(func() {
		if code, out, errOut := pluginRun(plugin, "uninstall", plugin.Name); code != 0 {
			t.Errorf("cleanup: uninstall %s: exit %d\n%s\n%s", plugin, code, out, errOut)
		}
	})
	crds := sampleCRDs(t, pluginNS)
	assertCRDsOwnedBy(ctx, t, e.c, crds, plugin)

	// Vice versa: a new Installation waits for the plugin installation,
	// and proceeds once it is uninstalled (CRDs kept).
	e.createIn(ctx, t, opNS, "c", spec)
	e.waitClaimed(ctx, t, opNS, "c", "plugin installation "+pluginNS+"/sample")
	c := inventory.Owner{Namespace: opNS, Name: "c", Kind: inventory.KindInstallation}
	if got := labelledBy(ctx, t, e.c, c); len(got) > 0 {
		t.Errorf("the waiting installation %s wrote %v", c, got)
	}
	if code, out, errOut := pluginRun(plugin, "uninstall", plugin.Name, "--keep-crds", "--wait"); code != 0 {
		t.Fatalf("uninstall %s: exit %d\n%s\n%s", plugin, code, out, errOut)
	}
	e.waitDeployedIn(ctx, t, opNS, "c", "v1.0.0")
	assertCRDsOwnedBy(ctx, t, e.c, crds, c)
}

// pluginRun runs the plugin's verb with args for a plugin installation:
// its namespace, its name and the identity of sampleFile's strategy (but
// for uninstall, which takes the name as its argument), and the test
// cluster.
func pluginRun(o inventory.Owner, verb string, args ...string) (int, string, string) {
	args = append([]string{verb}, args...)
	args = append(args, "-n", o.Namespace, "--kubeconfig", os.Getenv(testenv.KubeconfigEnv))
	if verb != "uninstall" {
		args = append(args, "--name", o.Name, "--version", "v1.0.0", "--registry", "registry.example/sample")
	}
	var out, errOut bytes.Buffer
	code := cli.Main(args, cli.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	return code, out.String(), errOut.String()
}

// sampleFile writes the sample product's strategy for namespace ns to a
// file and returns its path.
func sampleFile(t *testing.T, ns string) string {
	t.Helper()
	s, err := dump.Product(&identity.Config{Namespace: ns, Registry: "registry.example/sample", Version: "v1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	text, err := s.Serialize()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "sample.yaml")
	if err := os.WriteFile(path, text, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// sampleCRDs returns the names of the sample product's CRDs.
func sampleCRDs(t *testing.T, ns string) []string {
	t.Helper()
	s, err := dump.Product(&identity.Config{Namespace: ns, Registry: "registry.example/sample", Version: "v1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range s.Objects {
		if o.GetKind() == "CustomResourceDefinition" {
			names = append(names, o.GetName())
		}
	}
	if len(names) == 0 {
		t.Fatal("the sample product has no CRD")
	}
	return names
}

// assertCRDsOwnedBy checks that each CRD carries the owner's labels.
func assertCRDsOwnedBy(ctx context.Context, t *testing.T, c client.Client, names []string, owner inventory.Owner) {
	t.Helper()
	for _, n := range names {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKey{Name: n}, &crd); err != nil {
			t.Errorf("crd %s: %v", n, err)
			continue
		}
		if !owner.Owns(crd.Labels) {
			t.Errorf("crd %s: labels %v, want those of %s", n, crd.Labels, owner)
		}
	}
}

// labelledBy lists what carries an installation's labels, among the kinds
// the sample product holds, in its namespace and cluster-wide, and its
// inventory ConfigMap.
func labelledBy(ctx context.Context, t *testing.T, c client.Client, owner inventory.Owner) []string {
	t.Helper()
	var found []string
	lists := map[string]client.ObjectList{
		"ConfigMap": &corev1.ConfigMapList{}, "Secret": &corev1.SecretList{}, "Service": &corev1.ServiceList{},
		"ServiceAccount": &corev1.ServiceAccountList{}, "Deployment": &appsv1.DeploymentList{}, "DaemonSet": &appsv1.DaemonSetList{},
		"Role": &rbacv1.RoleList{}, "RoleBinding": &rbacv1.RoleBindingList{},
	}
	for kind, l := range lists {
		if err := c.List(ctx, l, client.InNamespace(owner.Namespace), client.MatchingLabels(owner.Labels())); err != nil {
			t.Fatal(err)
		}
		found = append(found, names(t, kind, l)...)
	}
	cluster := map[string]client.ObjectList{
		"ClusterRole": &rbacv1.ClusterRoleList{}, "ClusterRoleBinding": &rbacv1.ClusterRoleBindingList{},
		"CustomResourceDefinition": &apiextensionsv1.CustomResourceDefinitionList{},
	}
	for kind, l := range cluster {
		if err := c.List(ctx, l, client.MatchingLabels(owner.Labels())); err != nil {
			t.Fatal(err)
		}
		found = append(found, names(t, kind, l)...)
	}
	var cm corev1.ConfigMap
	err := c.Get(ctx, client.ObjectKey{Namespace: owner.Namespace, Name: inventory.ConfigMapName(owner)}, &cm)
	if err == nil {
		found = append(found, "inventory ConfigMap "+cm.Name)
	} else if !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return found
}

// names lists the objects of a list as kind/name.
func names(t *testing.T, kind string, l client.ObjectList) []string {
	t.Helper()
	items, err := meta.ExtractList(l)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, it := range items {
		o, err := meta.Accessor(it)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, kind+"/"+o.GetName())
	}
	return out
}

// createIn creates an Installation in namespace ns.
func (e *e2e) createIn(ctx context.Context, t *testing.T, ns, name string, spec v1alpha1.InstallationSpec) *v1alpha1.Installation {
	t.Helper()
	in := &v1alpha1.Installation{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
	if err := e.c.Create(ctx, in); err != nil {
		t.Fatal(err)
	}
	return in
}

// getIn reads an Installation of namespace ns.
func (e *e2e) getIn(ctx context.Context, ns, name string) (*v1alpha1.Installation, error) {
	in := &v1alpha1.Installation{}
	err := e.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, in)
	return in, err
}

// waitDeployedIn is waitDeployed for an Installation of namespace ns.
func (e *e2e) waitDeployedIn(ctx context.Context, t *testing.T, ns, name, version string) {
	t.Helper()
	testenv.WaitFor(ctx, t, ns+"/"+name+" deployed at "+version, func(ctx context.Context) (bool, string, error) {
		in, err := e.getIn(ctx, ns, name)
		if err != nil {
			return false, "", err
		}
		return in.IsDeployed() && in.Status.ObservedVersion == version, describe(in), nil
	})
}

// waitClaimed waits until an Installation says ClaimedByOther (Degraded)
// with a message naming holder, and returns it.
func (e *e2e) waitClaimed(ctx context.Context, t *testing.T, ns, name, holder string) *v1alpha1.Installation {
	t.Helper()
	var last *v1alpha1.Installation
	testenv.WaitFor(ctx, t, ns+"/"+name+" claimed by "+holder, func(ctx context.Context) (bool, string, error) {
		in, err := e.getIn(ctx, ns, name)
		if err != nil {
			return false, "", err
		}
		last = in
		c := in.Condition(v1alpha1.ConditionDegraded)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonClaimedByOther && strings.Contains(c.Message, holder), describe(in), nil
	})
	return last
}

// deleteIn deletes an Installation of namespace ns and waits until it is
// gone.
func (e *e2e) deleteIn(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	in := &v1alpha1.Installation{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if err := e.c.Delete(ctx, in); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(ctx, t, ns+"/"+name+" gone", func(ctx context.Context) (bool, string, error) {
		_, err := e.getIn(ctx, ns, name)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		return false, "", err
	})
}
