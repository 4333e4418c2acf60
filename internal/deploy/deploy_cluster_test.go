package deploy_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/deploy"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/operator"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

const (
	operatorName = "installstrategy-operator"
	// deployImage is a tag no registry has: kwok's nodes pull nothing.
	deployImage = "registry.example/installstrategy-operator:deploy-test"
)

// runDeploy runs hack/deploy's command line, as `make deploy` and `make
// undeploy` do, against the test cluster, and returns its output.
func runDeploy(ctx context.Context, t *testing.T, args ...string) (string, error) {
	t.Helper()
	args = append(args, "--dir", filepath.Join(configDir, "default"), "--kubeconfig", os.Getenv(testenv.KubeconfigEnv), "--timeout", "90s")
	var out bytes.Buffer
	code := deploy.Main(ctx, args, &out, &out)
	t.Logf("deploy %s (exit %d):\n%s", strings.Join(args, " "), code, out.String())
	if code != 0 {
		return out.String(), fmt.Errorf("deploy %s: exit %d", args[0], code)
	}
	return out.String(), nil
}

// TestDeployAndUndeploy deploys the operator with `deploy` exactly as
// `make deploy` does, checks every object and that a second deploy changes
// nothing, proves with the operator binary running on nothing but its
// ServiceAccount's token that config/rbac lets it install and uninstall
// the sample product, and undeploys (refused while an Installation exists,
// then with the CRD kept, then all), checking that nothing is left.
//
// It is not parallel, so no other test of this package (which applies the
// same namespace and CRD) runs meanwhile; it holds the sample product's
// lock, and like every test that touches fixed cluster-scoped names it
// relies on packages running one at a time (go test -p 1).
func TestDeployAndUndeploy(t *testing.T) {
	env := testenv.New(t)
	start := time.Now()
	testenv.Lock(t, testenv.SampleProductLock)
	t.Logf("sample product lock taken after %s", time.Since(start).Round(time.Millisecond))
	ctx := t.Context()
	rendered, err := deploy.Render(filepath.Join(configDir, "default"), deployImage)
	if err != nil {
		t.Fatal(err)
	}
	undeployOnFailure(ctx, t)

	if _, err := runDeploy(ctx, t, "deploy", "--image", deployImage); err != nil {
		t.Fatal(err)
	}
	versions := checkDeployed(ctx, t, env, rendered)

	t.Run("deploy again changes nothing", func(t *testing.T) {
		out, err := runDeploy(ctx, t, "deploy", "--image", deployImage)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("%d objects (%d unchanged)", len(rendered), len(rendered)); !strings.Contains(out, want) {
			t.Errorf("second deploy did not report %q", want)
		}
		for ref, rv := range resourceVersions(ctx, t, env, rendered) {
			if versions[ref] != rv {
				t.Errorf("%s: resourceVersion %s after the second deploy, was %s", ref, rv, versions[ref])
			}
		}
	})

	t.Run("the operator's RBAC suffices", func(t *testing.T) {
		runOperatorAsServiceAccount(ctx, t, env)
	})
	if t.Failed() {
		return
	}

	t.Run("undeploy", func(t *testing.T) {
		undeployAndCheck(ctx, t, env, rendered)
	})
}

// undeployOnFailure undeploys when the test has failed, at its end.
func undeployOnFailure(ctx context.Context, t *testing.T) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Minute)
		defer cancel()
		_, _ = runDeploy(ctx, t, "undeploy")
	})
}

// checkDeployed checks that every rendered object exists as rendered (the
// CRD Established, the Deployment Available with the requested image, its
// pod on a kwok worker) and returns their resourceVersions.
func checkDeployed(ctx context.Context, t *testing.T, env *testenv.Env, rendered []*unstructured.Unstructured) map[string]string {
	t.Helper()
	versions := resourceVersions(ctx, t, env, rendered)
	if len(versions) != len(rendered) {
		t.Fatalf("%d of %d rendered objects exist after deploy", len(versions), len(rendered))
	}
	env.WaitCRDEstablished(ctx, t, "installations.installstrategy.io")
	var d appsv1.Deployment
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: operatorName}, &d); err != nil {
		t.Fatal(err)
	}
	if done, state := testenv.DeploymentRolledOut(&d); !done {
		t.Errorf("deploy returned before the Deployment was Available: %s", state)
	}
	available := false
	for _, c := range d.Status.Conditions {
		available = available || (c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue)
	}
	if !available {
		t.Errorf("Deployment conditions %+v: not Available", d.Status.Conditions)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; img != deployImage {
		t.Errorf("operator image %s, want %s", img, deployImage)
	}
	ownImage := ""
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.Name == deploy.OperatorImageEnv {
			ownImage = e.Value
		}
	}
	if ownImage != deployImage {
		t.Errorf("%s = %q, want the deployed image %s (it dumps other versions)", deploy.OperatorImageEnv, ownImage, deployImage)
	}
	if m := managers(&d); !strings.Contains(m, deploy.DefaultFieldOwner+"/Apply") {
		t.Errorf("Deployment field managers %s: want %s applying", m, deploy.DefaultFieldOwner)
	}
	// The pods are scheduled on kwok's nodes, and not on the tainted
	// control plane.
	pods, err := env.Kube.CoreV1().Pods(operatorNamespace).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(d.Spec.Selector)})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != int(ptr.Deref(d.Spec.Replicas, 1)) {
		t.Errorf("%d operator pods, want %d", len(pods.Items), ptr.Deref(d.Spec.Replicas, 1))
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		node, err := env.Kube.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Errorf("pod %s: node %q: %v", p.Name, p.Spec.NodeName, err)
			continue
		}
		_, controlPlane := node.Labels["node-role.kubernetes.io/control-plane"]
		if node.Annotations["kwok.x-k8s.io/node"] != "fake" || controlPlane || !testenv.PodReady(p) {
			t.Errorf("pod %s on node %s (labels %v): want Ready on a kwok worker", testenv.DescribePod(p), node.Name, node.Labels)
		}
	}
	return versions
}

func managers(obj metav1.Object) string {
	var out []string
	for _, m := range obj.GetManagedFields() {
		out = append(out, m.Manager+"/"+string(m.Operation))
	}
	return strings.Join(out, ",")
}

// resourceVersions returns the resourceVersion of each rendered object that
// exists, by reference.
func resourceVersions(ctx context.Context, t *testing.T, env *testenv.Env, rendered []*unstructured.Unstructured) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, obj := range rendered {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(obj.GroupVersionKind())
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), live)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", strategy.RefOf(obj), err)
		}
		out[strategy.RefOf(obj).String()] = live.GetResourceVersion()
	}
	return out
}

// runOperatorAsServiceAccount runs the operator binary with a kubeconfig
// that holds only a token of the deployed ServiceAccount (and the
// cluster's CA), and has it install and uninstall the sample product. Any
// "forbidden" in its log or in the Installation's status fails the test.
func runOperatorAsServiceAccount(ctx context.Context, t *testing.T, env *testenv.Env) {
	cfg, kubeconfig := serviceAccountKubeconfig(ctx, t, env)
	checkIdentityAndAccess(ctx, t, cfg)
	if t.Failed() {
		return
	}
	ns := env.Namespace(ctx, t)
	log := startOperator(t, kubeconfig,
		"--namespace", ns,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		"--registry", "registry.example/sample",
		// Dump pods wait for the test to report their result.
		"--dump-pod-labels", testenv.BehaviourLabel+"="+string(testenv.BehaviourAwaitResult),
		// The Lease in the operator's namespace: the Role's only rule.
		"--leader-elect", "--leader-election-namespace", operatorNamespace)

	c := installationClient(t, env)
	// Uninstall removes everything, cluster-scoped objects included, so
	// the deletes of the ClusterRole are exercised too.
	in := createSample(ctx, t, env, c, ns)

	forbidden := func(in *v1alpha1.Installation) {
		t.Helper()
		for _, cond := range in.Status.Conditions {
			if strings.Contains(strings.ToLower(cond.Message), "forbidden") {
				t.Fatalf("condition %s %s/%s: %s", cond.Type, cond.Status, cond.Reason, cond.Message)
			}
		}
		log.failOnForbidden(t)
	}
	testenv.WaitFor(ctx, t, "sample Deployed by the operator running as its ServiceAccount", func(ctx context.Context) (bool, string, error) {
		cur := &v1alpha1.Installation{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(in), cur); err != nil {
			return false, "", err
		}
		forbidden(cur)
		return cur.IsDeployed() && cur.Status.ObservedVersion == "v1.0.0", describeInstallation(cur), nil
	})
	env.WaitDeploymentRolledOut(ctx, t, ns, "sample-api")

	// The dump-Job path under the same RBAC: another version's strategy
	// comes from a Job the operator creates, watches and deletes (the test
	// does the container's work, which kwok cannot).
	testenv.Edit(ctx, t, c, in.DeepCopy(), func(cur *v1alpha1.Installation) {
		cur.Spec.Version = "v1.1.0"
		cur.Spec.Strategy = &v1alpha1.StrategySource{Image: "registry.example/sample/sample-operator:v1.1.0"}
	})
	job := env.RunDumpJob(ctx, t, ns)
	testenv.WaitFor(ctx, t, "sample upgraded to v1.1.0 from dump Job "+job, func(ctx context.Context) (bool, string, error) {
		cur := &v1alpha1.Installation{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(in), cur); err != nil {
			return false, "", err
		}
		forbidden(cur)
		return cur.IsDeployed() && cur.Status.ObservedVersion == "v1.1.0", describeInstallation(cur), nil
	})
	testenv.WaitFor(ctx, t, "dump Job "+job+" deleted by the operator", func(ctx context.Context) (bool, string, error) {
		_, err := env.Kube.BatchV1().Jobs(ns).Get(ctx, job, metav1.GetOptions{})
		return apierrors.IsNotFound(err), "still there", client.IgnoreNotFound(err)
	})

	if err := c.Delete(ctx, in); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(ctx, t, "sample uninstalled and gone", func(ctx context.Context) (bool, string, error) {
		cur := &v1alpha1.Installation{}
		err := c.Get(ctx, client.ObjectKeyFromObject(in), cur)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, "", err
		}
		forbidden(cur)
		return false, describeInstallation(cur), nil
	})
	for _, name := range []string{"sample-api", "sample-controller"} {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &appsv1.Deployment{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("deployment %s after the uninstall: %v", name, err)
		}
	}
	err := c.Get(ctx, client.ObjectKey{Name: "widgets.sample.installstrategy.io"}, &apiextensionsv1.CustomResourceDefinition{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("crd widgets after the uninstall (pruneCRDs): %v", err)
	}
	log.failOnForbidden(t)
	if !strings.Contains(strings.ToLower(log.String()), "successfully acquired lease") {
		t.Errorf("the operator never became leader through its Lease in %s:\n%s", operatorNamespace, log.String())
	}
}

// createSample creates the Installation of the sample product at v1.0.0
// in ns, whose uninstall removes everything (CRDs too), and removes it
// when the test ends, if still there.
func createSample(ctx context.Context, t *testing.T, env *testenv.Env, c client.Client, ns string) *v1alpha1.Installation {
	t.Helper()
	in := &v1alpha1.Installation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sample"},
		Spec: v1alpha1.InstallationSpec{Version: "v1.0.0", Registry: "registry.example/sample",
			UninstallStrategy: v1alpha1.UninstallRemoveWorkloads, PruneCRDs: true},
	}
	if err := c.Create(ctx, in); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeInstallation(t, env, c, in) })
	return in
}

// installationClient is a client of the test cluster that knows
// Installations and CRDs.
func installationClient(t *testing.T, env *testenv.Env) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func describeInstallation(in *v1alpha1.Installation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "phase %q observed %q target %q;", in.Status.Phase, in.Status.ObservedVersion, in.Status.TargetVersion)
	for _, c := range in.Status.Conditions {
		fmt.Fprintf(&b, " %s=%s/%s", c.Type, c.Status, c.Reason)
		if c.Status == metav1.ConditionTrue && c.Type == string(v1alpha1.ConditionDegraded) {
			fmt.Fprintf(&b, "(%s)", c.Message)
		}
	}
	return b.String()
}

// removeInstallation deletes the Installation when the test left it
// behind. When no operator removes it in time, it drops the finalizer and
// deletes the product's cluster-scoped objects itself, so a failed run
// does not leave CRDs and ClusterRoles that later tests would meet as
// someone else's.
func removeInstallation(t *testing.T, env *testenv.Env, c client.Client, in *v1alpha1.Installation) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 30*time.Second)
	defer cancel()
	if err := c.Delete(ctx, in); apierrors.IsNotFound(err) {
		return
	}
	err := testenv.Poll(ctx, "installation gone", func(ctx context.Context) (bool, string, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(in), &v1alpha1.Installation{})
		return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
	})
	if err == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	cur := &v1alpha1.Installation{}
	if c.Get(ctx, client.ObjectKeyFromObject(in), cur) == nil {
		cur.Finalizers = nil
		_ = c.Update(ctx, cur)
	}
	selector := operator.Owner(in).Selector()
	for _, info := range kinds.All() {
		if info.Namespaced {
			continue
		}
		gvr := schema.GroupVersionResource{Group: info.GroupKind.Group, Version: info.Version, Resource: info.Resource}
		list, err := env.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			continue // not served
		}
		for _, o := range list.Items {
			t.Logf("cleanup: deleting %s left by the failed uninstall", strategy.RefOf(&o))
			_ = env.Dynamic.Resource(gvr).Delete(ctx, o.GetName(), metav1.DeleteOptions{})
		}
	}
}

// serviceAccountKubeconfig writes a kubeconfig that holds only a
// TokenRequest token of the operator's ServiceAccount and the cluster's
// CA, and returns its REST config and path.
func serviceAccountKubeconfig(ctx context.Context, t *testing.T, env *testenv.Env) (*rest.Config, string) {
	t.Helper()
	tr, err := env.Kube.CoreV1().ServiceAccounts(operatorNamespace).CreateToken(ctx, operatorName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of ServiceAccount %s/%s: %v", operatorNamespace, operatorName, err)
	}
	ca := env.Config.CAData
	if len(ca) == 0 && env.Config.CAFile != "" {
		if ca, err = os.ReadFile(env.Config.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	if len(ca) == 0 {
		t.Fatal("the test cluster's kubeconfig has no CA")
	}
	kc := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"local": {Server: env.Config.Host, CertificateAuthorityData: ca}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"operator": {Token: tr.Status.Token}},
		Contexts:       map[string]*clientcmdapi.Context{"operator": {Cluster: "local", AuthInfo: "operator"}},
		CurrentContext: "operator",
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(kc, path); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.CertData) > 0 || len(cfg.KeyData) > 0 || cfg.Username != "" || cfg.Impersonate.UserName != "" {
		t.Fatal("the ServiceAccount's kubeconfig carries another credential")
	}
	return cfg, path
}

// checkIdentityAndAccess checks that cfg authenticates as the operator's
// ServiceAccount, that it may do what the operator does cluster-wide when
// deployed (it watches every namespace, which the test's operator, scoped
// to one namespace, does not show), and that it is not cluster-admin.
func checkIdentityAndAccess(ctx context.Context, t *testing.T, cfg *rest.Config) {
	t.Helper()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	review, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "system:serviceaccount:" + operatorNamespace + ":" + operatorName; review.Status.UserInfo.Username != want {
		t.Fatalf("the token authenticates as %q, want %q", review.Status.UserInfo.Username, want)
	}
	for _, c := range []struct {
		attrs authorizationv1.ResourceAttributes
		want  bool
	}{
		{authorizationv1.ResourceAttributes{Verb: "watch", Group: v1alpha1.GroupName, Resource: "installations"}, true},
		{authorizationv1.ResourceAttributes{Verb: "list", Resource: "configmaps"}, true},
		{authorizationv1.ResourceAttributes{Verb: "update", Group: v1alpha1.GroupName, Resource: "installations", Subresource: "status", Namespace: "any"}, true},
		{authorizationv1.ResourceAttributes{Verb: "create", Group: "coordination.k8s.io", Resource: "leases", Namespace: operatorNamespace}, true},
		// Least privilege: Leases only in its namespace, no pods of its
		// own, no nodes, no wildcard.
		{authorizationv1.ResourceAttributes{Verb: "create", Group: "coordination.k8s.io", Resource: "leases", Namespace: "default"}, false},
		{authorizationv1.ResourceAttributes{Verb: "create", Resource: "pods", Namespace: "default"}, false},
		{authorizationv1.ResourceAttributes{Verb: "list", Resource: "nodes"}, false},
		{authorizationv1.ResourceAttributes{Verb: "*", Group: "*", Resource: "*"}, false},
	} {
		r, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx,
			&authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &c.attrs}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Allowed != c.want {
			t.Errorf("%+v: allowed %v, want %v (%s)", c.attrs, r.Status.Allowed, c.want, r.Status.Reason)
		}
	}
}

// operatorLog collects the operator's output.
type operatorLog struct{ testenv.SyncBuffer }

var forbiddenLine = regexp.MustCompile(`(?im)^.*(forbidden|unauthorized).*$`)

// failOnForbidden fails the test when the operator logged a refusal.
func (l *operatorLog) failOnForbidden(t *testing.T) {
	t.Helper()
	if lines := forbiddenLine.FindAllString(l.String(), 10); len(lines) > 0 {
		t.Fatalf("the operator was refused by the API server:\n%s", strings.Join(lines, "\n"))
	}
}

// startOperator builds cmd/installstrategy-operator and runs it with
// --kubeconfig and args until the test ends; its output is logged when
// the test fails.
func startOperator(t *testing.T, kubeconfig string, args ...string) *operatorLog {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "installstrategy-operator")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "github.com/installstrategy/installstrategy/cmd/installstrategy-operator")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	log := &operatorLog{}
	cmd := exec.Command(bin, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	// Nothing of the test's environment: no KUBECONFIG, no OPERATOR_IMAGE.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("operator exited: %v", err)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Error("the operator did not stop within 30s of SIGTERM")
		}
		if t.Failed() {
			t.Logf("operator output:\n%s", log.String())
		}
	})
	return log
}

// undeployAndCheck runs undeploy: refused while an Installation exists,
// then with the CRD kept, then in full; each time it checks what is left.
func undeployAndCheck(ctx context.Context, t *testing.T, env *testenv.Env, rendered []*unstructured.Unstructured) {
	ns := env.Namespace(ctx, t)
	blocker := &unstructured.Unstructured{}
	blocker.SetAPIVersion(v1alpha1.GroupVersion.String())
	blocker.SetKind("Installation")
	blocker.SetNamespace(ns)
	blocker.SetName("blocker")
	blocker.Object["spec"] = map[string]any{"version": "v1.0.0"}
	if err := env.Client.Create(ctx, blocker); err != nil {
		t.Fatal(err)
	}
	before := resourceVersions(ctx, t, env, rendered)
	out, err := runDeploy(ctx, t, "undeploy")
	if err == nil || !strings.Contains(out, ns+"/blocker") || !strings.Contains(out, "Nothing was deleted") {
		t.Errorf("undeploy with an Installation in the cluster: %v; want a refusal naming %s/blocker", err, ns)
	}
	if after := resourceVersions(ctx, t, env, rendered); len(after) != len(before) {
		t.Fatalf("the refused undeploy deleted objects: %d of %d left", len(after), len(before))
	}

	// --keep-crd keeps Installations, but not one in the operator's own
	// namespace, which it deletes: refused too.
	inside := blocker.DeepCopy()
	inside.SetNamespace(operatorNamespace)
	inside.SetResourceVersion("")
	if err := env.Client.Create(ctx, inside); err != nil {
		t.Fatal(err)
	}
	out, err = runDeploy(ctx, t, "undeploy", "--keep-crd")
	if err == nil || !strings.Contains(out, operatorNamespace+"/blocker") || !strings.Contains(out, "Nothing was deleted") {
		t.Errorf("undeploy --keep-crd with an Installation in %s: %v; want a refusal naming it", operatorNamespace, err)
	}
	if after := resourceVersions(ctx, t, env, rendered); len(after) != len(before) {
		t.Fatalf("the refused undeploy --keep-crd deleted objects: %d of %d left", len(after), len(before))
	}
	if err := env.Client.Delete(ctx, inside); err != nil {
		t.Fatal(err)
	}

	if _, err := runDeploy(ctx, t, "undeploy", "--keep-crd"); err != nil {
		t.Fatal(err)
	}
	left := resourceVersions(ctx, t, env, rendered)
	if _, ok := left["CustomResourceDefinition.apiextensions.k8s.io/installations.installstrategy.io"]; !ok || len(left) != 1 {
		t.Errorf("after undeploy --keep-crd: %v left, want only the CRD", left)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(blocker), blocker); err != nil {
		t.Errorf("the Installation did not survive undeploy --keep-crd: %v", err)
	}
	if err := env.Client.Delete(ctx, blocker); err != nil {
		t.Fatal(err)
	}

	out, err = runDeploy(ctx, t, "undeploy")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d objects (1 deleted, %d absent)", len(rendered), len(rendered)-1); !strings.Contains(out, want) {
		t.Errorf("undeploy did not report %q", want)
	}
	if left := resourceVersions(ctx, t, env, rendered); len(left) != 0 {
		t.Errorf("after undeploy: %v left", left)
	}
	// Nothing that the operator's objects owned is left either.
	if _, err := env.Kube.CoreV1().Namespaces().Get(ctx, operatorNamespace, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s after undeploy: %v", operatorNamespace, err)
	}
	crbs, err := env.Kube.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range crbs.Items {
		for _, s := range b.Subjects {
			if s.Namespace == operatorNamespace {
				t.Errorf("ClusterRoleBinding %s still names %s/%s", b.Name, s.Namespace, s.Name)
			}
		}
	}

	out, err = runDeploy(ctx, t, "undeploy")
	if err != nil || !strings.Contains(out, fmt.Sprintf("(%d absent)", len(rendered))) {
		t.Errorf("a second undeploy: %v; want every object absent", err)
	}
}
