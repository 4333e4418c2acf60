package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/oci/ocitest"
)

// An Installation with a Helm source shows the chart's NOTES.txt (Bitnami
// redis 23.1.1, unedited: 1.7 KB of notes rendered) after its rollout,
// once per strategy, as a Notes Event: after the install, none more on
// resyncs, one more after an upgrade (a values change); each cut to the
// API server's 1 KiB limit, saying where the whole text is.
func TestHelmSourceShowsChartNotes(t *testing.T) {
	e, _, metrics := setupResyncing(t)
	ctx := t.Context()
	reg, _, _ := e.ociSetup(ctx, t)
	ref := reg.Ref("charts/redis:23.1.1")
	digest := ocitest.PushChart(t, ocitest.PackChart(t, filepath.Join(renderTestdata, "charts", "redis-23.1.1.tgz")), ref)
	values := func(extra string) *apiextensionsv1.JSON {
		return &apiextensionsv1.JSON{Raw: []byte(`{"architecture":"standalone","master":{"persistence":{"enabled":false}}` + extra + `}`)}
	}
	src := &v1alpha1.HelmStrategySource{Chart: ref, Digest: digest, ReleaseName: "demo", KubeVersion: "v1.36.3", Values: values("")}
	e.create(ctx, t, "redis", v1alpha1.InstallationSpec{Strategy: &v1alpha1.StrategySource{Helm: src}, UninstallStrategy: v1alpha1.UninstallRemoveWorkloads})

	notes := func() []string {
		t.Helper()
		events, err := e.env.Kube.EventsV1().Events(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, ev := range events.Items {
			if ev.Reason == v1alpha1.ReasonNotes && ev.Regarding.Name == "redis" {
				if ev.Series != nil {
					t.Errorf("Notes event %s is a series of %d", ev.Name, ev.Series.Count)
				}
				out = append(out, ev.Note)
			}
		}
		return out
	}
	waitNotes := func(n int) {
		t.Helper()
		testenv.WaitFor(ctx, t, fmt.Sprintf("%d Notes events", n), func(context.Context) (bool, string, error) {
			got := notes()
			return len(got) >= n, fmt.Sprintf("%d: %q", len(got), got), nil
		})
		got := notes()
		if len(got) != n {
			t.Fatalf("%d Notes events, want %d: %q", len(got), n, got)
		}
		for _, note := range got {
			if len(note) > 1024 || !strings.HasPrefix(note, "NOTES of 23.1.1:\nCHART NAME: redis\n") ||
				!strings.HasSuffix(note, `(cut at 1024 bytes; the whole text: the operator's log, message "chart notes")`) {
				t.Errorf("note of %d bytes:\n%s", len(note), note)
			}
		}
	}

	installed := e.waitDeployed(ctx, t, "redis", "23.1.1").Status.ObservedIdentifier
	waitNotes(1)
	// Resyncs of the deployed strategy show nothing again.
	waitResyncs(ctx, t, metrics.Reconciles.WithLabelValues("deployed"), 2)
	waitNotes(1)

	// A values change is another strategy: its notes once more.
	e.update(ctx, t, "redis", func(in *v1alpha1.Installation) {
		in.Spec.Strategy.Helm.Values = values(`,"commonLabels":{"tier":"cache"}`)
	})
	if err := pollInstallation(ctx, e, "redis", func(in *v1alpha1.Installation) bool {
		return in.IsDeployed() && in.Status.ObservedIdentifier != installed
	}); err != nil {
		in, _ := e.get(ctx, "redis")
		t.Fatalf("upgrade: %v; %s", err, describe(in))
	}
	waitResyncs(ctx, t, metrics.Reconciles.WithLabelValues("deployed"), 2)
	waitNotes(2)
}
