package testenv

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"
)

// DeploymentRolledOut reports whether d has fully rolled out, as
// `kubectl rollout status` does: the controller has seen the latest spec,
// every replica is updated and available, and no old replica is left. The
// string describes the observed state.
func DeploymentRolledOut(d *appsv1.Deployment) (bool, string) {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	state := fmt.Sprintf("generation %d observed %d; replicas want %d have %d updated %d ready %d available %d unavailable %d",
		d.Generation, s.ObservedGeneration, want, s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas, s.UnavailableReplicas)
	for _, c := range s.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Reason == "ProgressDeadlineExceeded" {
			state += "; progress deadline exceeded: " + c.Message
		}
	}
	done := s.ObservedGeneration >= d.Generation &&
		s.UpdatedReplicas == want && s.Replicas == want && s.AvailableReplicas == want
	return done, state
}

// DaemonSetRolledOut reports whether ds has a ready, up-to-date pod on every
// node it should run on. The string describes the observed state.
func DaemonSetRolledOut(ds *appsv1.DaemonSet) (bool, string) {
	s := ds.Status
	state := fmt.Sprintf("generation %d observed %d; desired %d scheduled %d updated %d ready %d available %d misscheduled %d",
		ds.Generation, s.ObservedGeneration, s.DesiredNumberScheduled, s.CurrentNumberScheduled,
		s.UpdatedNumberScheduled, s.NumberReady, s.NumberAvailable, s.NumberMisscheduled)
	done := s.ObservedGeneration >= ds.Generation && s.DesiredNumberScheduled > 0 &&
		s.UpdatedNumberScheduled == s.DesiredNumberScheduled &&
		s.NumberReady == s.DesiredNumberScheduled && s.NumberAvailable == s.DesiredNumberScheduled
	return done, state
}

// JobFinished returns the condition type (JobComplete or JobFailed) that
// ended j, or "" while it runs, and a description of its state.
func JobFinished(j *batchv1.Job) (batchv1.JobConditionType, string) {
	state := fmt.Sprintf("active %d succeeded %d failed %d", j.Status.Active, j.Status.Succeeded, j.Status.Failed)
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.Type, fmt.Sprintf("%s (%s: %s); %s", c.Type, c.Reason, c.Message, state)
		}
	}
	return "", state
}

// PodReady reports whether p's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// DescribePod is a one-line summary of a pod for failure messages: phase,
// readiness, node, and each container's state and restarts.
func DescribePod(p *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s phase=%s ready=%t node=%q", p.Name, p.Status.Phase, PodReady(p), p.Spec.NodeName)
	if p.DeletionTimestamp != nil {
		b.WriteString(" deleting")
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
			fmt.Fprintf(&b, " unscheduled(%s: %s)", c.Reason, c.Message)
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		state := "unknown"
		switch {
		case cs.State.Running != nil:
			state = "running"
		case cs.State.Waiting != nil:
			state = "waiting:" + cs.State.Waiting.Reason
		case cs.State.Terminated != nil:
			state = fmt.Sprintf("terminated:%s(%d)", cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
		}
		fmt.Fprintf(&b, " [%s %s ready=%t restarts=%d]", cs.Name, state, cs.Ready, cs.RestartCount)
	}
	return b.String()
}

// Edit changes obj the way kubectl edit does: it reads the object, lets f
// change it and sends the difference as a merge patch, without a
// resourceVersion, so a status write of the operator in between is no
// conflict. obj names the object and receives what the server returned.
func Edit[T client.Object](ctx context.Context, t testing.TB, c client.Client, obj T, f func(T)) {
	t.Helper()
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	f(obj)
	if err := c.Patch(ctx, obj, patch); err != nil {
		t.Fatal(err)
	}
}

// WaitDeploymentRolledOut waits until DeploymentRolledOut and returns the
// Deployment.
func (e *Env) WaitDeploymentRolledOut(ctx context.Context, t testing.TB, ns, name string) *appsv1.Deployment {
	t.Helper()
	var d *appsv1.Deployment
	WaitFor(ctx, t, "deployment "+ns+"/"+name+" rolled out", func(ctx context.Context) (bool, string, error) {
		var err error
		d, err = e.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		done, state := DeploymentRolledOut(d)
		return done, state, nil
	})
	return d
}

// WaitDaemonSetRolledOut waits until DaemonSetRolledOut and returns the
// DaemonSet.
func (e *Env) WaitDaemonSetRolledOut(ctx context.Context, t testing.TB, ns, name string) *appsv1.DaemonSet {
	t.Helper()
	var ds *appsv1.DaemonSet
	WaitFor(ctx, t, "daemonset "+ns+"/"+name+" rolled out", func(ctx context.Context) (bool, string, error) {
		var err error
		ds, err = e.Kube.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		done, state := DaemonSetRolledOut(ds)
		return done, state, nil
	})
	return ds
}

// WaitJobFinished waits until the Job is Complete or Failed and returns it;
// check the outcome with JobFinished.
func (e *Env) WaitJobFinished(ctx context.Context, t testing.TB, ns, name string) *batchv1.Job {
	t.Helper()
	var j *batchv1.Job
	WaitFor(ctx, t, "job "+ns+"/"+name+" finished", func(ctx context.Context) (bool, string, error) {
		var err error
		j, err = e.Kube.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		cond, state := JobFinished(j)
		return cond != "", state, nil
	})
	return j
}

// InstallCRDFile creates the CustomResourceDefinition of file (one YAML
// document, parsed strictly), or brings the live one's spec up to date (a
// cluster kept from an older run may have an older CRD, whose schema would
// prune new fields), and waits until it is Established. Tests of several
// packages install the same CRDs this way.
func (e *Env) InstallCRDFile(ctx context.Context, t testing.TB, file string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := sigsyaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	err = e.Client.Create(ctx, crd)
	if apierrors.IsAlreadyExists(err) {
		// Parallel tests install the same file: another may update it
		// between this read and write (a conflict), so read again.
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var live apiextensionsv1.CustomResourceDefinition
			if err := e.Client.Get(ctx, client.ObjectKey{Name: crd.Name}, &live); err != nil {
				return err
			}
			live.Spec = crd.Spec
			return e.Client.Update(ctx, &live)
		})
	}
	if err != nil {
		t.Fatalf("install CRD %s: %v", crd.Name, err)
	}
	return e.WaitCRDEstablished(ctx, t, crd.Name)
}

// WaitCRDEstablished waits until the CustomResourceDefinition is Established
// (its resource is served) and returns it.
func (e *Env) WaitCRDEstablished(ctx context.Context, t testing.TB, name string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	WaitFor(ctx, t, "CRD "+name+" established", func(ctx context.Context) (bool, string, error) {
		if err := e.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return false, "", err
		}
		var conds []string
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, "", nil
			}
			conds = append(conds, fmt.Sprintf("%s=%s (%s)", c.Type, c.Status, c.Message))
		}
		return false, "conditions: " + strings.Join(conds, ", "), nil
	})
	return crd
}

// WaitPod waits until the named pod satisfies cond (described by what) and
// returns it.
func (e *Env) WaitPod(ctx context.Context, t testing.TB, ns, name, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var p *corev1.Pod
	WaitFor(ctx, t, "pod "+ns+"/"+name+" "+what, func(ctx context.Context) (bool, string, error) {
		var err error
		p, err = e.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return cond(p), DescribePod(p), nil
	})
	return p
}

// PodUIDs returns the UIDs of the pods of a namespace that are not being
// deleted, by the name of their owner (ReplicaSet or DaemonSet).
func (e *Env) PodUIDs(ctx context.Context, t testing.TB, ns string) map[string][]string {
	t.Helper()
	list, err := e.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil || len(p.OwnerReferences) == 0 {
			continue
		}
		o := p.OwnerReferences[0].Kind + "/" + p.OwnerReferences[0].Name
		out[o] = append(out[o], string(p.UID))
	}
	for _, v := range out {
		slices.Sort(v)
	}
	return out
}

// EnsureKubeVirtCRD creates KubeVirt's CRD (kubevirt.io/v1 KubeVirt), or
// updates it to this form: any spec and status (the strategies do not
// carry the CRD, virt-operator's own manifest does), with the status
// subresource virt-operator writes through, and waits until it is served.
func (e *Env) EnsureKubeVirtCRD(ctx context.Context, t testing.TB) {
	t.Helper()
	preserve := true
	want := apiextensionsv1.CustomResourceDefinitionSpec{
		Group: "kubevirt.io", Scope: apiextensionsv1.NamespaceScoped,
		Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "kubevirts", Singular: "kubevirt", Kind: "KubeVirt", ListKind: "KubeVirtList", ShortNames: []string{"kv", "kvs"}},
		Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
			Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			Schema:       &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}}}},
	}
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "kubevirts.kubevirt.io"}}
	err := e.Client.Get(ctx, client.ObjectKeyFromObject(crd), crd)
	switch {
	case apierrors.IsNotFound(err):
		crd.Spec = want
		err = e.Client.Create(ctx, crd)
	case err == nil && crd.Spec.Versions[0].Subresources == nil:
		crd.Spec = want
		err = e.Client.Update(ctx, crd)
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	e.WaitCRDEstablished(ctx, t, crd.Name)
}

// WaitDiscoveryComplete waits until discovery answers for every API group
// the cluster lists: an APIService just deleted can still be listed for a
// moment ("stale GroupVersion discovery"), and a namespace deleted then
// stays Terminating while the namespace controller backs off.
func (e *Env) WaitDiscoveryComplete(ctx context.Context, t testing.TB) {
	t.Helper()
	WaitFor(ctx, t, "discovery complete", func(context.Context) (bool, string, error) {
		_, _, err := e.Kube.Discovery().ServerGroupsAndResources()
		if err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
}

// ExpectPodsKept fails t for each owner of before (PodUIDs) whose pods in
// ns were replaced since, except the owners named in except (e.g.
// "DaemonSet/virt-handler").
func (e *Env) ExpectPodsKept(ctx context.Context, t testing.TB, ns string, before map[string][]string, except ...string) {
	t.Helper()
	after := e.PodUIDs(ctx, t, ns)
	for o, uids := range before {
		if slices.Contains(except, o) {
			continue
		}
		if !slices.Equal(after[o], uids) {
			t.Errorf("pods of %s replaced: %v → %v", o, uids, after[o])
		}
	}
}
