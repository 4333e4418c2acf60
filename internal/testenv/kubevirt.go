package testenv

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/internal/kubevirtdata"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// KubeVirtStrategy returns the parsed KubeVirt strategy of a version (see
// internal/kubevirtdata), with its identity,
// made installable on the local cluster's kwok nodes the way virt-operator
// would see it there: the PriorityClass virt-operator creates itself
// (outside the strategy; without it no pod of the strategy is admitted) is
// added, and since kwok runs no containers and so no webhook server
// answers, KubeVirt's webhooks are set to failurePolicy Ignore (else they
// would refuse the strategy's own cluster instancetypes and preferences).
func KubeVirtStrategy(tb testing.TB, version string) *strategy.Strategy {
	tb.Helper()
	s := KubeVirtStrategyAsShipped(tb, version)
	for _, o := range s.Objects {
		if !strings.HasSuffix(o.GetKind(), "WebhookConfiguration") {
			continue
		}
		hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
		for _, h := range hooks {
			h.(map[string]any)["failurePolicy"] = "Ignore"
		}
		_ = unstructured.SetNestedSlice(o.Object, hooks, "webhooks")
	}
	return s
}

// KubeVirtStrategyAsShipped is KubeVirtStrategy with KubeVirt's webhooks as
// KubeVirt writes them (failurePolicy Fail): a test installing it serves
// them with stand-ins (Env.ServeWebhookStandIn).
func KubeVirtStrategyAsShipped(tb testing.TB, version string) *strategy.Strategy {
	tb.Helper()
	s, _, err := strategy.Parse(kubevirtdata.Read(tb, version, "manifests.yaml"), strategy.ParseOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	s.Identity = strategy.Identity{Version: version, Registry: "quay.io/kubevirt", Identifier: kubevirtdata.ID(tb, version)}
	pc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
		"metadata": map[string]any{"name": "kubevirt-cluster-critical"},
		"value":    int64(1000000000), "globalDefault": false,
	}}
	s.Objects = append(s.Objects, pc)
	s.Sort()
	return s
}
