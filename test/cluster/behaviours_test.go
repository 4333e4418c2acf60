package cluster_test

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/installstrategy/installstrategy/internal/testenv"
)

func behaviourPod(name string, b testenv.Behaviour, restart corev1.RestartPolicy) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: testenv.BehaviourLabels(b)},
		Spec: corev1.PodSpec{
			RestartPolicy: restart,
			Containers: []corev1.Container{
				{Name: "main", Image: "example.test/main:v1"},
				{Name: "sidecar", Image: "example.test/sidecar:v1"},
			},
		},
	}
}

// restarts is the restart count of a pod's first container.
func restarts(p *corev1.Pod) int32 {
	if len(p.Status.ContainerStatuses) == 0 {
		return 0
	}
	return p.Status.ContainerStatuses[0].RestartCount
}

func TestBehaviourFailEndsInPhaseFailed(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := testenv.New(t)
	ns := env.Namespace(ctx, t)

	if _, err := env.Kube.CoreV1().Pods(ns).Create(ctx, behaviourPod("fails", testenv.BehaviourFail, corev1.RestartPolicyNever), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	p := env.WaitPod(ctx, t, ns, "fails", "in phase Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if len(p.Status.ContainerStatuses) != 2 {
		t.Fatalf("failed pod has %d container statuses, want 2: %s", len(p.Status.ContainerStatuses), testenv.DescribePod(p))
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Terminated == nil || cs.State.Terminated.ExitCode == 0 {
			t.Errorf("container %s of the failed pod did not terminate with a non-zero exit code: %s", cs.Name, testenv.DescribePod(p))
		}
	}
	if testenv.PodReady(p) {
		t.Errorf("failed pod is Ready: %s", testenv.DescribePod(p))
	}
}

func TestBehaviourFailMakesJobFail(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := testenv.New(t)
	ns := env.Namespace(ctx, t)

	pod := behaviourPod("", testenv.BehaviourFail, corev1.RestartPolicyNever)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "dump"},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template:     corev1.PodTemplateSpec{ObjectMeta: pod.ObjectMeta, Spec: pod.Spec},
		},
	}
	if _, err := env.Kube.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create job: %v", err)
	}
	j := env.WaitJobFinished(ctx, t, ns, "dump")
	if cond, state := testenv.JobFinished(j); cond != batchv1.JobFailed {
		t.Fatalf("job with failing pods: %s, want Failed", state)
	}
	if j.Status.Failed != 1 || j.Status.Succeeded != 0 {
		t.Fatalf("job with backoffLimit 0: failed %d succeeded %d, want 1 and 0", j.Status.Failed, j.Status.Succeeded)
	}
}

func TestBehaviourCrashLoopRestarts(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := testenv.New(t)
	ns := env.Namespace(ctx, t)

	if _, err := env.Kube.CoreV1().Pods(ns).Create(ctx, behaviourPod("crashes", testenv.BehaviourCrashLoop, corev1.RestartPolicyAlways), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	p := env.WaitPod(ctx, t, ns, "crashes", "restarted", func(p *corev1.Pod) bool { return restarts(p) > 0 })
	first := restarts(p)
	p = env.WaitPod(ctx, t, ns, "crashes", "restarted again", func(p *corev1.Pod) bool { return restarts(p) > first })
	if p.Status.Phase != corev1.PodRunning || testenv.PodReady(p) {
		t.Fatalf("crash-looping pod: %s, want phase Running and not Ready", testenv.DescribePod(p))
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff" || cs.LastTerminationState.Terminated == nil || cs.RestartCount == 0 {
			t.Errorf("container %s is not crash-looping: %s", cs.Name, testenv.DescribePod(p))
		}
	}
}

func TestBehaviourNeverReadyStaysRunningNotReady(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := testenv.New(t)
	ns := env.Namespace(ctx, t)

	if _, err := env.Kube.CoreV1().Pods(ns).Create(ctx, behaviourPod("stuck", testenv.BehaviourNeverReady, corev1.RestartPolicyAlways), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	// A control pod created after it becomes ready: kwok has had time to act.
	if _, err := env.Kube.CoreV1().Pods(ns).Create(ctx, behaviourPod("control", "", corev1.RestartPolicyAlways), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	p := env.WaitPod(ctx, t, ns, "stuck", "running", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) == 2
	})
	env.WaitPod(ctx, t, ns, "control", "ready", testenv.PodReady)
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running == nil || cs.Ready {
			t.Errorf("container %s: want running and not ready: %s", cs.Name, testenv.DescribePod(p))
		}
	}
	testenv.Never(ctx, t, 3*time.Second, "never-ready pod becoming ready or leaving Running", func(ctx context.Context) (bool, string, error) {
		p, err := env.Kube.CoreV1().Pods(ns).Get(ctx, "stuck", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return testenv.PodReady(p) || p.Status.Phase != corev1.PodRunning, testenv.DescribePod(p), nil
	})
}

// A flapping pod alternates: Running and Ready with the last exit 1 in
// lastState, then not Ready in CrashLoopBackOff with one more restart.
func TestBehaviourFlappingIsReadyBetweenCrashes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := testenv.New(t)
	ns := env.Namespace(ctx, t)

	if _, err := env.Kube.CoreV1().Pods(ns).Create(ctx, behaviourPod("flaps", testenv.BehaviourFlapping, corev1.RestartPolicyAlways), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	p := env.WaitPod(ctx, t, ns, "flaps", "ready at its first start", testenv.PodReady)
	if restarts(p) != 0 {
		t.Errorf("first start: %s, want no restart", testenv.DescribePod(p))
	}
	p = env.WaitPod(ctx, t, ns, "flaps", "crashed", func(p *corev1.Pod) bool { return restarts(p) > 0 })
	if p.Status.Phase != corev1.PodRunning || testenv.PodReady(p) {
		t.Errorf("crashed: %s, want Running and not Ready", testenv.DescribePod(p))
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff" {
			t.Errorf("container %s is not waiting in CrashLoopBackOff: %s", cs.Name, testenv.DescribePod(p))
		}
	}
	crashed := restarts(p)
	p = env.WaitPod(ctx, t, ns, "flaps", "ready again", testenv.PodReady)
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running == nil || !cs.Ready || cs.RestartCount != crashed ||
			cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 1 {
			t.Errorf("container %s after its restart: want running, ready, %d restarts and the exit 1 in lastState: %s", cs.Name, crashed, testenv.DescribePod(p))
		}
	}
	env.WaitPod(ctx, t, ns, "flaps", "crashed again", func(p *corev1.Pod) bool { return restarts(p) > crashed })
}
