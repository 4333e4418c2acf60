package loader

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// believe decides whether a Job found under a dump Job's name may be
// believed: its whole spec (Job and pod template, labels and annotations
// of the template included) must be the one the loader generates for the
// request, as the API server defaults it. The loader's own Job is compared
// with what the API server returned when the loader created it; any other
// (one a namespace admin created first under the predictable name, or the
// loader's own from before a restart) with the generated Job defaulted by
// a dry-run create. So a Job with another volume, mount, environment,
// command, working directory or service account is never believed, and
// neither is what its pod reports.
func (l *Loader) believe(ctx context.Context, req Request, id strategy.Identity, job *batchv1.Job, st *attempts) error {
	gen, err := l.Job(req, id)
	if err != nil {
		return err
	}
	key, err := json.Marshal(gen.Spec)
	if err != nil {
		return fmt.Errorf("job %s/%s: %w", job.Namespace, job.Name, err)
	}
	l.mu.Lock()
	var want *batchv1.Job
	switch {
	case st.created != "" && st.created == job.UID:
		want = st.createdJob
	case st.expected != nil && st.expectedKey == string(key):
		want = st.expected
	}
	l.mu.Unlock()
	if want == nil {
		gen.GenerateName, gen.Name = gen.Name+"-", ""
		want, err = l.opts.Kube.BatchV1().Jobs(job.Namespace).Create(ctx, gen, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return fmt.Errorf("job %s/%s: default the loader's dump job (dry run): %w", job.Namespace, job.Name, err)
		}
		l.mu.Lock()
		st.expected, st.expectedKey = want, string(key)
		l.mu.Unlock()
	}
	if what := jobDiff(want, job); what != "" {
		return fmt.Errorf("job %s/%s is not the loader's dump job: its %s differs from the one the loader generates", job.Namespace, job.Name, what)
	}
	return nil
}

// jobControllerLabels are the labels the API server adds to a Job's
// template (and selector), naming the Job and its UID.
var jobControllerLabels = []string{batchv1.ControllerUidLabel, "controller-uid", batchv1.JobNameLabel, "job-name"}

// jobDiff names the first part in which two Jobs differ, beyond what
// differs between two Jobs created from one object (name, UID, the
// selector and template labels naming them) and suspend (which does not
// change what runs), or "" when they are the same.
func jobDiff(want, got *batchv1.Job) string {
	w, g := comparableSpec(want), comparableSpec(got)
	switch {
	case !equality.Semantic.DeepEqual(w.Template.Spec, g.Template.Spec):
		return "pod spec"
	case !equality.Semantic.DeepEqual(w.Template.Labels, g.Template.Labels):
		return "pod labels"
	case !equality.Semantic.DeepEqual(w.Template.Annotations, g.Template.Annotations):
		return "pod annotations"
	case !equality.Semantic.DeepEqual(w, g):
		return "job spec"
	}
	return ""
}

func comparableSpec(j *batchv1.Job) *batchv1.JobSpec {
	s := j.Spec.DeepCopy()
	s.Selector, s.Suspend = nil, nil
	s.Template.ObjectMeta = metav1.ObjectMeta{Labels: s.Template.Labels, Annotations: s.Template.Annotations}
	for _, k := range jobControllerLabels {
		delete(s.Template.Labels, k)
	}
	if len(s.Template.Labels) == 0 {
		s.Template.Labels = nil
	}
	if len(s.Template.Annotations) == 0 {
		s.Template.Annotations = nil
	}
	return s
}

// serviceAccountMount is where the ServiceAccount admission plugin mounts
// a pod's token volume.
const serviceAccountMount = "/var/run/secrets/kubernetes.io/serviceaccount"

// podFromTemplate reports whether a pod runs exactly what a Job's template
// says: its spec is the template's except for what the control plane adds
// to every pod (the node the scheduler chose; the ServiceAccount
// admission's token volume and its mounts, of their fixed shape; the
// DefaultTolerationSeconds tolerations; the Priority admission's priority
// and preemption policy; service links; the LimitRanger's resources).
// None of these changes what the container runs or with which
// credentials beyond the template's service account.
func podFromTemplate(pod, tmpl *corev1.PodSpec) bool {
	p := pod.DeepCopy()
	p.NodeName = ""
	if tmpl.Priority == nil {
		p.Priority = nil
	}
	if tmpl.PreemptionPolicy == nil {
		p.PreemptionPolicy = nil
	}
	if tmpl.EnableServiceLinks == nil && p.EnableServiceLinks != nil && *p.EnableServiceLinks {
		p.EnableServiceLinks = nil
	}
	p.Tolerations = slices.DeleteFunc(p.Tolerations, func(t corev1.Toleration) bool {
		return !slices.ContainsFunc(tmpl.Tolerations, func(u corev1.Toleration) bool { return equality.Semantic.DeepEqual(t, u) }) && defaultToleration(t)
	})
	if len(p.Tolerations) == 0 && tmpl.Tolerations != nil {
		p.Tolerations = []corev1.Toleration{}
	}
	var token string
	p.Volumes = slices.DeleteFunc(p.Volumes, func(v corev1.Volume) bool {
		if tokenVolume(v) && token == "" && !slices.ContainsFunc(tmpl.Volumes, func(u corev1.Volume) bool { return u.Name == v.Name }) {
			token = v.Name
			return true
		}
		return false
	})
	if len(p.Volumes) == 0 {
		p.Volumes = tmpl.Volumes
	}
	if len(p.Containers) != len(tmpl.Containers) {
		return false
	}
	for i := range p.Containers {
		c := &p.Containers[i]
		if token != "" {
			c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
				return m.Name == token && m.MountPath == serviceAccountMount && m.ReadOnly && m.SubPath == "" && m.SubPathExpr == "" && m.MountPropagation == nil
			})
			if len(c.VolumeMounts) == 0 {
				c.VolumeMounts = tmpl.Containers[i].VolumeMounts
			}
		}
		c.Resources = tmpl.Containers[i].Resources
	}
	return equality.Semantic.DeepEqual(*p, *tmpl)
}

// defaultToleration is a toleration the DefaultTolerationSeconds admission
// plugin adds.
func defaultToleration(t corev1.Toleration) bool {
	return (t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable) &&
		t.Operator == corev1.TolerationOpExists && t.Effect == corev1.TaintEffectNoExecute && t.TolerationSeconds != nil
}

// tokenVolume is the projected volume the ServiceAccount admission plugin
// adds ("kube-api-access-…": the token, the cluster's CA, the namespace)
// and nothing else.
func tokenVolume(v corev1.Volume) bool {
	pr := v.Projected
	if !strings.HasPrefix(v.Name, "kube-api-access-") || pr == nil || len(pr.Sources) != 3 {
		return false
	}
	sat, ca, ns := pr.Sources[0].ServiceAccountToken, pr.Sources[1].ConfigMap, pr.Sources[2].DownwardAPI
	return sat != nil && sat.Path == "token" && sat.Audience == "" &&
		ca != nil && ca.Name == "kube-root-ca.crt" && len(ca.Items) == 1 && ca.Items[0].Key == "ca.crt" && ca.Items[0].Path == "ca.crt" &&
		ns != nil && len(ns.Items) == 1 && ns.Items[0].Path == "namespace" && ns.Items[0].FieldRef != nil && ns.Items[0].FieldRef.FieldPath == "metadata.namespace"
}
