package testenv

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/internal/dump"
	"github.com/installstrategy/installstrategy/pkg/loader"
	"github.com/installstrategy/installstrategy/pkg/store"
)

// RunDumpJob does the work of a dump Job in namespace, which kwok cannot
// (it runs no container): it waits for a Job with loader.DumpJobLabel,
// reads the configuration the loader gave it (identity.EnvVar) and runs the
// operator's dump mode with it, as the container would, publishing the
// strategy through the store with the test's (admin) client. It returns the
// Job's name.
func (e *Env) RunDumpJob(ctx context.Context, t testing.TB, namespace string) string {
	t.Helper()
	var name, cfgJSON string
	WaitFor(ctx, t, "a dump Job in "+namespace, func(ctx context.Context) (bool, string, error) {
		jobs, err := e.Kube.BatchV1().Jobs(namespace).List(ctx, metav1.ListOptions{LabelSelector: loader.DumpJobLabel})
		if err != nil {
			return false, "", err
		}
		for i := range jobs.Items {
			if v := loader.JobConfig(&jobs.Items[i]); v != "" {
				name, cfgJSON = jobs.Items[i].Name, v
			}
		}
		return cfgJSON != "", "no dump Job yet", nil
	})
	st, err := store.New(e.Kube, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dump.Run(ctx, dump.Options{ConfigJSON: []byte(cfgJSON), Store: st}); err != nil {
		t.Fatalf("dump mode with the configuration of Job %s/%s: %v", namespace, name, err)
	}
	return name
}
