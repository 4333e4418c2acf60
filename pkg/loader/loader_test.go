package loader_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/internal/testtier"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/generate"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/loader"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

const operatorImage = "registry.example/sample/sample-operator:v1.1.0"

func sampleConfig(ns, version string) *identity.Config {
	return &identity.Config{Namespace: ns, Registry: "registry.example/sample", Version: version}
}

type fixture struct {
	env    *testenv.Env
	ns     string
	store  *store.Store
	clock  *clocktesting.FakeClock
	loader *loader.Loader
}

func setup(t *testing.T, opts loader.Options) *fixture {
	t.Helper()
	env := testenv.New(t)
	f := &fixture{env: env, ns: env.Namespace(t.Context(), t), clock: clocktesting.NewFakeClock(time.Now())}
	var err error
	if f.store, err = store.NewForConfig(env.Config, store.Options{}); err != nil {
		t.Fatal(err)
	}
	opts.Store, opts.Kube, opts.Clock = f.store, env.Kube, f.clock
	if f.loader, err = loader.New(opts); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) request(version string) loader.Request {
	return loader.Request{Config: sampleConfig(f.ns, version), Image: operatorImage}
}

func (f *fixture) job(t *testing.T, name string) (*batchv1.Job, bool) {
	t.Helper()
	j, err := f.env.Kube.BatchV1().Jobs(f.ns).Get(t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return j, true
}

// waitJobGone waits until the Job (and so its pods, in the background) is
// deleted.
func (f *fixture) waitJobGone(t *testing.T, name string) {
	t.Helper()
	testenv.WaitFor(t.Context(), t, "job "+name+" deleted", func(ctx context.Context) (bool, string, error) {
		_, err := f.env.Kube.BatchV1().Jobs(f.ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		return false, "still there", err
	})
}

// start calls Load for the first time: it must start a dump Job, whose
// name it returns.
func (f *fixture) start(t *testing.T, req loader.Request) string {
	t.Helper()
	res, err := f.loader.Load(t.Context(), req)
	if err != nil || !res.Pending() {
		t.Fatalf("first load: %+v, %v; want pending", res, err)
	}
	if res.RequeueAfter <= 0 {
		t.Fatalf("pending result %+v has no RequeueAfter", res)
	}
	return strings.TrimPrefix(res.Job, f.ns+"/")
}

// loadUntil calls Load until it returns a strategy or an error.
func (f *fixture) loadUntil(t *testing.T, req loader.Request) (*loader.Result, error) {
	t.Helper()
	var res *loader.Result
	var lerr error
	testenv.WaitFor(t.Context(), t, "load to finish", func(ctx context.Context) (bool, string, error) {
		res, lerr = f.loader.Load(ctx, req)
		if lerr != nil || !res.Pending() {
			return true, "", nil
		}
		return false, "pending on " + res.Job, nil
	})
	return res, lerr
}

// TestLoadFromStoreAndCache loads a stored strategy, then from the cache;
// every result is a copy, and customisations apply to fresh copies once
// per generation.
func TestLoadFromStoreAndCache(t *testing.T) {
	f := setup(t, loader.Options{})
	ctx := t.Context()
	want, err := generate.Sample(sampleConfig(f.ns, "v1.0.0"), generate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	entry, err := f.store.Publish(ctx, f.ns, want)
	if err != nil {
		t.Fatal(err)
	}
	req := f.request("v1.0.0")
	res, err := f.loader.Load(ctx, req)
	if err != nil || res.Pending() || res.Source != loader.SourceStore {
		t.Fatalf("first load: %+v, %v", res, err)
	}
	// The digest is the stored text's, whatever the loader's caller
	// changes: the status reports it without serialising the strategy.
	if res.Digest == "" || res.Digest != entry.Digest {
		t.Fatalf("first load: digest %q, want the stored text's %q", res.Digest, entry.Digest)
	}
	if !sameText(t, res.Strategy, want) || res.Strategy.Identity != want.Identity {
		t.Fatal("loaded strategy differs from the stored one")
	}
	res.Strategy.Objects[0].SetName("changed-by-caller")
	res.Strategy.Objects = res.Strategy.Objects[1:]

	// The store no longer matters: the cache answers.
	if err := f.env.Kube.CoreV1().ConfigMaps(f.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: metakeys.StrategyLabel}); err != nil {
		t.Fatal(err)
	}
	again, err := f.loader.Load(ctx, req)
	if err != nil || again.Source != loader.SourceCache || !sameText(t, again.Strategy, want) {
		t.Fatalf("cached load: %+v, %v (or the caller's change leaked into the cache)", again, err)
	}
	if again.Digest != entry.Digest {
		t.Fatalf("cached load: digest %q, want %q", again.Digest, entry.Digest)
	}
	// Each load is a copy, but not of the CRDs' schemas: those stay the
	// values the cache holds (most of a KubeVirt strategy).
	third, err := f.loader.Load(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if n := sharedSchemas(t, again.Strategy, third.Strategy); n == 0 {
		t.Fatal("the sample's CRDs have no schema: nothing was tested")
	}
	third.Strategy.Objects[0].SetName("changed-by-caller")
	if again.Strategy.Objects[0].GetName() == "changed-by-caller" {
		t.Fatal("two loads share an object's metadata")
	}

	calls := 0
	customize := func(s *strategy.Strategy) error {
		calls++
		o := s.Objects[0]
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[fmt.Sprintf("gen-%d-call-%d", req.Generation, calls)] = "x"
		o.SetLabels(labels)
		return nil
	}
	for _, step := range []struct {
		generation int64
		calls      int
		label      string
	}{
		{1, 1, "gen-1-call-1"},
		{1, 1, "gen-1-call-1"}, // same generation: not customised again
		{2, 2, "gen-2-call-2"}, // new generation: customised again, on a fresh copy
	} {
		req.Generation, req.Customize = step.generation, customize
		res, err := f.loader.Load(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		labels := res.Strategy.Objects[0].GetLabels()
		var custom []string
		for k := range labels {
			if strings.HasPrefix(k, "gen-") {
				custom = append(custom, k)
			}
		}
		if calls != step.calls || !slices.Equal(custom, []string{step.label}) {
			t.Fatalf("generation %d: %d customisations, labels %v; want %d and only %s", step.generation, calls, custom, step.calls, step.label)
		}
		if res.Digest != entry.Digest {
			t.Fatalf("generation %d: digest %q, want the text's %q (before customisation)", step.generation, res.Digest, entry.Digest)
		}
		delete(labels, step.label)
		res.Strategy.Objects[0].SetLabels(labels)
	}
	req.Generation, req.Customize = 3, func(*strategy.Strategy) error { return errors.New("bad patch") }
	if _, err := f.loader.Load(ctx, req); err == nil || !strings.Contains(err.Error(), "bad patch") {
		t.Fatalf("failing customisation: %v", err)
	}
}

// sharedSchemas checks that the CRDs of two loads hold the very same
// schema values (not equal copies) and returns how many there are.
func sharedSchemas(t *testing.T, a, b *strategy.Strategy) int {
	t.Helper()
	schemas := func(s *strategy.Strategy) map[string]any {
		out := map[string]any{}
		for _, o := range s.Objects {
			info, _ := kinds.Lookup(o.GroupVersionKind().GroupKind())
			info.EachBulky(o.Object, func(at string, _ map[string]any, _ string, v any) {
				out[o.GetName()+" "+at] = v
			})
		}
		return out
	}
	x, y := schemas(a), schemas(b)
	if len(x) != len(y) {
		t.Fatalf("%d schemas in one load, %d in the other", len(x), len(y))
	}
	for k, v := range x {
		if reflect.ValueOf(v).UnsafePointer() != reflect.ValueOf(y[k]).UnsafePointer() {
			t.Errorf("%s: each load holds its own copy of the schema", k)
		}
	}
	return len(x)
}

func sameText(t *testing.T, a, b *strategy.Strategy) bool {
	t.Helper()
	x, err := a.Serialize()
	if err != nil {
		t.Fatal(err)
	}
	y, err := b.Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(x, y)
}

// buildOperator builds cmd/installstrategy-operator into a temporary folder.
func buildOperator(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "installstrategy-operator")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "github.com/installstrategy/installstrategy/cmd/installstrategy-operator")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// impersonatingKubeconfig writes a kubeconfig for the test cluster that
// acts as a service account, so the dump runs with the Job's permissions.
func impersonatingKubeconfig(t *testing.T, ns, sa string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(os.Getenv(testenv.KubeconfigEnv))
	if err != nil {
		t.Fatal(err)
	}
	for _, ai := range cfg.AuthInfos {
		ai.Impersonate = "system:serviceaccount:" + ns + ":" + sa
		ai.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// runDump plays the kubelet: it runs the operator binary with the Job's
// arguments and environment, as the Job's service account.
func runDump(t *testing.T, bin, kubeconfig string, job *batchv1.Job) string {
	t.Helper()
	c := job.Spec.Template.Spec.Containers[0]
	cmd := exec.CommandContext(t.Context(), bin, append(slices.Clone(c.Args), "--kubeconfig="+kubeconfig)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	for _, e := range c.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("dump: %v\n%s", err, out)
	}
	return string(out)
}

// TestDumpJob follows the dump Job path end to end: the loader creates the
// Job and its RBAC, the test runs the operator binary in dump mode the way
// the Job's pod would (as the Job's service account), and the loader then
// finds the published strategy and deletes the Job. A second dump of the
// same identifier publishes nothing.
func TestDumpJob(t *testing.T) {
	testtier.Heavy(t) // before the operator build; setup reaches the cluster
	bin := buildOperator(t)
	f := setup(t, loader.Options{})
	ctx := t.Context()
	req := f.request("v1.1.0")
	res, err := f.loader.Load(ctx, req)
	if err != nil || !res.Pending() {
		t.Fatalf("first load: %+v, %v; want pending", res, err)
	}
	id, _ := req.Config.Identity(nil)
	name := loader.JobNamePrefix + id.Identifier[:loader.JobNameIDLength]
	if res.Job != f.ns+"/"+name || res.RequeueAfter != loader.DefaultPollInterval {
		t.Fatalf("pending result %+v", res)
	}
	job, ok := f.job(t, name)
	if !ok {
		t.Fatal("no dump job in the cluster")
	}
	checkJob(t, job, req, id)
	checkRBAC(t, f, job.Spec.Template.Spec.ServiceAccountName)

	out := runDump(t, bin, impersonatingKubeconfig(t, f.ns, job.Spec.Template.Spec.ServiceAccountName), job)
	if !strings.Contains(out, "strategy published") {
		t.Fatalf("dump output: %s", out)
	}
	res, err = f.loadUntil(t, req)
	if err != nil {
		t.Fatal(err)
	}
	want, err := generate.Sample(req.Config, generate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Source != loader.SourceStore || !sameText(t, res.Strategy, want) || res.Strategy.Identity != id {
		t.Fatalf("loaded %+v from %s, want the sample v1.1.0 strategy from the store", res.Strategy.Identity, res.Source)
	}
	f.waitJobGone(t, name)

	out = runDump(t, bin, impersonatingKubeconfig(t, f.ns, job.Spec.Template.Spec.ServiceAccountName), job)
	if !strings.Contains(out, "strategy already stored") {
		t.Fatalf("second dump output: %s", out)
	}
	entries, err := f.store.List(ctx, f.ns)
	if err != nil || len(entries) != 1 || entries[0].Identity != id {
		t.Fatalf("strategies after two dumps: %+v, %v; want one", entries, err)
	}
}

// The dump pod follows the configuration's infra placement (an affinity
// replaces the default control-plane preference) and pulls with the
// request's pull secrets.
func TestDumpJobPlacementAndPullSecrets(t *testing.T) {
	f := setup(t, loader.Options{})
	req := f.request("v1.1.0")
	affinity := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "type", Operator: corev1.NodeSelectorOpIn, Values: []string{"kwok"}}}}},
	}}}
	req.Config.Placement = &identity.Placement{Infra: &identity.NodePlacement{NodeSelector: map[string]string{"infra": "yes"}, Affinity: affinity}}
	req.ImagePullSecrets = []string{"pull", "pull", "other"}
	id, _ := req.Config.Identity(nil)
	job, err := f.loader.Job(req, id)
	if err != nil {
		t.Fatal(err)
	}
	spec := job.Spec.Template.Spec
	if spec.NodeSelector["infra"] != "yes" || !reflect.DeepEqual(spec.Affinity, affinity) {
		t.Errorf("dump pod nodeSelector %v affinity %v, want the infra placement", spec.NodeSelector, spec.Affinity)
	}
	if want := []corev1.LocalObjectReference{{Name: "pull"}, {Name: "other"}}; !slices.Equal(spec.ImagePullSecrets, want) {
		t.Errorf("dump pod imagePullSecrets %v, want %v", spec.ImagePullSecrets, want)
	}
}

func checkJob(t *testing.T, job *batchv1.Job, req loader.Request, id strategy.Identity) {
	t.Helper()
	spec := job.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers", len(spec.Containers))
	}
	c := spec.Containers[0]
	cfg, err := identity.ParseConfig([]byte(loader.JobConfig(job)))
	if err != nil {
		t.Fatalf("job env %s: %v", identity.EnvVar, err)
	}
	if got, _ := cfg.Identity(nil); got != id || cfg.ID != id.Identifier {
		t.Errorf("job configuration has identity %+v and id %s, want %+v", got, cfg.ID, id)
	}
	checks := []struct {
		what string
		ok   bool
	}{
		{"image", c.Image == req.Image},
		{"args", slices.Equal(c.Args, []string{loader.DumpFlag})},
		{"annotation", job.Annotations[metakeys.IdentifierAnnotation] == id.Identifier},
		{"runAsNonRoot", spec.SecurityContext != nil && spec.SecurityContext.RunAsNonRoot != nil && *spec.SecurityContext.RunAsNonRoot},
		{"seccomp", spec.SecurityContext != nil && spec.SecurityContext.SeccompProfile != nil && spec.SecurityContext.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault},
		{"no privilege escalation", c.SecurityContext != nil && c.SecurityContext.AllowPrivilegeEscalation != nil && !*c.SecurityContext.AllowPrivilegeEscalation},
		{"drop ALL", c.SecurityContext != nil && c.SecurityContext.Capabilities != nil && slices.Equal(c.SecurityContext.Capabilities.Drop, []corev1.Capability{"ALL"})},
		{"control-plane toleration", slices.ContainsFunc(spec.Tolerations, func(tl corev1.Toleration) bool {
			return tl.Key == "node-role.kubernetes.io/control-plane" && tl.Operator == corev1.TolerationOpExists
		})},
		{"control-plane affinity", spec.Affinity != nil && spec.Affinity.NodeAffinity != nil && len(spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 1},
		{"backoff limit", job.Spec.BackoffLimit != nil && *job.Spec.BackoffLimit == 0},
		{"ttl", job.Spec.TTLSecondsAfterFinished != nil && *job.Spec.TTLSecondsAfterFinished == int32(loader.DefaultJobTTL/time.Second)},
		{"deadline", job.Spec.ActiveDeadlineSeconds != nil && *job.Spec.ActiveDeadlineSeconds == int64(loader.DefaultActiveDeadline/time.Second)},
		{"restart policy", spec.RestartPolicy == corev1.RestartPolicyNever},
		{"service account", spec.ServiceAccountName == loader.DefaultServiceAccount},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("dump job: %s is wrong", c.what)
		}
	}
}

// checkRBAC checks that the dump service account may only create, get and
// list ConfigMaps in the namespace.
func checkRBAC(t *testing.T, f *fixture, sa string) {
	t.Helper()
	ctx := t.Context()
	role, err := f.env.Kube.RbacV1().Roles(f.ns).Get(ctx, sa, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "get", "list"}}}
	if fmt.Sprint(role.Rules) != fmt.Sprint(want) {
		t.Fatalf("role rules %v, want %v", role.Rules, want)
	}
	if _, err := f.env.Kube.CoreV1().ServiceAccounts(f.ns).Get(ctx, sa, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	// As the service account: ConfigMaps yes, anything else no.
	cfg := rest.CopyConfig(f.env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + f.ns + ":" + sa}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ConfigMaps(f.ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("service account cannot list configmaps: %v", err)
	}
	if _, err := kube.CoreV1().Secrets(f.ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("service account lists secrets: %v", err)
	}
	if err := kube.CoreV1().ConfigMaps(f.ns).Delete(ctx, "anything", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("service account may delete configmaps: %v", err)
	}
	if _, err := kube.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("service account lists configmaps of another namespace: %v", err)
	}
	// The authorizer's own answer for each verb that matters: the dump Job
	// may write new ConfigMaps in its namespace (and read them, so a second
	// dump of the same strategy is a no-op), and nothing else; in
	// particular it cannot change or delete a strategy someone else wrote.
	user := "system:serviceaccount:" + f.ns + ":" + sa
	for _, c := range []struct {
		verb, group, resource, namespace string
		allowed                          bool
	}{
		{"create", "", "configmaps", f.ns, true},
		{"get", "", "configmaps", f.ns, true},
		{"list", "", "configmaps", f.ns, true},
		{"update", "", "configmaps", f.ns, false},
		{"patch", "", "configmaps", f.ns, false},
		{"delete", "", "configmaps", f.ns, false},
		{"create", "", "configmaps", "default", false},
		{"list", "", "configmaps", "", false},
		{"get", "", "secrets", f.ns, false},
		{"create", "", "pods", f.ns, false},
		{"update", "", "pods/status", f.ns, false},
		{"create", "batch", "jobs", f.ns, false},
		{"create", "rbac.authorization.k8s.io", "rolebindings", f.ns, false},
		{"create", "rbac.authorization.k8s.io", "clusterrolebindings", "", false},
		{"update", "installstrategy.io", "installations", f.ns, false},
	} {
		sar, err := f.env.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + f.ns, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: c.verb, Group: c.group, Resource: c.resource, Namespace: c.namespace},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != c.allowed {
			t.Errorf("SubjectAccessReview %s %s %s in %q: allowed %v, want %v", user, c.verb, c.resource, c.namespace, sar.Status.Allowed, c.allowed)
		}
	}
}

// TestDumpJobFails makes kwok fail the dump pod: Load reports a JobError
// with the pod's reason, deletes the Job, returns the same error until the
// backoff has passed (without starting a Job), then starts a new Job, whose
// failure doubles the backoff.
func TestDumpJobFails(t *testing.T) {
	f := setup(t, loader.Options{PodLabels: testenv.BehaviourLabels(testenv.BehaviourFail)})
	ctx := t.Context()
	req := f.request("v1.1.0")
	name := f.start(t, req)
	job, _ := f.job(t, name)
	if job.Spec.Template.Labels[testenv.BehaviourLabel] != string(testenv.BehaviourFail) {
		t.Fatalf("pod labels %v lack the test behaviour", job.Spec.Template.Labels)
	}

	for attempt, wait := range []time.Duration{loader.DefaultInitialBackoff, 2 * loader.DefaultInitialBackoff} {
		_, err := f.loadUntil(t, req)
		var jerr *loader.JobError
		if !errors.As(err, &jerr) {
			t.Fatalf("attempt %d: load error %v, want a JobError", attempt+1, err)
		}
		t.Log(err)
		if jerr.Reason != loader.ReasonFailed || jerr.Attempt != attempt+1 || !jerr.RetryAt.Equal(f.clock.Now().Add(wait)) || jerr.Pod == "" || jerr.Logs != nil {
			t.Fatalf("attempt %d: %+v", attempt+1, jerr)
		}
		for _, want := range []string{"BackoffLimitExceeded", "exit code 1", jerr.Pod} {
			if !strings.Contains(jerr.Message, want) {
				t.Errorf("message %q does not say %q", jerr.Message, want)
			}
		}
		f.waitJobGone(t, name)

		// Within the backoff: the same error, and no new Job.
		f.clock.Step(wait - time.Second)
		_, again := f.loader.Load(ctx, req)
		var same *loader.JobError
		if !errors.As(again, &same) || same.Attempt != jerr.Attempt || !same.RetryAt.Equal(jerr.RetryAt) {
			t.Fatalf("load within the backoff: %v", again)
		}
		if _, ok := f.job(t, name); ok {
			t.Fatal("a job was started within the backoff")
		}

		// After it: a new Job.
		f.clock.Step(time.Second)
		res, err := f.loader.Load(ctx, req)
		if err != nil || !res.Pending() {
			t.Fatalf("load after the backoff: %+v, %v; want pending", res, err)
		}
		if _, ok := f.job(t, name); !ok {
			t.Fatal("no new job after the backoff")
		}
	}
}

// TestDumpJobNoResult lets the Job succeed without anything being
// published: Load reports it, deletes the Job and backs off.
func TestDumpJobNoResult(t *testing.T) {
	f := setup(t, loader.Options{})
	req := f.request("v1.2.0")
	name := f.start(t, req)
	f.env.WaitJobFinished(t.Context(), t, f.ns, name)
	_, err := f.loadUntil(t, req)
	var jerr *loader.JobError
	if !errors.As(err, &jerr) || jerr.Reason != loader.ReasonNoResult || jerr.Attempt != 1 {
		t.Fatalf("load error %v, want a NoResult JobError", err)
	}
	t.Log(err)
	f.waitJobGone(t, name)
}

// TestDumpJobNotStarted gives the dump pod a node selector no node has: once
// the start timeout has passed, Load reports the scheduler's reason.
func TestDumpJobNotStarted(t *testing.T) {
	f := setup(t, loader.Options{Placement: &identity.NodePlacement{NodeSelector: map[string]string{"installstrategy.io/no-such-node": "true"}}})
	ctx := t.Context()
	req := f.request("v1.0.0")
	name := f.start(t, req)
	testenv.WaitFor(ctx, t, "dump pod unschedulable", func(ctx context.Context) (bool, string, error) {
		pods, err := f.env.Kube.CoreV1().Pods(f.ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + name})
		if err != nil || len(pods.Items) == 0 {
			return false, "no pod", err
		}
		for _, c := range pods.Items[0].Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				return true, "", nil
			}
		}
		return false, testenv.DescribePod(&pods.Items[0]), nil
	})
	// Before the timeout it is only pending.
	if res, err := f.loader.Load(ctx, req); err != nil || !res.Pending() {
		t.Fatalf("load before the start timeout: %+v, %v", res, err)
	}
	f.clock.Step(loader.DefaultStartTimeout)
	_, err := f.loader.Load(ctx, req)
	var jerr *loader.JobError
	if !errors.As(err, &jerr) || jerr.Reason != loader.ReasonNotStarted || !strings.Contains(jerr.Message, "unschedulable") || !strings.Contains(jerr.Message, "node affinity/selector") {
		t.Fatalf("load error %v, want a NotStarted JobError with the scheduler's reason", err)
	}
	t.Log(err)
	f.waitJobGone(t, name)
}

// TestCorruptNotDumped: a stored strategy that fails verification is an
// error, and no dump Job papers over it.
func TestCorruptNotDumped(t *testing.T) {
	f := setup(t, loader.Options{})
	ctx := t.Context()
	req := f.request("v1.0.0")
	s, err := generate.Sample(req.Config, generate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := f.store.Publish(ctx, f.ns, s)
	if err != nil {
		t.Fatal(err)
	}
	cm, err := f.env.Kube.CoreV1().ConfigMaps(f.ns).Get(ctx, e.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Annotations[metakeys.DigestAnnotation] = codec.Digest(nil)
	if _, err := f.env.Kube.CoreV1().ConfigMaps(f.ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = f.loader.Load(ctx, req)
	var corrupt *store.CorruptError
	if !errors.As(err, &corrupt) {
		t.Fatalf("load error %v, want a CorruptError", err)
	}
	jobs, err := f.env.Kube.BatchV1().Jobs(f.ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(jobs.Items) != 0 {
		t.Fatalf("jobs: %v, %v; want none", jobs, err)
	}
}
