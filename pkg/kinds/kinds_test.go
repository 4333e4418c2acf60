package kinds

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestStageAndHealthOfEveryKind(t *testing.T) {
	want := map[string]struct {
		stage  Stage
		health Health
	}{
		"Namespace":                         {StageCRDs, HealthNone},
		"ServiceAccount":                    {StageRBAC, HealthNone},
		"ClusterRole":                       {StageRBAC, HealthNone},
		"ClusterRoleBinding":                {StageRBAC, HealthNone},
		"Role":                              {StageRBAC, HealthNone},
		"RoleBinding":                       {StageRBAC, HealthNone},
		"CustomResourceDefinition":          {StageCRDs, HealthCRD},
		"PriorityClass":                     {StageConfig, HealthNone},
		"Service":                           {StageServices, HealthNone},
		"Secret":                            {StageConfig, HealthNone},
		"ValidatingWebhookConfiguration":    {StageAdmission, HealthNone},
		"MutatingWebhookConfiguration":      {StageAdmission, HealthNone},
		"ValidatingAdmissionPolicyBinding":  {StageAdmission, HealthNone},
		"ValidatingAdmissionPolicy":         {StageAdmission, HealthNone},
		"APIService":                        {StageAdmission, HealthAPIService},
		"Deployment":                        {StageWorkloads, HealthDeployment},
		"DaemonSet":                         {StageWorkloads, HealthDaemonSet},
		"StatefulSet":                       {StageWorkloads, HealthStatefulSet},
		"Job":                               {StageWorkloads, HealthJob},
		"PodDisruptionBudget":               {StageServices, HealthNone},
		"NetworkPolicy":                     {StageServices, HealthNone},
		"SecurityContextConstraints":        {StageRBAC, HealthNone},
		"ServiceMonitor":                    {StageCustomResources, HealthNone},
		"PrometheusRule":                    {StageCustomResources, HealthNone},
		"ConfigMap":                         {StageConfig, HealthNone},
		"Route":                             {StageServices, HealthNone},
		"VirtualMachineClusterInstancetype": {StageCustomResources, HealthNone},
		"VirtualMachineClusterPreference":   {StageCustomResources, HealthNone},
		"ResourceQuota":                     {StageConfig, HealthNone},
		"LimitRange":                        {StageConfig, HealthNone},
		"PriorityLevelConfiguration":        {StageConfig, HealthNone},
		"FlowSchema":                        {StageConfig, HealthNone},
		"StorageClass":                      {StageConfig, HealthNone},
		"CSIDriver":                         {StageConfig, HealthNone},
		"RuntimeClass":                      {StageConfig, HealthNone},
		"PersistentVolume":                  {StageConfig, HealthNone},
		"PersistentVolumeClaim":             {StageConfig, HealthNone},
		"IngressClass":                      {StageConfig, HealthNone},
		"Ingress":                           {StageServices, HealthNone},
		"CronJob":                           {StageWorkloads, HealthNone},
		"HorizontalPodAutoscaler":           {StageAdmission, HealthNone},
	}
	all := All()
	if len(all) != len(want) {
		t.Errorf("table has %d kinds, test has %d rows", len(all), len(want))
	}
	for _, info := range all {
		w, ok := want[info.GroupKind.Kind]
		if !ok {
			t.Errorf("%s: no test row", info.GroupKind)
			continue
		}
		if info.Stage != w.stage || info.Health != w.health {
			t.Errorf("%s: stage %s health %q, want %s %q", info.GroupKind, info.Stage, info.Health, w.stage, w.health)
		}
		if info.KeepStoredVersions != (info.GroupKind.Kind == "CustomResourceDefinition") || info.MigrateStoredVersions != info.KeepStoredVersions {
			t.Errorf("%s: KeepStoredVersions %v MigrateStoredVersions %v", info.GroupKind, info.KeepStoredVersions, info.MigrateStoredVersions)
		}
		if info.MergeIntoExisting != (info.GroupKind.Kind == "Namespace") {
			t.Errorf("%s: MergeIntoExisting %v", info.GroupKind, info.MergeIntoExisting)
		}
		wantReview := map[string]Review{"ClusterRole": ReviewRules, "Role": ReviewRules, "ClusterRoleBinding": ReviewBinding,
			"RoleBinding": ReviewBinding, "CustomResourceDefinition": ReviewSchema}[info.GroupKind.Kind]
		if info.Review != wantReview {
			t.Errorf("%s: review %q, want %q", info.GroupKind, info.Review, wantReview)
		}
		if info.PruneOrder != PruneOrderOf(info.Stage) {
			t.Errorf("%s: prune order %d, want %d", info.GroupKind, info.PruneOrder, PruneOrderOf(info.Stage))
		}
	}
}

func TestUnknownKindIsACustomResource(t *testing.T) {
	info, ok := Lookup(schema.GroupKind{Group: "example.com", Kind: "Widget"})
	if ok || info.Stage != StageCustomResources || info.Order != UnknownOrder || info.Health != HealthKStatus {
		t.Errorf("Lookup(Widget) = %+v, %v", info, ok)
	}
}

func TestPruneOrder(t *testing.T) {
	// Admission objects are deleted first, CRDs last.
	order := []Stage{StageAdmission, StageCustomResources, StageWorkloads, StageServices, StageConfig, StageRBAC, StageCRDs}
	for i := 1; i < len(order); i++ {
		if PruneOrderOf(order[i-1]) >= PruneOrderOf(order[i]) {
			t.Errorf("prune order of %s (%d) not before %s (%d)", order[i-1], PruneOrderOf(order[i-1]), order[i], PruneOrderOf(order[i]))
		}
	}
	if len(Stages()) != int(StageCustomResources)+1 || StageCustomResources.String() != "custom-resources" {
		t.Errorf("stages: %v", Stages())
	}
}
