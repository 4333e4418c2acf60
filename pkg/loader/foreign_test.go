package loader_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/internal/dump"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/loader"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// TestForeignDumpBoundToTheJobRun: a foreign dump image (KubeVirt's
// virt-operator) writes a KubeVirt-form ConfigMap and reports no digest.
// With Options.Foreign the loader adopts the one such ConfigMap the
// believed Job's pod wrote while it ran, stores its text signed, and
// refuses a second candidate (a ConfigMap editor's copy stored while the
// Job ran) and a ConfigMap written after the pod finished (an editor who
// replaced the dump's text with one that grants them cluster-admin). The
// operator's own dump mode in KubeVirt's form stands in for the foreign
// image here (kwok runs no container); test/e2e's
// TestKubeVirtUpgradeByImageTagOnRealNode runs KubeVirt's real one.
func TestForeignDumpBoundToTheJobRun(t *testing.T) {
	f, ring := signingSetup(t)
	rules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}}}
	var err error
	if f.loader, err = loader.New(loader.Options{Store: f.store, Kube: f.env.Kube, Clock: f.clock, Foreign: true, ImageEnv: "VIRT_OPERATOR_IMAGE",
		ClusterRules: rules, PodLabels: testenv.BehaviourLabels(testenv.BehaviourAwaitResult)}); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	kv, err := store.New(f.env.Kube, store.Options{Format: codec.FormatKubeVirt})
	if err != nil {
		t.Fatal(err)
	}
	// foreignDump does what the foreign image does for a Job: store its
	// strategy in KubeVirt's form, then exit 0 reporting nothing.
	foreignDump := func(name string) (*batchv1.Job, *dump.Result) {
		t.Helper()
		job, ok := f.job(t, name)
		if !ok {
			t.Fatalf("no dump job %s", name)
		}
		res, err := dump.Run(ctx, dump.Options{ConfigJSON: []byte(loader.JobConfig(job)), Store: kv})
		if err != nil || res.Entry.Format != codec.FormatKubeVirt || res.Entry.Digest != "" {
			t.Fatalf("dump in KubeVirt's form: %+v, %v", res, err)
		}
		return job, res
	}
	notTrusted := func(id strategy.Identity) {
		t.Helper()
		if e, err := f.store.Find(ctx, f.ns, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a strategy for %s is trusted: %v, %v", id.Version, e, err)
		}
	}

	// Adopted: the text of what the Job wrote, stored natively and signed.
	req := f.request("v1.1.0")
	name := f.start(t, req)
	job, res := foreignDump(name)
	if !strings.Contains(loader.JobConfig(job), `"kubeVirtVersion":"v1.1.0"`) {
		t.Errorf("dump configuration %s: want KubeVirt's form, which its dump mode reads", loader.JobConfig(job))
	}
	c := job.Spec.Template.Spec.Containers[0]
	if len(c.Env) < 2 || c.Env[1].Name != "VIRT_OPERATOR_IMAGE" || c.Env[1].Value != req.Image {
		t.Errorf("dump container env %v: want VIRT_OPERATOR_IMAGE=%s after the configuration", c.Env, req.Image)
	}
	crb, err := f.env.Kube.RbacV1().ClusterRoleBindings().Get(ctx, loader.DefaultServiceAccount+"-"+f.ns, metav1.GetOptions{})
	if err != nil || len(crb.Subjects) != 1 || crb.Subjects[0].Namespace != f.ns || crb.Subjects[0].Name != loader.DefaultServiceAccount {
		t.Errorf("cluster role binding of the dump service account: %+v, %v", crb, err)
	}
	t.Cleanup(func() {
		bg := context.WithoutCancel(ctx)
		_ = f.env.Kube.RbacV1().ClusterRoleBindings().Delete(bg, loader.DefaultServiceAccount+"-"+f.ns, metav1.DeleteOptions{})
		_ = f.env.Kube.RbacV1().ClusterRoles().Delete(bg, loader.DefaultServiceAccount+"-"+f.ns, metav1.DeleteOptions{})
	})
	f.env.FinishDumpJob(ctx, t, f.ns, name, "")
	got, err := f.loadUntil(t, req)
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != res.Digest {
		t.Errorf("loaded %s, want the digest of what the job wrote, %s", got.Digest, res.Digest)
	}
	e, err := f.store.Find(ctx, f.ns, res.Identity)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ring.Verify(e.Digest, e.Signature, e.SignatureKey); err != nil || e.Format != codec.FormatNative || e.Digest != res.Digest {
		t.Errorf("adopted copy %+v: signed %v; want the native form, signed, with the dump's digest", e, err)
	}

	// A ConfigMap editor stores a copy of their own while the Job runs:
	// two candidates, none adopted.
	req = f.request("v1.2.0")
	name = f.start(t, req)
	_, res = foreignDump(name)
	forged := forge(t, f, kv, res)
	if _, err := f.env.Kube.CoreV1().ConfigMaps(f.ns).Create(ctx, forged, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.env.FinishDumpJob(ctx, t, f.ns, name, "")
	_, err = f.loadUntil(t, req)
	var jerr *loader.JobError
	if !errors.As(err, &jerr) || jerr.Reason != loader.ReasonNoResult || !strings.Contains(err.Error(), "2 unsigned strategies") {
		t.Errorf("two candidates: %v; want NoResult naming both", err)
	}
	notTrusted(res.Identity)

	// The editor replaces the dump's text after the pod finished.
	req = f.request("v1.3.0")
	name = f.start(t, req)
	_, res = foreignDump(name)
	f.env.FinishDumpJob(ctx, t, f.ns, name, "")
	var finished time.Time
	testenv.WaitFor(ctx, t, "the dump pod to finish", func(ctx context.Context) (bool, string, error) {
		pods, err := f.env.Kube.CoreV1().Pods(f.ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + name})
		if err != nil || len(pods.Items) == 0 || pods.Items[0].Status.Phase != corev1.PodSucceeded {
			return false, "not succeeded", err
		}
		finished = pods.Items[0].Status.ContainerStatuses[0].State.Terminated.FinishedAt.Time
		// The API server's times have 1 s resolution: a write in the
		// same second as the finish counts as during the run.
		return time.Now().Truncate(time.Second).After(finished), "same second", nil
	})
	cm, err := f.env.Kube.CoreV1().ConfigMaps(f.ns).Get(ctx, res.Entry.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data = forge(t, f, kv, res).Data
	if _, err := f.env.Kube.CoreV1().ConfigMaps(f.ns).Update(ctx, cm, metav1.UpdateOptions{FieldManager: cm.ManagedFields[0].Manager}); err != nil {
		t.Fatal(err)
	}
	_, err = f.loadUntil(t, req)
	if !errors.As(err, &jerr) || jerr.Reason != loader.ReasonNoResult || !strings.Contains(err.Error(), "after the job's pod finished") {
		t.Errorf("edited after the run: %v; want NoResult saying it was written after the pod finished", err)
	}
	notTrusted(res.Identity)

	// Without Foreign, a Job that reports no digest is NoResult.
	if f.loader, err = loader.New(loader.Options{Store: f.store, Kube: f.env.Kube, Clock: f.clock, PodLabels: testenv.BehaviourLabels(testenv.BehaviourAwaitResult)}); err != nil {
		t.Fatal(err)
	}
	req = f.request("v1.4.0")
	name = f.start(t, req)
	_, res = foreignDump(name)
	f.env.FinishDumpJob(ctx, t, f.ns, name, "")
	if _, err = f.loadUntil(t, req); !errors.As(err, &jerr) || jerr.Reason != loader.ReasonNoResult || !strings.Contains(err.Error(), "did not report the digest") {
		t.Errorf("not foreign: %v; want NoResult", err)
	}
	notTrusted(res.Identity)
}

// forge is what a ConfigMap editor would store for a dump's identity: its
// strategy plus a binding of the editor to cluster-admin, in KubeVirt's
// form.
func forge(t *testing.T, f *fixture, kv *store.Store, res *dump.Result) *corev1.ConfigMap {
	t.Helper()
	l, err := kv.Read(t.Context(), res.Entry)
	if err != nil {
		t.Fatal(err)
	}
	s := l.Strategy
	s.Objects = append(s.Objects, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": map[string]any{"name": "editor-is-admin"},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
		"subjects": []any{map[string]any{"kind": "User", "name": "editor", "apiGroup": "rbac.authorization.k8s.io"}},
	}})
	cm, err := codec.Encode(s, codec.EncodeOptions{Format: codec.FormatKubeVirt, Namespace: f.ns, Identity: res.Identity})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}
