package loader_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/installstrategy/installstrategy/internal/dump"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/loader"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// publish stores, unsigned, the strategy a dump Job with the given
// configuration would (as a namespace admin can), and returns its result.
func (f *fixture) publish(t *testing.T, cfgJSON string) *dump.Result {
	t.Helper()
	plain, err := store.New(f.env.Kube, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := dump.Run(t.Context(), dump.Options{ConfigJSON: []byte(cfgJSON), Store: plain})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// notTrusted fails the test when the store trusts a strategy for id.
func (f *fixture) notTrusted(t *testing.T, id strategy.Identity) {
	t.Helper()
	if _, err := f.store.Find(t.Context(), f.ns, id); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the forged job's strategy is trusted: %v", err)
	}
}

// A namespace admin creates a Job under the dump Job's (predictable) name
// before the operator does: the loader's own spec with one change that
// makes the pod run something else, report a digest, and have the loader
// sign what it stored. The loader believes none of them, whatever the pod
// reports, and leaves the Job alone (it is not its own).
func TestForgedDumpJobNotBelieved(t *testing.T) {
	mount := func(s *corev1.PodSpec) {
		s.Volumes = append(s.Volumes, corev1.Volume{Name: "bin", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		s.Containers[0].VolumeMounts = append(s.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "bin", MountPath: "/usr/local/bin"})
	}
	for _, tt := range []struct {
		name   string
		change func(j *batchv1.Job)
	}{
		{"binary mounted over the entrypoint", func(j *batchv1.Job) { mount(&j.Spec.Template.Spec) }},
		{"LD_PRELOAD", func(j *batchv1.Job) {
			c := &j.Spec.Template.Spec.Containers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: "LD_PRELOAD", Value: "/tmp/evil.so"})
		}},
		{"envFrom", func(j *batchv1.Job) {
			j.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "evil"}, Optional: ptr.To(true)}}}
		}},
		{"working directory", func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].WorkingDir = "/tmp" }},
		{"service account", func(j *batchv1.Job) { j.Spec.Template.Spec.ServiceAccountName = "default" }},
		{"command", func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "evil"} }},
		{"host aliases", func(j *batchv1.Job) {
			j.Spec.Template.Spec.HostAliases = []corev1.HostAlias{{IP: "10.0.0.66", Hostnames: []string{"kubernetes.default.svc"}}}
		}},
		{"sidecar", func(j *batchv1.Job) {
			s := &j.Spec.Template.Spec
			s.InitContainers = []corev1.Container{{Name: "side", Image: "registry.example/evil:latest", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}}
		}},
		{"pod annotation", func(j *batchv1.Job) { j.Spec.Template.Annotations = map[string]string{"evil": "yes"} }},
		{"completion mode", func(j *batchv1.Job) { j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, _ := signingSetup(t)
			ctx := t.Context()
			req := f.request("v1.1.0")
			id, _ := req.Config.Identity(nil)
			forged, err := f.loader.Job(req, id)
			if err != nil {
				t.Fatal(err)
			}
			tt.change(forged)
			sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: loader.DefaultServiceAccount, Namespace: f.ns}}
			if _, err := f.env.Kube.CoreV1().ServiceAccounts(f.ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := f.env.Kube.BatchV1().Jobs(f.ns).Create(ctx, forged, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			res := f.publish(t, loader.JobConfig(forged))
			f.env.FinishDumpJob(ctx, t, f.ns, forged.Name, res.Digest)
			waitJobComplete(t, f, forged.Name)
			_, err = f.loadUntil(t, req)
			if err == nil || !strings.Contains(err.Error(), "is not the loader's dump job") {
				t.Fatalf("load with a forged job: %v; want it refused", err)
			}
			f.notTrusted(t, res.Identity)
			if _, ok := f.job(t, forged.Name); !ok {
				t.Error("the forged job was deleted (it is not the loader's)")
			}
		})
	}
}

func waitJobComplete(t *testing.T, f *fixture, name string) {
	t.Helper()
	testenv.WaitFor(t.Context(), t, "job "+name+" complete", func(ctx context.Context) (bool, string, error) {
		j, err := f.env.Kube.BatchV1().Jobs(f.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return true, "", nil
			}
		}
		return false, "not complete", nil
	})
}

// A pod creator forges a pod of the loader's own dump Job (its owner
// reference and labels) that runs something else and reports a digest,
// while the Job's own pod reports none: the loader believes only a pod
// that runs the Job's template.
func TestForgedDumpPodNotBelieved(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(s *corev1.PodSpec)
	}{
		{"LD_PRELOAD", func(s *corev1.PodSpec) {
			s.Containers[0].Env = append(s.Containers[0].Env, corev1.EnvVar{Name: "LD_PRELOAD", Value: "/tmp/evil.so"})
		}},
		{"service account", func(s *corev1.PodSpec) { s.ServiceAccountName = "default" }},
		{"volume over the entrypoint", func(s *corev1.PodSpec) {
			s.Volumes = append(s.Volumes, corev1.Volume{Name: "bin", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
			s.Containers[0].VolumeMounts = append(s.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "bin", MountPath: "/usr/local/bin"})
		}},
		{"token volume of another shape", func(s *corev1.PodSpec) {
			for i, v := range s.Volumes {
				if v.Projected != nil {
					s.Volumes[i].Projected.Sources[1].ConfigMap.Name = "evil-ca"
				}
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, _ := signingSetup(t)
			ctx := t.Context()
			req := f.request("v1.1.0")
			name := f.start(t, req)
			job, _ := f.job(t, name)
			res := f.publish(t, loader.JobConfig(job))
			var real corev1.Pod
			testenv.WaitFor(ctx, t, "the pod of "+name, func(ctx context.Context) (bool, string, error) {
				pods, err := f.env.Kube.CoreV1().Pods(f.ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + name})
				if err != nil || len(pods.Items) == 0 || pods.Items[0].Spec.NodeName == "" {
					return false, "no scheduled pod yet", err
				}
				real = pods.Items[0]
				return true, "", nil
			})
			f.env.FinishDumpJob(ctx, t, f.ns, name, "")
			waitJobComplete(t, f, name)
			forged := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
				Name: name + "-forged", Namespace: f.ns, Labels: real.Labels, OwnerReferences: real.OwnerReferences,
				Annotations: map[string]string{testenv.TerminationMessageAnnotation: res.Digest},
			}, Spec: *real.Spec.DeepCopy()}
			tt.change(&forged.Spec)
			if _, err := f.env.Kube.CoreV1().Pods(f.ns).Create(ctx, forged, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			testenv.WaitFor(ctx, t, "the forged pod to succeed", func(ctx context.Context) (bool, string, error) {
				p, err := f.env.Kube.CoreV1().Pods(f.ns).Get(ctx, forged.Name, metav1.GetOptions{})
				if err != nil {
					return false, "", err
				}
				return p.Status.Phase == corev1.PodSucceeded, string(p.Status.Phase), nil
			})
			_, err := f.loadUntil(t, req)
			var jerr *loader.JobError
			if !errors.As(err, &jerr) || jerr.Reason != loader.ReasonNoResult {
				t.Fatalf("load with a forged pod: %v; want NoResult", err)
			}
			f.notTrusted(t, res.Identity)
		})
	}
}

// After a restart the loader no longer knows the Job it created; it
// believes it because its whole spec is the one it generates (as the API
// server defaults it), and adopts what its pod reports. A Job of its own
// changed since (suspended, then its template's placement changed) is
// not believed, and deleted.
func TestDumpJobFromBeforeRestartBelieved(t *testing.T) {
	f, ring := signingSetup(t)
	ctx := t.Context()
	req := f.request("v1.1.0")
	name := f.start(t, req)
	job, _ := f.job(t, name)
	res := f.publish(t, loader.JobConfig(job))
	f.env.FinishDumpJob(ctx, t, f.ns, name, res.Digest)

	restarted, err := loader.New(loader.Options{Store: f.store, Kube: f.env.Kube, Clock: f.clock, PodLabels: testenv.BehaviourLabels(testenv.BehaviourAwaitResult)})
	if err != nil {
		t.Fatal(err)
	}
	f.loader = restarted
	if _, err := f.loadUntil(t, req); err != nil {
		t.Fatalf("load after a restart: %v", err)
	}
	e, err := f.store.Find(ctx, f.ns, res.Identity)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ring.Verify(e.Digest, e.Signature, e.SignatureKey); err != nil {
		t.Errorf("adopted strategy not signed: %v", err)
	}

	// The loader's own Job, suspended and its template's tolerations
	// changed (what a suspended Job allows).
	req = f.request("v1.2.0")
	name = f.start(t, req)
	// The Job controller writes the Job's status meanwhile: each change is
	// made on the latest version (a conflict is retried, not a failure).
	jobs := f.env.Kube.BatchV1().Jobs(f.ns)
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		job, _ := f.job(t, name)
		job.Spec.Suspend = ptr.To(true)
		_, err := jobs.Update(ctx, job, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// The API server lets a Job's placement change only once the Job
	// controller has seen the suspension and cleared status.startTime.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		job, err := jobs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		suspended := false
		for _, c := range job.Status.Conditions {
			suspended = suspended || c.Type == batchv1.JobSuspended && c.Status == corev1.ConditionTrue
		}
		return suspended && job.Status.StartTime == nil, nil
	}); err != nil {
		t.Fatalf("the Job controller never cleared the suspended Job's startTime: %v", err)
	}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		job, _ := f.job(t, name)
		job.Spec.Template.Spec.Tolerations = append(job.Spec.Template.Spec.Tolerations, corev1.Toleration{Key: "evil", Operator: corev1.TolerationOpExists})
		_, err := jobs.Update(ctx, job, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	_, err = f.loader.Load(ctx, req)
	var jerr *loader.JobError
	if !errors.As(err, &jerr) || jerr.Reason != loader.ReasonUntrusted {
		t.Fatalf("load with the loader's own job changed: %v; want Untrusted", err)
	}
	f.waitJobGone(t, name)
}
