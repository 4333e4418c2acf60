package kinds

import (
	"reflect"
	"slices"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
		if wantDials := info.GroupKind.Kind == "ValidatingWebhookConfiguration" || info.GroupKind.Kind == "MutatingWebhookConfiguration" || info.GroupKind.Kind == "APIService"; (info.Dials != nil) != wantDials {
			t.Errorf("%s: Dials %+v, want set: %v", info.GroupKind, info.Dials, wantDials)
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

// A copy sharing the bulky fields holds each schema as the very value of
// the original, and everything else as its own copy: changing the copy
// outside the schemas leaves the original alone.
func TestCopySharingBulky(t *testing.T) {
	info, ok := Lookup(schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"})
	if !ok {
		t.Fatal("no CRD in the kind table")
	}
	version := func(name string) map[string]any {
		return map[string]any{"name": name, "served": true, "schema": map[string]any{
			"openAPIV3Schema": map[string]any{"type": "object", "required": []any{"spec"}},
		}}
	}
	orig := map[string]any{
		"metadata": map[string]any{"name": "gizmos.example.com", "labels": map[string]any{"a": "b"}},
		"spec": map[string]any{
			"group":    "example.com",
			"versions": []any{version("v1"), version("v2"), "not a map"},
		},
	}
	cp := info.CopySharingBulky(orig)
	if !reflect.DeepEqual(cp, orig) {
		t.Fatalf("the copy differs:\n%v\n%v", cp, orig)
	}
	ov, cv := orig["spec"].(map[string]any)["versions"].([]any), cp["spec"].(map[string]any)["versions"].([]any)
	for i := range 2 {
		o, c := ov[i].(map[string]any), cv[i].(map[string]any)
		if reflect.ValueOf(o["schema"]).UnsafePointer() != reflect.ValueOf(c["schema"]).UnsafePointer() {
			t.Errorf("version %d: the schema was copied, not shared", i)
		}
		c["served"] = false
		if o["served"] != true {
			t.Errorf("version %d: changing the copy's served changed the original", i)
		}
	}
	cp["metadata"].(map[string]any)["labels"].(map[string]any)["a"] = "changed"
	cv[0] = "replaced"
	if orig["metadata"].(map[string]any)["labels"].(map[string]any)["a"] != "b" || ov[0].(map[string]any)["name"] != "v1" {
		t.Error("changing the copy's labels or versions list changed the original")
	}

	// A kind without a bulky field: a plain deep copy.
	cm, _ := Lookup(schema.GroupKind{Kind: "ConfigMap"})
	data := map[string]any{"data": map[string]any{"schema": map[string]any{"k": "v"}}}
	c2 := cm.CopySharingBulky(data)
	c2["data"].(map[string]any)["schema"].(map[string]any)["k"] = "changed"
	if data["data"].(map[string]any)["schema"].(map[string]any)["k"] != "v" {
		t.Error("a ConfigMap's copy shares a field with the original")
	}
}

// Webhooks and APIServices name the Services they dial where the table
// says: every webhook with a Service (not a URL), an APIService's
// spec.service with its skip flag; malformed entries are skipped, not
// fatal; other kinds dial nothing.
func TestEachServiceCall(t *testing.T) {
	hooks := map[string]any{"webhooks": []any{
		map[string]any{"name": "a", "clientConfig": map[string]any{"service": map[string]any{"namespace": "ns", "name": "svc-a"}}},
		map[string]any{"name": "url", "clientConfig": map[string]any{"url": "https://example.com"}},
		"not a map",
		map[string]any{"name": "b", "clientConfig": map[string]any{"service": map[string]any{"namespace": "ns", "name": "svc-b"}}},
		map[string]any{"name": "bad", "clientConfig": map[string]any{"service": "svc"}},
	}}
	api := map[string]any{"spec": map[string]any{"service": map[string]any{"namespace": "ns", "name": "api"}, "insecureSkipTLSVerify": true}}
	calls := func(kind string, obj map[string]any) (out []string) {
		group := map[string]string{"APIService": "apiregistration.k8s.io", "Deployment": "apps"}[kind]
		if group == "" {
			group = "admissionregistration.k8s.io"
		}
		info, _ := Lookup(schema.GroupKind{Group: group, Kind: kind})
		info.EachServiceCall(obj, func(c ServiceCall) {
			_ = unstructured.SetNestedField(c.At, "BUNDLE", info.Dials.CABundle...)
			out = append(out, c.Namespace+"/"+c.Name+"/"+strconv.FormatBool(c.SkipVerify))
		})
		return out
	}
	for _, kind := range []string{"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"} {
		if got := calls(kind, hooks); !slices.Equal(got, []string{"ns/svc-a/false", "ns/svc-b/false"}) {
			t.Errorf("%s: %v", kind, got)
		}
	}
	first := hooks["webhooks"].([]any)[0].(map[string]any)["clientConfig"].(map[string]any)
	if first["caBundle"] != "BUNDLE" {
		t.Errorf("At is not the webhook itself: %v", first)
	}
	if got := calls("APIService", api); !slices.Equal(got, []string{"ns/api/true"}) {
		t.Errorf("APIService: %v", got)
	}
	if got := calls("Deployment", api); got != nil {
		t.Errorf("Deployment dials %v", got)
	}
}

// TestBehaviourOfEveryKind lists every kind with a per-kind behaviour
// other than stage and health; every other kind of the table has none.
func TestBehaviourOfEveryKind(t *testing.T) {
	type behaviour struct {
		role                                                    Role
		masked                                                  []string
		definesKinds, storedWhole, folds, canary, routes, holds bool
		inEveryNamespace                                        string
		removedWhenFinished, madeBySystem                       bool
	}
	want := map[schema.GroupKind]behaviour{
		CustomResourceDefinition:  {definesKinds: true, storedWhole: true},
		Secret:                    {masked: []string{"data", "stringData"}, folds: true, holds: true},
		Service:                   {routes: true},
		ServiceAccount:            {inEveryNamespace: "default"},
		ConfigMap:                 {inEveryNamespace: "kube-root-ca.crt"},
		DaemonSet:                 {role: RoleHandler, canary: true},
		Job:                       {role: RoleController, removedWhenFinished: true},
		gk("apps", "Deployment"):  {role: RoleController},
		gk("apps", "StatefulSet"): {role: RoleController},
		gk("batch", "CronJob"):    {role: RoleController},
		// Kinds no strategy writes, rows of systemTable.
		gk("", "Event"):                         {madeBySystem: true},
		gk("events.k8s.io", "Event"):            {madeBySystem: true},
		gk("", "Endpoints"):                     {madeBySystem: true},
		gk("discovery.k8s.io", "EndpointSlice"): {madeBySystem: true},
	}
	madeBy := MadeBySystem
	for _, info := range append(All(), systemTable...) {
		got := behaviour{info.Role, info.Masked, info.DefinesKinds, info.StoredWhole, info.FoldsStringData, info.Canary, info.RoutesToPods, info.HoldsCertificates, info.InEveryNamespace, info.RemovedWhenFinished, madeBy(info.GroupKind)}
		if w := want[info.GroupKind]; !reflect.DeepEqual(got, w) {
			t.Errorf("%s: behaviour %+v, want %+v", info.GroupKind, got, w)
		}
		if _, known := Lookup(info.GroupKind); known == info.MadeBySystem {
			t.Errorf("%s: known to Lookup %v, made by the system %v: Lookup knows the kinds strategies write, only those", info.GroupKind, known, info.MadeBySystem)
		}
		if (info.Role != "") != (info.PodTemplate != nil) {
			t.Errorf("%s: role %q, pod template %v: every kind that runs pods has a role, no other", info.GroupKind, info.Role, info.PodTemplate)
		}
	}
	info, _ := Lookup(gk("example.com", "Widget"))
	if got := (behaviour{info.Role, info.Masked, info.DefinesKinds, info.StoredWhole, info.FoldsStringData, info.Canary, info.RoutesToPods, info.HoldsCertificates, info.InEveryNamespace, info.RemovedWhenFinished, madeBy(info.GroupKind)}); !reflect.DeepEqual(got, behaviour{}) {
		t.Errorf("a custom resource has a behaviour: %+v", got)
	}
}

// The annotation wins, then the caller's names, then the kind's role; a
// kind without one (or an unknown kind) is a controller. No name is built
// in: virt-api is an api only through the KubeVirt preset.
func TestRoleOf(t *testing.T) {
	deploy, ds := gk("apps", "Deployment"), DaemonSet
	names := map[string]Role{"agent": RoleHandler}
	for _, tc := range []struct {
		gk              schema.GroupKind
		name, annotated string
		names           map[string]Role
		want            Role
	}{
		{deploy, "x", "api", nil, RoleAPI},
		{ds, "agent", "controller", names, RoleController},
		{deploy, "agent", "", names, RoleHandler},
		{deploy, "virt-api", "", nil, RoleController},
		{deploy, "virt-api", "", KubeVirtRoles(), RoleAPI},
		{ds, "virt-handler", "", nil, RoleHandler},
		{ds, "node-agent", "", KubeVirtRoles(), RoleHandler},
		{gk("batch", "Job"), "migrate", "", nil, RoleController},
		{gk("example.com", "Widget"), "w", "", nil, RoleController},
		{deploy, "x", "custom", nil, Role("custom")},
	} {
		if got := RoleOf(tc.gk, tc.name, tc.annotated, tc.names); got != tc.want {
			t.Errorf("RoleOf(%s, %q, %q, %v) = %q, want %q", tc.gk, tc.name, tc.annotated, tc.names, got, tc.want)
		}
	}
	a := KubeVirtRoles()
	a["virt-api"] = RoleHandler
	if KubeVirtRoles()["virt-api"] != RoleAPI || len(KubeVirtRoles()) != 8 {
		t.Error("KubeVirtRoles is shared: a caller's change leaked into the preset")
	}
}

// The GroupKinds the engine builds objects with are rows of the table.
func TestNamedGroupKindsAreRows(t *testing.T) {
	for _, g := range []schema.GroupKind{Namespace, ServiceAccount, ConfigMap, Secret, Service, ClusterRole, RoleKind, CustomResourceDefinition, DaemonSet, Job} {
		if _, ok := Lookup(g); !ok {
			t.Errorf("%s is not a row of the table", g)
		}
	}
}
