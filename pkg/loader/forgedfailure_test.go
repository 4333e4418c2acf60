package loader_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/loader"
)

// A pod creator forges a pod of the loader's dump Job (its labels and its
// controller reference) that runs something else and fails. When the
// Job's own pod fails, the failure the loader reports (the Installation's
// condition and event) is that pod's, never the forged one's: its name,
// reason, termination message and log lines are the forger's to write.
func TestForgedFailedPodNotReported(t *testing.T) {
	f := setup(t, loader.Options{PodLabels: testenv.BehaviourLabels(testenv.BehaviourFail)})
	ctx := t.Context()
	req := f.request("v1.1.0")
	name := f.start(t, req)
	var real corev1.Pod
	testenv.WaitFor(ctx, t, "job "+name+" failed", func(ctx context.Context) (bool, string, error) {
		j, err := f.env.Kube.BatchV1().Jobs(f.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
				pods, err := f.env.Kube.CoreV1().Pods(f.ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + name})
				if err != nil || len(pods.Items) == 0 {
					return false, "no pod", err
				}
				real = pods.Items[0]
				return true, "", nil
			}
		}
		return false, "not failed", nil
	})
	// Once the Job has failed, its controller no longer counts its pods:
	// the forged one stays.
	forged := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: name + "-forged", Namespace: f.ns, Labels: real.Labels, OwnerReferences: real.OwnerReferences,
	}, Spec: *real.Spec.DeepCopy()}
	forged.Spec.NodeName = ""
	forged.Spec.Containers[0].Image = "registry.example/not-the-dump:v1"
	if _, err := f.env.Kube.CoreV1().Pods(f.ns).Create(ctx, forged, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(ctx, t, "the forged pod to fail", func(ctx context.Context) (bool, string, error) {
		p, err := f.env.Kube.CoreV1().Pods(f.ns).Get(ctx, forged.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return p.Status.Phase == corev1.PodFailed, string(p.Status.Phase), nil
	})
	_, err := f.loadUntil(t, req)
	var jerr *loader.JobError
	if !errors.As(err, &jerr) || jerr.Reason != loader.ReasonFailed {
		t.Fatalf("load: %v; want the Job's failure", err)
	}
	if jerr.Pod == "" || jerr.Pod == forged.Name || strings.Contains(jerr.Message, forged.Name) {
		t.Errorf("the failure reports pod %q (%s); want one of the Job's own pods", jerr.Pod, jerr.Message)
	}
}
