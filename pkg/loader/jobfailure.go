package loader

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"
)

// logTimeout bounds the fetch of a failed pod's logs: a node without a
// kubelet (kwok) may never answer.
const logTimeout = 5 * time.Second

// jobsOwn reports whether a pod is one the loader believes of a Job: its
// controller is the Job and it runs the Job's template (podFromTemplate).
// Whoever may create pods in the namespace can give one the Job's labels
// and controller reference; what it reports (its phase, reason,
// termination message, logs) is theirs unless it runs the template.
func jobsOwn(p *corev1.Pod, job *batchv1.Job) bool {
	return ownedBy(p, job) && podFromTemplate(&p.Spec, &job.Spec.Template.Spec)
}

// failedJob describes a failed Job from its condition and its newest
// failed pod (of those that run its template, jobsOwn), with the pod's
// last log lines when the node serves them.
func (l *Loader) failedJob(ctx context.Context, job *batchv1.Job) *JobError {
	jerr := &JobError{Reason: ReasonFailed}
	var parts []string
	if c := jobCondition(job, batchv1.JobFailed); c != nil {
		parts = append(parts, fmt.Sprintf("job failed: %s: %s", c.Reason, c.Message))
	}
	pods, err := l.pods(ctx, job)
	if err != nil {
		parts = append(parts, err.Error())
	}
	for _, p := range pods {
		if p.Status.Phase != corev1.PodFailed || !jobsOwn(&p, job) {
			continue
		}
		jerr.Pod = p.Name
		parts = append(parts, "pod "+p.Name+": "+describeFailedPod(&p))
		jerr.Logs = l.logs(ctx, &p)
		break
	}
	if len(parts) == 0 {
		parts = append(parts, "job failed")
	}
	jerr.Message = strings.Join(parts, "; ")
	return jerr
}

// describeFailedPod says why a pod failed: its own reason, and how each
// container terminated.
func describeFailedPod(p *corev1.Pod) string {
	var parts []string
	if p.Status.Reason != "" || p.Status.Message != "" {
		parts = append(parts, strings.TrimSpace(p.Status.Reason+" "+p.Status.Message))
	}
	for _, cs := range p.Status.ContainerStatuses {
		t := cs.State.Terminated
		if t == nil {
			t = cs.LastTerminationState.Terminated
		}
		if t == nil {
			continue
		}
		s := fmt.Sprintf("container %s terminated: %s, exit code %d", cs.Name, t.Reason, t.ExitCode)
		if t.Message != "" {
			s += ": " + strings.TrimSpace(t.Message)
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "failed, no reason recorded"
	}
	return strings.Join(parts, "; ")
}

// logs returns the last log lines of a pod's container, or nil when they
// are not available (no kubelet, log rotated, no permission).
func (l *Loader) logs(ctx context.Context, p *corev1.Pod) []string {
	if l.opts.LogLines < 0 || len(p.Spec.Containers) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, logTimeout)
	defer cancel()
	raw, err := l.opts.Kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{
		Container: p.Spec.Containers[0].Name,
		TailLines: ptr.To(l.opts.LogLines),
	}).DoRaw(ctx)
	if err != nil {
		return nil
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			lines = append(lines, line)
		}
	}
	return lines
}

// notStarted checks a Job that has run past the start timeout: started
// reports whether a pod of it runs (or ran); if not, the error says why
// the pod did not start.
func (l *Loader) notStarted(ctx context.Context, job *batchv1.Job) (*JobError, bool, error) {
	pods, err := l.pods(ctx, job)
	if err != nil {
		return nil, false, err
	}
	jerr := &JobError{Reason: ReasonNotStarted}
	if len(pods) == 0 {
		jerr.Message = fmt.Sprintf("no pod was created within %s", l.opts.StartTimeout)
		if ev := l.lastWarning(ctx, job); ev != "" {
			jerr.Message += ": " + ev
		}
		return jerr, false, nil
	}
	p := &pods[0]
	if p.Status.Phase != corev1.PodPending {
		return nil, true, nil
	}
	jerr.Pod = p.Name
	reason := "pending"
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			reason = fmt.Sprintf("unschedulable: %s: %s", c.Reason, c.Message)
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			reason = fmt.Sprintf("container %s waiting: %s: %s", cs.Name, w.Reason, w.Message)
		}
	}
	jerr.Message = fmt.Sprintf("pod %s did not start within %s: %s", p.Name, l.opts.StartTimeout, reason)
	return jerr, false, nil
}

// lastWarning returns the message of the newest Warning event of a Job
// (e.g. FailedCreate), or "".
func (l *Loader) lastWarning(ctx context.Context, job *batchv1.Job) string {
	list, err := l.opts.Kube.CoreV1().Events(job.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.SelectorFromSet(fields.Set{"involvedObject.uid": string(job.UID), "type": corev1.EventTypeWarning}).String(),
	})
	if err != nil || len(list.Items) == 0 {
		return ""
	}
	ev := slices.MaxFunc(list.Items, func(a, b corev1.Event) int { return a.LastTimestamp.Compare(b.LastTimestamp.Time) })
	return ev.Reason + ": " + ev.Message
}
