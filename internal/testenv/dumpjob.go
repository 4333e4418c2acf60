package testenv

import (
	"context"
	"encoding/json"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/installstrategy/installstrategy/internal/dump"
	"github.com/installstrategy/installstrategy/pkg/loader"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/store"
)

// RunDumpJob does the work of a dump Job in namespace, which kwok cannot
// (it runs no container): it waits for a Job with metakeys.DumpJobLabel,
// reads the configuration the loader gave it (identity.EnvVar) and runs the
// operator's dump mode with it, as the container would, publishing the
// strategy through the store with the test's (admin) client. Then it ends
// the Job's pod with the digest as its termination message (FinishDumpJob),
// as the container reports it; that needs the pods to have
// BehaviourAwaitResult (the operator's DumpPodLabels). It returns the Job's
// name.
func (e *Env) RunDumpJob(ctx context.Context, t testing.TB, namespace string) string {
	t.Helper()
	job, cfgJSON := e.WaitDumpJob(ctx, t, namespace)
	st, err := store.New(e.Kube, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := dump.Run(ctx, dump.Options{ConfigJSON: []byte(cfgJSON), Store: st})
	if err != nil {
		t.Fatalf("dump mode with the configuration of Job %s/%s: %v", namespace, job.Name, err)
	}
	e.FinishDumpJob(ctx, t, namespace, job.Name, res.Digest)
	return job.Name
}

// WaitDumpJob waits for a dump Job in namespace and returns it with the
// configuration the loader gave it.
func (e *Env) WaitDumpJob(ctx context.Context, t testing.TB, namespace string) (*batchv1.Job, string) {
	t.Helper()
	var job *batchv1.Job
	var cfgJSON string
	WaitFor(ctx, t, "a dump Job in "+namespace, func(ctx context.Context) (bool, string, error) {
		jobs, err := e.Kube.BatchV1().Jobs(namespace).List(ctx, metav1.ListOptions{LabelSelector: metakeys.DumpJobLabel})
		if err != nil {
			return false, "", err
		}
		for i := range jobs.Items {
			if v := loader.JobConfig(&jobs.Items[i]); v != "" {
				job, cfgJSON = &jobs.Items[i], v
			}
		}
		return cfgJSON != "", "no dump Job yet", nil
	})
	return job, cfgJSON
}

// FinishDumpJob ends the pod of a dump Job that has BehaviourAwaitResult:
// its containers exit 0 with message as their termination message (a
// digest, or "" for a Job that reports nothing).
func (e *Env) FinishDumpJob(ctx context.Context, t testing.TB, namespace, job, message string) {
	t.Helper()
	var pod string
	WaitFor(ctx, t, "the pod of dump Job "+job, func(ctx context.Context) (bool, string, error) {
		pods, err := e.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job})
		if err != nil || len(pods.Items) == 0 {
			return false, "no pod yet", err
		}
		pod = pods.Items[0].Name
		return true, "", nil
	})
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{TerminationMessageAnnotation: message}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Kube.CoreV1().Pods(namespace).Patch(ctx, pod, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("finish dump job %s: %v", job, err)
	}
}
