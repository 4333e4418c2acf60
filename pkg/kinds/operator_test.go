package kinds

import (
	"slices"
	"testing"
)

func TestKeepsPods(t *testing.T) {
	var got []string
	for _, info := range PodKeepers() {
		got = append(got, info.GroupKind.String())
	}
	if want := []string{"Deployment.apps", "DaemonSet.apps", "StatefulSet.apps"}; !slices.Equal(got, want) {
		t.Errorf("PodKeepers = %v, want %v", got, want)
	}
	for _, gk := range []string{"Job.batch", "CronJob.batch", "Service", "Widget.example.com"} {
		for _, info := range All() {
			if info.GroupKind.String() == gk && KeepsPods(info.GroupKind) {
				t.Errorf("%s keeps pods", gk)
			}
		}
	}
}

func TestConfiguresWebhooks(t *testing.T) {
	var got []string
	for _, info := range All() {
		if ConfiguresWebhooks(info.GroupKind) {
			got = append(got, info.GroupKind.Kind)
		}
	}
	if want := []string{"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"}; !slices.Equal(got, want) {
		t.Errorf("ConfiguresWebhooks holds for %v, want %v", got, want)
	}
}
