package loader

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// dump starts or watches the dump Job of an identity.
func (l *Loader) dump(ctx context.Context, req Request, id strategy.Identity) (*Result, error) {
	ns, name := req.Config.Namespace, jobName(id.Identifier)
	now := l.opts.Clock.Now()
	l.mu.Lock()
	st := l.state[id.Identifier]
	if st == nil {
		st = &attempts{}
		l.state[id.Identifier] = st
	}
	if st.lastErr != nil && now.Before(st.retryAt) {
		err := *st.lastErr
		l.mu.Unlock()
		return nil, &err
	}
	l.mu.Unlock()

	jobs := l.opts.Kube.BatchV1().Jobs(ns)
	job, err := jobs.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return l.startJob(ctx, req, id, st)
	case err != nil:
		return nil, fmt.Errorf("dump strategy %s: get job %s/%s: %w", id.Identifier, ns, name, err)
	}
	if got := job.Annotations[metakeys.IdentifierAnnotation]; got != id.Identifier {
		return nil, fmt.Errorf("dump strategy %s: job %s/%s belongs to identifier %q", id.Identifier, ns, name, got)
	}
	if err := l.believe(ctx, req, id, job, st); err != nil {
		l.mu.Lock()
		ours := st.created == job.UID
		l.mu.Unlock()
		if ours {
			// Ours, changed since (a suspended Job's template is
			// partly mutable): delete it and start again.
			return nil, l.fail(ctx, id, job, &JobError{Reason: ReasonUntrusted, Message: err.Error()})
		}
		// Not ours (or ours from before a restart, changed): never
		// believed, and not deleted either (it is not ours to delete).
		return nil, fmt.Errorf("dump strategy %s: %w", id.Identifier, err)
	}
	l.mu.Lock()
	if st.job != job.UID {
		st.job, st.firstSeen = job.UID, now
	}
	firstSeen := st.firstSeen
	l.mu.Unlock()

	pending := &Result{Job: ns + "/" + name, RequeueAfter: l.opts.PollInterval}
	switch finished(job) {
	case batchv1.JobComplete:
		// The strategy may have been published after Load looked.
		loaded, err := l.opts.Store.Load(ctx, ns, id)
		if err == nil {
			return l.found(ctx, req, id, loaded)
		}
		if l.opts.Store.CanSign() {
			if loaded, err = l.adopt(ctx, job, id); err == nil {
				return l.found(ctx, req, id, loaded)
			}
		}
		return nil, l.fail(ctx, id, job, &JobError{Reason: ReasonNoResult,
			Message: fmt.Sprintf("the job succeeded but no strategy for identifier %s was stored in %s (%v)", id.Identifier, ns, err)})
	case batchv1.JobFailed:
		return nil, l.fail(ctx, id, job, l.failedJob(ctx, job))
	}
	if now.Sub(firstSeen) < l.opts.StartTimeout {
		return pending, nil
	}
	jerr, started, err := l.notStarted(ctx, job)
	if err != nil {
		return nil, err
	}
	if started {
		return pending, nil
	}
	return nil, l.fail(ctx, id, job, jerr)
}

// adopt accepts the strategy a completed dump Job wrote, and only that: the
// Job's pod reports the digest of what it wrote in its termination message
// (pod status, which only the kubelet writes, not a ConfigMap editor), and
// the stored strategy for the identifier with that digest is verified and
// signed with the store's key, so later reads trust it. The Job and the
// pod must run the dump the loader would start (image, arguments), so a
// Job or pod put in its place with another image reports nothing. A
// foreign image's pod reports no digest: with Options.Foreign, what it
// wrote is bound to the Job's run instead (adoptForeign).
func (l *Loader) adopt(ctx context.Context, job *batchv1.Job, id strategy.Identity) (*store.Loaded, error) {
	pod, term, err := l.succeededPod(ctx, job)
	if err != nil {
		return nil, err
	}
	digest := strings.TrimSpace(term.Message)
	if !strings.HasPrefix(digest, "sha256:") {
		if l.opts.Foreign {
			return l.adoptForeign(ctx, job, pod, term, id)
		}
		return nil, fmt.Errorf("the succeeded pod %s of job %s/%s did not report the digest of its strategy in its termination message", pod.Name, job.Namespace, job.Name)
	}
	entries, err := l.opts.Store.List(ctx, job.Namespace)
	if err != nil {
		return nil, fmt.Errorf("adopt the result of job %s/%s: %w", job.Namespace, job.Name, err)
	}
	for _, e := range entries {
		if !e.Matches(id) || e.Digest != digest {
			continue
		}
		if _, err := l.opts.Store.Sign(ctx, e, store.SignOptions{}); err != nil {
			return nil, fmt.Errorf("adopt the result of job %s/%s: %w", job.Namespace, job.Name, err)
		}
		return l.opts.Store.Load(ctx, job.Namespace, id)
	}
	return nil, fmt.Errorf("job %s/%s reported digest %s, but no strategy for identifier %s with that digest is stored", job.Namespace, job.Name, digest, id.Identifier)
}

// succeededPod is the newest succeeded pod of a believed Job (see believe)
// and its container's termination (exit code 0). Its pods are believed
// only when their spec is the Job's template plus what admission and the
// scheduler add (podFromTemplate): whoever may create pods in the
// namespace can forge the owner reference and the Job's labels, not what
// the pod runs.
func (l *Loader) succeededPod(ctx context.Context, job *batchv1.Job) (*corev1.Pod, *corev1.ContainerStateTerminated, error) {
	pods, err := l.pods(ctx, job)
	if err != nil {
		return nil, nil, err
	}
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase != corev1.PodSucceeded || !ownedBy(p, job) || !podFromTemplate(&p.Spec, &job.Spec.Template.Spec) {
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil && t.ExitCode == 0 {
				return p, t, nil
			}
		}
	}
	return nil, nil, fmt.Errorf("job %s/%s has no succeeded pod that runs its template", job.Namespace, job.Name)
}

// adoptForeign accepts what a foreign dump image wrote: KubeVirt's
// virt-operator --dump-install-strategy creates one KubeVirt-form
// ConfigMap (generated name, no digest) and reports nothing. Nothing in
// the cluster records who created a ConfigMap, so the loader binds it to
// the believed Job's run, strictly:
//
//   - of the namespace's unsigned strategies for the identifier stored
//     since the Job was created, there is exactly one (a second one, from
//     whoever, refuses both);
//   - it is in KubeVirt's form, claims the Job's identity (identifier,
//     version, registry) and was created while the Job's believed pod
//     existed: not before the pod was created, not after its container
//     finished (server and kubelet timestamps, 1 s resolution);
//   - the ConfigMap as read (same UID) was never written after that
//     container finished: every managed-fields entry's time, which the
//     API server sets to now for whoever changes the object, is within
//     the run.
//
// The loader then computes the digest of the text of exactly what it
// checked and stores that text itself, signed with the store's key (the
// native form: a KubeVirt-form ConfigMap has no place for the digest the
// signature covers). What a ConfigMap writer of the namespace does after
// the container finished is never adopted; what they write while it runs
// is refused as a second candidate unless they replace or edit the dump's
// own ConfigMap within those seconds (docs/adr/2026-12-06-foreign-dump-binding.md).
func (l *Loader) adoptForeign(ctx context.Context, job *batchv1.Job, pod *corev1.Pod, term *corev1.ContainerStateTerminated, id strategy.Identity) (*store.Loaded, error) {
	where := fmt.Sprintf("adopt the result of foreign dump job %s/%s (pod %s)", job.Namespace, job.Name, pod.Name)
	entries, err := l.opts.Store.List(ctx, job.Namespace)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	since := job.CreationTimestamp.Time
	var cands []store.Entry
	for _, e := range entries {
		if e.Matches(id) && e.Signature == "" && !e.Created.Before(since) {
			cands = append(cands, e)
		}
	}
	switch {
	case len(cands) == 0:
		return nil, fmt.Errorf("%s: no unsigned strategy for identifier %s was stored since the job was created", where, id.Identifier)
	case len(cands) > 1:
		names := make([]string, len(cands))
		for i, e := range cands {
			names[i] = e.Name
		}
		return nil, fmt.Errorf("%s: %d unsigned strategies for identifier %s were stored since the job was created (%s): which one the job wrote is unknown, none is adopted", where, len(cands), id.Identifier, strings.Join(names, ", "))
	}
	e := cands[0]
	cm, err := l.opts.Kube.CoreV1().ConfigMaps(e.Namespace).Get(ctx, e.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if err := writtenDuring(cm, e, id, pod.CreationTimestamp.Time, term.FinishedAt.Time); err != nil {
		return nil, fmt.Errorf("%s: configmap %s: %w", where, e.Name, err)
	}
	text, _, err := codec.Decode(cm, codec.DecodeOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if _, err := l.opts.Store.PublishText(ctx, job.Namespace, text, id); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return l.opts.Store.Load(ctx, job.Namespace, id)
}

// writtenDuring checks that a ConfigMap, read now, is the listed entry in
// KubeVirt's form for id, created no earlier than from and no later than
// to, and not written since to (see adoptForeign).
func writtenDuring(cm *corev1.ConfigMap, e store.Entry, id strategy.Identity, from, to time.Time) error {
	info := codec.DescribeConfigMap(cm)
	created := cm.CreationTimestamp.Time
	from, to = from.Truncate(time.Second), to.Truncate(time.Second)
	switch {
	case cm.UID != e.UID:
		return fmt.Errorf("replaced since it was listed (uid %s, listed %s)", cm.UID, e.UID)
	case cm.DeletionTimestamp != nil:
		return errors.New("being deleted")
	case info.Format != codec.FormatKubeVirt:
		return fmt.Errorf("in the %s form, not KubeVirt's (a foreign dump writes KubeVirt's form)", info.Format)
	case info.Identity != id:
		return fmt.Errorf("claims %+v, the job dumps %+v", info.Identity, id)
	case info.Signature != "":
		return errors.New("signed since it was listed")
	case created.Before(from) || created.After(to):
		return fmt.Errorf("created at %s, outside the run of the job's pod (%s to %s)", created.UTC().Format(time.RFC3339), from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))
	case len(cm.ManagedFields) == 0:
		return errors.New("has no managed fields: when it was last written is unknown")
	}
	for _, m := range cm.ManagedFields {
		if m.Time == nil || m.Time.After(to) {
			return fmt.Errorf("written by %q at %v, after the job's pod finished at %s", m.Manager, m.Time, to.UTC().Format(time.RFC3339))
		}
	}
	return nil
}

func ownedBy(p *corev1.Pod, job *batchv1.Job) bool {
	for _, ref := range p.OwnerReferences {
		if ref.UID == job.UID && ref.Controller != nil && *ref.Controller {
			return true
		}
	}
	return false
}

// fail records a failure, deletes the Job and returns the error.
func (l *Loader) fail(ctx context.Context, id strategy.Identity, job *batchv1.Job, jerr *JobError) error {
	if err := l.deleteJob(ctx, job.Namespace, job.Name); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.state[id.Identifier]
	if st == nil {
		st = &attempts{}
		l.state[id.Identifier] = st
	}
	st.failures++
	jerr.Job = job.Namespace + "/" + job.Name
	jerr.Identifier = id.Identifier
	jerr.Attempt = st.failures
	jerr.RetryAt = l.opts.Clock.Now().Add(backoff(st.failures, l.opts.InitialBackoff, l.opts.MaxBackoff))
	st.retryAt, st.lastErr, st.job = jerr.RetryAt, jerr, ""
	out := *jerr
	return &out
}

// backoff is the wait after the n-th consecutive failure: initial,
// doubled per further failure, at most max.
func backoff(n int, initial, max time.Duration) time.Duration {
	d := initial
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}

func finished(job *batchv1.Job) batchv1.JobConditionType {
	for _, c := range job.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
			return c.Type
		}
	}
	return ""
}

func jobCondition(job *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i, c := range job.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return &job.Status.Conditions[i]
		}
	}
	return nil
}

// pods returns the pods of a Job, newest first.
func (l *Loader) pods(ctx context.Context, job *batchv1.Job) ([]corev1.Pod, error) {
	list, err := l.opts.Kube.CoreV1().Pods(job.Namespace).List(ctx, metav1.ListOptions{LabelSelector: batchv1.ControllerUidLabel + "=" + string(job.UID)})
	if err != nil {
		return nil, fmt.Errorf("list pods of job %s/%s: %w", job.Namespace, job.Name, err)
	}
	pods := list.Items
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return b.CreationTimestamp.Compare(a.CreationTimestamp.Time) })
	return pods, nil
}

// deleteJob deletes a Job and its pods; a Job already gone is no error.
func (l *Loader) deleteJob(ctx context.Context, ns, name string) error {
	err := l.opts.Kube.BatchV1().Jobs(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete dump job %s/%s: %w", ns, name, err)
	}
	return nil
}

// startJob creates the dump Job (and its service account and RBAC).
func (l *Loader) startJob(ctx context.Context, req Request, id strategy.Identity, st *attempts) (*Result, error) {
	ns := req.Config.Namespace
	if err := l.ensureRBAC(ctx, ns); err != nil {
		return nil, err
	}
	job, err := l.Job(req, id)
	if err != nil {
		return nil, err
	}
	created, err := l.opts.Kube.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		// Another Load started it a moment ago.
	case err != nil:
		return nil, fmt.Errorf("dump strategy %s: create job %s/%s: %w", id.Identifier, ns, job.Name, err)
	default:
		l.mu.Lock()
		st.job, st.firstSeen = created.UID, l.opts.Clock.Now()
		st.created, st.createdJob = created.UID, created
		l.mu.Unlock()
	}
	return &Result{Job: ns + "/" + job.Name, RequeueAfter: l.opts.PollInterval}, nil
}
