// Package kinds owns the one table of per-kind facts that the rest of
// installstrategy consults: the order in which KubeVirt serialises kinds, the
// API version a kind is written with, whether it is namespaced, its resource
// name, where a workload keeps its pod template, the role its workloads play
// when nothing else names one, and what the engine does differently for a
// kind (secret fields it never shows, deletion that needs the explicit flag,
// the canary rollout, the Services whose serving certificates it scans, the
// objects Kubernetes makes in every namespace, the kinds it makes objects of
// by itself).
//
// Adding a kind is one row in [table] and one row in the table tests. No other
// package keeps per-kind lists, and none spells a kind's name: code that
// builds or names an object of a known kind uses the GroupKinds below
// (test/architecture fails on a kind name literal under pkg/ elsewhere).
package kinds

import (
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Info is what installstrategy knows about one kind.
type Info struct {
	// GroupKind identifies the kind.
	GroupKind schema.GroupKind
	// Version is the API version a strategy writes the kind with; it is the
	// version a repaired object gets.
	Version string
	// Resource is the plural resource name served by the API server.
	Resource string
	// Namespaced is true for namespaced kinds.
	Namespaced bool
	// Order is the position of the kind in the serialised strategy; lower
	// comes first. Unknown kinds sort after every known kind.
	Order int
	// PodTemplate is the field path of the pod template for workload kinds,
	// nil for kinds that run no pods.
	PodTemplate []string
	// OpenShiftOnly marks kinds that only OpenShift serves.
	OpenShiftOnly bool
	// Stage is the reconcile stage that applies objects of the kind.
	// Kinds not in the table (custom resources) are in StageCustomResources.
	Stage Stage
	// Health is the rule that says when an applied object of the kind is
	// ready (rolled over); HealthNone means ready once written.
	Health Health
	// KeepStoredVersions marks CRDs: a version the live object lists in
	// status.storedVersions is kept (served as it was, no longer stored)
	// when a strategy drops it, since the API server refuses to remove it,
	// until its objects are migrated (MigrateStoredVersions).
	KeepStoredVersions bool
	// MigrateStoredVersions marks CRDs: before a stored version the
	// strategy drops leaves the CRD, the stored custom resources are
	// rewritten at the new storage version and status.storedVersions is
	// updated (what kube-storage-version-migrator does; pkg/engine).
	MigrateStoredVersions bool
	// NeverRecreate: an object of the kind is never deleted to change an
	// immutable field (a CRD's scope: deleting it deletes every custom
	// resource of it); the write is refused instead, unless the caller
	// names the object in apply.Options.Recreate (an accepted override).
	NeverRecreate bool
	// UpgradeSafety marks CRDs: before the first write of a run, the
	// strategy's definition is compared with the live one and the stored
	// custom resources (pkg/crdsafety), and an unsafe change is refused.
	UpgradeSafety bool
	// Bulky names the field that holds most of an object of the kind and
	// that the cluster keeps as written (a CRD's version schemas: "spec",
	// "versions", "*", "schema", where "*" is each element of a list). The
	// operator's informer cache holds such a field, when it equals the
	// strategy's, as the strategy's own value instead of a second copy
	// (apply.InformerCache.Share).
	Bulky []string
	// MergeIntoExisting marks kinds (Namespaces) whose existing objects
	// that no installation owns are merged into rather than reported as
	// conflicts: the strategy's labels and annotations are applied, the
	// object is not taken over and never deleted.
	MergeIntoExisting bool
	// PruneOrder orders deletion of objects that a new strategy no longer
	// holds: lower is deleted first. It is derived from Stage (see
	// [PruneOrderOf]).
	PruneOrder int
	// Review says what a change of an object of the kind means to a person
	// reading a diff or a plan, which leads with these changes; ReviewNone
	// for the others (workloads are known by PodTemplate).
	Review Review
	// Dials says where an object of the kind names Services the API
	// server calls over TLS (webhooks, aggregated APIs) and the CA bundle
	// it verifies them with; nil for kinds that dial none.
	Dials *Dials
	// Role is the role a workload of the kind plays when neither its
	// metakeys.RoleAnnotation nor the caller's names give one (see
	// [RoleOf]); "" for kinds that run no pods.
	Role Role
	// Masked lists the top-level fields whose values are secret: a plan
	// or a diff shows their sizes, never their values (a Secret's data
	// and stringData).
	Masked []string
	// StoredWhole marks kinds whose objects a serialised strategy holds
	// as they are, status, creationTimestamp and managed-by label included
	// (CRDs, as KubeVirt writes them; pkg/strategy).
	StoredWhole bool
	// FoldsStringData marks kinds whose write-only stringData the API
	// server folds into data (base64): an object is compared as the
	// server keeps it, with stringData folded in (Secrets; pkg/apply).
	FoldsStringData bool
	// DefinesKinds marks kinds whose objects define other kinds (CRDs,
	// by spec.group and spec.names.kind): deleting one deletes every object
	// of the kind it defines, so prune and uninstall delete one only when
	// the caller asks for it, a Helm hook's delete policy never, and its
	// custom resources are listed before it goes (pkg/plan, pkg/engine).
	DefinesKinds bool
	// Canary marks kinds whose rollout on the update path may start on one
	// node first (DaemonSets, at the version Version): pods on one node
	// are rolled and checked before the others (pkg/engine).
	Canary bool
	// RoutesToPods marks kinds whose objects route calls to the pods they
	// select (Services, at the version Version): the certificate scan
	// follows a dialed one to the pods that serve it (pkg/engine).
	RoutesToPods bool
	// HoldsCertificates marks kinds whose objects hold a TLS key pair the
	// reconciler issues and rotates when one is written empty with type
	// kubernetes.io/tls (Secrets, at the version Version; pkg/engine).
	HoldsCertificates bool
	// InEveryNamespace names the object of the kind that Kubernetes makes
	// by itself in every namespace (the "default" ServiceAccount, the
	// "kube-root-ca.crt" ConfigMap): a namespace holding it holds nothing
	// foreign (pkg/engine).
	InEveryNamespace string
	// RemovedWhenFinished marks kinds whose objects may delete themselves
	// once finished (a Job's ttlSecondsAfterFinished): a hook object of
	// the kind that is gone is looked up by its Events (pkg/engine).
	RemovedWhenFinished bool
	// MadeBySystem marks kinds whose objects Kubernetes makes by itself
	// in any namespace (Events, Endpoints and EndpointSlices of Services):
	// a namespace holding them holds nothing foreign (pkg/engine). No
	// strategy writes them, so they are rows of [systemTable], not
	// [table]: Lookup, All and Names do not know them; [MadeBySystem]
	// does.
	MadeBySystem bool
}

// Review names what a reader of a change needs to know about a kind.
type Review string

// The review rules.
const (
	ReviewNone Review = ""
	// ReviewRules: the kind grants permissions in .rules (roles); added
	// rules widen what its subjects may do.
	ReviewRules Review = "rules"
	// ReviewBinding: the kind grants a role to .subjects (bindings); added
	// subjects, or another roleRef, widen it.
	ReviewBinding Review = "binding"
	// ReviewSchema: the kind defines API versions and their schemas in
	// .spec.versions (CustomResourceDefinitions).
	ReviewSchema Review = "schema"
)

// Stage is a step of a reconcile; every object of a stage is applied and
// ready before the next stage starts.
type Stage int

// The reconcile stages, in order.
const (
	// StageCRDs holds Namespaces and CustomResourceDefinitions (ready when
	// Established and NamesAccepted).
	StageCRDs Stage = iota
	// StageRBAC holds ServiceAccounts, roles, bindings and security policy.
	StageRBAC
	// StageConfig holds ConfigMaps, Secrets (and their certificates) and
	// priority classes.
	StageConfig
	// StageServices holds Services and the policies that route to pods.
	StageServices
	// StageWorkloads holds Deployments, DaemonSets, StatefulSets and Jobs,
	// ordered among themselves by role and upgrade path.
	StageWorkloads
	// StageAdmission holds webhooks, admission policies and APIServices;
	// they are written once the workloads that back them are rolled over.
	StageAdmission
	// StageCustomResources holds objects whose kinds are served by CRDs.
	StageCustomResources
)

var stageNames = [...]string{"crds", "rbac", "config", "services", "workloads", "admission", "custom-resources"}

// Stages returns every stage in order.
func Stages() []Stage {
	out := make([]Stage, len(stageNames))
	for i := range out {
		out[i] = Stage(i)
	}
	return out
}

// String returns the stage's name as plans print it.
func (s Stage) String() string {
	if s < 0 || int(s) >= len(stageNames) {
		return "unknown"
	}
	return stageNames[s]
}

// PruneOrderOf returns the prune order of a stage: admission objects
// (webhooks, APIServices) first so no webhook points at a deleted backend,
// then custom resources, workloads, services, config, RBAC, and CRDs and
// namespaces last.
func PruneOrderOf(s Stage) int {
	switch s {
	case StageAdmission:
		return 0
	case StageCustomResources:
		return 1
	default:
		return 2 + int(StageWorkloads-s)
	}
}

// Health names the rule that decides whether an object is ready.
type Health string

// The health rules (pkg/health implements them).
const (
	// HealthNone: ready once written.
	HealthNone Health = ""
	// HealthCRD: Established and NamesAccepted.
	HealthCRD Health = "CRD"
	// HealthDeployment: rolled out, and every pod carries the target
	// identity annotations with all containers ready.
	HealthDeployment Health = "Deployment"
	// HealthDaemonSet: every desired pod updated and ready, and every pod
	// carries the target identity annotations.
	HealthDaemonSet Health = "DaemonSet"
	// HealthStatefulSet: every replica updated and ready.
	HealthStatefulSet Health = "StatefulSet"
	// HealthJob: complete.
	HealthJob Health = "Job"
	// HealthAPIService: condition Available.
	HealthAPIService Health = "APIService"
	// HealthKStatus: kstatus's generic rules (conditions Ready/Reconciling/
	// Stalled, observedGeneration); the rule of every kind outside the
	// table.
	HealthKStatus Health = "kstatus"
)

// StaysReady reports whether an object the rule found ready stays ready
// without a change of the object: an Established CRD is never
// un-established by the API server. A wait need not read such an object
// again once it was ready.
func (h Health) StaysReady() bool {
	return h == HealthCRD
}

// GroupVersionKind returns the kind with the version a strategy writes.
func (i Info) GroupVersionKind() schema.GroupVersionKind {
	return i.GroupKind.WithVersion(i.Version)
}

// APIVersion returns the apiVersion string a strategy writes for the kind.
func (i Info) APIVersion() string {
	return i.GroupVersionKind().GroupVersion().String()
}

// EachBulky calls fn with the place, the enclosing map and key, and the
// value of each field of obj at the kind's Bulky path ("*" steps into each
// element of a list), so fn can read or replace the value. The place has
// list indices, e.g. "spec.versions.1.schema".
func (i Info) EachBulky(obj map[string]any, fn func(at string, parent map[string]any, key string, v any)) {
	eachAt(obj, i.Bulky, "", fn)
}

func eachAt(obj map[string]any, path []string, at string, fn func(at string, parent map[string]any, key string, v any)) {
	if len(path) == 0 {
		return
	}
	key := path[0]
	if key == "*" {
		return // a list is walked from its parent below
	}
	v, ok := obj[key]
	if !ok {
		return
	}
	place := strings.TrimPrefix(at+"."+key, ".")
	if len(path) == 1 {
		fn(place, obj, key, v)
		return
	}
	if path[1] == "*" {
		list, _ := v.([]any)
		for i, el := range list {
			if m, ok := el.(map[string]any); ok {
				eachAt(m, path[2:], place+"."+strconv.Itoa(i), fn)
			}
		}
		return
	}
	if m, ok := v.(map[string]any); ok {
		eachAt(m, path[1:], place, fn)
	}
}

// CopySharingBulky returns a deep copy of obj in which the fields
// EachBulky visits are obj's own values, not copies: the copy may be
// changed anywhere else, but its bulky fields only by replacing them. For
// a kind without a bulky field it is a plain deep copy. obj must hold
// JSON values only (as runtime.DeepCopyJSON).
func (i Info) CopySharingBulky(obj map[string]any) map[string]any {
	return copyExcept(obj, i.Bulky)
}

// copyExcept deep-copies m except the value at path (as eachAt walks it),
// which stays shared.
func copyExcept(m map[string]any, path []string) map[string]any {
	if len(path) == 0 || path[0] == "*" {
		return runtime.DeepCopyJSON(m)
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		if k != path[0] {
			out[k] = runtime.DeepCopyJSONValue(v)
			continue
		}
		switch {
		case len(path) == 1:
			out[k] = v
		case path[1] == "*":
			list, ok := v.([]any)
			if !ok {
				out[k] = runtime.DeepCopyJSONValue(v)
				break
			}
			cp := make([]any, len(list))
			for j, el := range list {
				if em, ok := el.(map[string]any); ok {
					cp[j] = copyExcept(em, path[2:])
				} else {
					cp[j] = runtime.DeepCopyJSONValue(el)
				}
			}
			out[k] = cp
		default:
			if vm, ok := v.(map[string]any); ok {
				out[k] = copyExcept(vm, path[1:])
			} else {
				out[k] = runtime.DeepCopyJSONValue(v)
			}
		}
	}
	return out
}

var podSpecTemplate = []string{"spec", "template"}

// GroupKinds of the kinds whose objects the engine itself builds or names
// (a CA Secret, an inventory ConfigMap, an implicit Namespace, a dump Job,
// RBAC references). Code elsewhere uses these instead of spelling a kind.
var (
	Namespace                = gk("", "Namespace")
	ServiceAccount           = gk("", "ServiceAccount")
	ConfigMap                = gk("", "ConfigMap")
	Secret                   = gk("", "Secret")
	Service                  = gk("", "Service")
	ClusterRole              = gk("rbac.authorization.k8s.io", "ClusterRole")
	RoleKind                 = gk("rbac.authorization.k8s.io", "Role")
	CustomResourceDefinition = gk("apiextensions.k8s.io", "CustomResourceDefinition")
	DaemonSet                = gk("apps", "DaemonSet")
	Job                      = gk("batch", "Job")
)

// webhookDials and apiServiceDials are where webhooks and aggregated APIs
// name the Service the API server calls.
var (
	webhookDials    = &Dials{Each: []string{"webhooks"}, Service: []string{"clientConfig", "service"}, CABundle: []string{"clientConfig", "caBundle"}}
	apiServiceDials = &Dials{Service: []string{"spec", "service"}, CABundle: []string{"spec", "caBundle"}, SkipVerify: []string{"spec", "insecureSkipTLSVerify"}}
)

// table lists the known kinds in serialisation order. The KubeVirt kinds are
// in the order KubeVirt's install strategy writes them; the others are placed
// where an install would want them.
var table = []Info{
	{GroupKind: Namespace, Version: "v1", Resource: "namespaces", Stage: StageCRDs, MergeIntoExisting: true},
	{GroupKind: ServiceAccount, Version: "v1", Resource: "serviceaccounts", Namespaced: true, Stage: StageRBAC, InEveryNamespace: "default"},
	{GroupKind: ClusterRole, Version: "v1", Resource: "clusterroles", Stage: StageRBAC, Review: ReviewRules},
	{GroupKind: gk("rbac.authorization.k8s.io", "ClusterRoleBinding"), Version: "v1", Resource: "clusterrolebindings", Stage: StageRBAC, Review: ReviewBinding},
	{GroupKind: RoleKind, Version: "v1", Resource: "roles", Namespaced: true, Stage: StageRBAC, Review: ReviewRules},
	{GroupKind: gk("rbac.authorization.k8s.io", "RoleBinding"), Version: "v1", Resource: "rolebindings", Namespaced: true, Stage: StageRBAC, Review: ReviewBinding},
	{GroupKind: CustomResourceDefinition, Version: "v1", Resource: "customresourcedefinitions", Stage: StageCRDs, DefinesKinds: true, StoredWhole: true, Health: HealthCRD, KeepStoredVersions: true, MigrateStoredVersions: true, NeverRecreate: true, UpgradeSafety: true, Review: ReviewSchema,
		Bulky: []string{"spec", "versions", "*", "schema"}},
	{GroupKind: gk("scheduling.k8s.io", "PriorityClass"), Version: "v1", Resource: "priorityclasses", Stage: StageConfig},
	{GroupKind: Service, Version: "v1", Resource: "services", Namespaced: true, Stage: StageServices, RoutesToPods: true},
	{GroupKind: Secret, Version: "v1", Resource: "secrets", Namespaced: true, Stage: StageConfig, Masked: []string{"data", "stringData"}, FoldsStringData: true, HoldsCertificates: true},
	{GroupKind: gk("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"), Version: "v1", Resource: "validatingwebhookconfigurations", Stage: StageAdmission, Dials: webhookDials},
	{GroupKind: gk("admissionregistration.k8s.io", "MutatingWebhookConfiguration"), Version: "v1", Resource: "mutatingwebhookconfigurations", Stage: StageAdmission, Dials: webhookDials},
	{GroupKind: gk("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"), Version: "v1", Resource: "validatingadmissionpolicybindings", Stage: StageAdmission},
	{GroupKind: gk("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"), Version: "v1", Resource: "validatingadmissionpolicies", Stage: StageAdmission},
	{GroupKind: gk("apiregistration.k8s.io", "APIService"), Version: "v1", Resource: "apiservices", Stage: StageAdmission, Health: HealthAPIService, Dials: apiServiceDials},
	{GroupKind: gk("apps", "Deployment"), Version: "v1", Resource: "deployments", Namespaced: true, PodTemplate: podSpecTemplate, Stage: StageWorkloads, Health: HealthDeployment, Role: RoleController},
	{GroupKind: DaemonSet, Version: "v1", Resource: "daemonsets", Namespaced: true, PodTemplate: podSpecTemplate, Stage: StageWorkloads, Health: HealthDaemonSet, Role: RoleHandler, Canary: true},
	{GroupKind: gk("apps", "StatefulSet"), Version: "v1", Resource: "statefulsets", Namespaced: true, PodTemplate: podSpecTemplate, Stage: StageWorkloads, Health: HealthStatefulSet, Role: RoleController},
	{GroupKind: Job, Version: "v1", Resource: "jobs", Namespaced: true, PodTemplate: podSpecTemplate, Stage: StageWorkloads, Health: HealthJob, Role: RoleController, RemovedWhenFinished: true},
	{GroupKind: gk("policy", "PodDisruptionBudget"), Version: "v1", Resource: "poddisruptionbudgets", Namespaced: true, Stage: StageServices},
	{GroupKind: gk("networking.k8s.io", "NetworkPolicy"), Version: "v1", Resource: "networkpolicies", Namespaced: true, Stage: StageServices},
	{GroupKind: gk("security.openshift.io", "SecurityContextConstraints"), Version: "v1", Resource: "securitycontextconstraints", OpenShiftOnly: true, Stage: StageRBAC},
	{GroupKind: gk("monitoring.coreos.com", "ServiceMonitor"), Version: "v1", Resource: "servicemonitors", Namespaced: true, Stage: StageCustomResources},
	{GroupKind: gk("monitoring.coreos.com", "PrometheusRule"), Version: "v1", Resource: "prometheusrules", Namespaced: true, Stage: StageCustomResources},
	{GroupKind: ConfigMap, Version: "v1", Resource: "configmaps", Namespaced: true, Stage: StageConfig, InEveryNamespace: "kube-root-ca.crt"},
	{GroupKind: gk("route.openshift.io", "Route"), Version: "v1", Resource: "routes", Namespaced: true, OpenShiftOnly: true, Stage: StageServices},
	{GroupKind: gk("instancetype.kubevirt.io", "VirtualMachineClusterInstancetype"), Version: "v1beta1", Resource: "virtualmachineclusterinstancetypes", Stage: StageCustomResources},
	{GroupKind: gk("instancetype.kubevirt.io", "VirtualMachineClusterPreference"), Version: "v1beta1", Resource: "virtualmachineclusterpreferences", Stage: StageCustomResources},
	// Built-in kinds KubeVirt does not write, after KubeVirt's (so its
	// serialisation order is untouched), each in the stage before the
	// kinds that need it: quotas and limits before the pods they admit,
	// classes before the objects that name them.
	{GroupKind: gk("", "ResourceQuota"), Version: "v1", Resource: "resourcequotas", Namespaced: true, Stage: StageConfig},
	{GroupKind: gk("", "LimitRange"), Version: "v1", Resource: "limitranges", Namespaced: true, Stage: StageConfig},
	{GroupKind: gk("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"), Version: "v1", Resource: "prioritylevelconfigurations", Stage: StageConfig},
	{GroupKind: gk("flowcontrol.apiserver.k8s.io", "FlowSchema"), Version: "v1", Resource: "flowschemas", Stage: StageConfig},
	{GroupKind: gk("storage.k8s.io", "StorageClass"), Version: "v1", Resource: "storageclasses", Stage: StageConfig},
	{GroupKind: gk("storage.k8s.io", "CSIDriver"), Version: "v1", Resource: "csidrivers", Stage: StageConfig},
	{GroupKind: gk("node.k8s.io", "RuntimeClass"), Version: "v1", Resource: "runtimeclasses", Stage: StageConfig},
	{GroupKind: gk("", "PersistentVolume"), Version: "v1", Resource: "persistentvolumes", Stage: StageConfig},
	{GroupKind: gk("", "PersistentVolumeClaim"), Version: "v1", Resource: "persistentvolumeclaims", Namespaced: true, Stage: StageConfig},
	{GroupKind: gk("networking.k8s.io", "IngressClass"), Version: "v1", Resource: "ingressclasses", Stage: StageConfig},
	{GroupKind: gk("networking.k8s.io", "Ingress"), Version: "v1", Resource: "ingresses", Namespaced: true, Stage: StageServices},
	{GroupKind: gk("batch", "CronJob"), Version: "v1", Resource: "cronjobs", Namespaced: true, PodTemplate: []string{"spec", "jobTemplate", "spec", "template"}, Stage: StageWorkloads, Role: RoleController},
	{GroupKind: gk("autoscaling", "HorizontalPodAutoscaler"), Version: "v2", Resource: "horizontalpodautoscalers", Namespaced: true, Stage: StageAdmission},
}

// systemTable lists the kinds whose objects Kubernetes makes by itself
// (Info.MadeBySystem). They are kept apart from [table] so that a strategy
// that writes one still sees it as a kind the table does not know (a
// custom resource, placed last), as before this table existed.
var systemTable = []Info{
	{GroupKind: gk("", "Event"), Version: "v1", Resource: "events", Namespaced: true, MadeBySystem: true},
	{GroupKind: gk("events.k8s.io", "Event"), Version: "v1", Resource: "events", Namespaced: true, MadeBySystem: true},
	{GroupKind: gk("", "Endpoints"), Version: "v1", Resource: "endpoints", Namespaced: true, MadeBySystem: true},
	{GroupKind: gk("discovery.k8s.io", "EndpointSlice"), Version: "v1", Resource: "endpointslices", Namespaced: true, MadeBySystem: true},
}

// MadeBySystem reports whether Kubernetes makes the objects of a kind by
// itself (Info.MadeBySystem of its row in [systemTable] or [table]).
func MadeBySystem(gk schema.GroupKind) bool {
	if info, ok := byGroupKind[gk]; ok {
		return info.MadeBySystem
	}
	return madeBySystem[gk]
}

func gk(group, kind string) schema.GroupKind { return schema.GroupKind{Group: group, Kind: kind} }

// unknownInfo is what Lookup returns for a kind outside the table: a custom
// resource.
func unknownInfo(gk schema.GroupKind) Info {
	return Info{GroupKind: gk, Order: UnknownOrder, Stage: StageCustomResources, Health: HealthKStatus, PruneOrder: PruneOrderOf(StageCustomResources)}
}

var (
	byGroupKind = map[schema.GroupKind]Info{}
	// byKind lists the non-core groups that have a kind of a given name.
	byKind = map[string][]Info{}
	// madeBySystem holds the kinds of systemTable.
	madeBySystem = map[schema.GroupKind]bool{}
)

func init() {
	for _, info := range systemTable {
		madeBySystem[info.GroupKind] = info.MadeBySystem
	}
	for i := range table {
		table[i].Order = i
		table[i].PruneOrder = PruneOrderOf(table[i].Stage)
		info := table[i]
		if _, dup := byGroupKind[info.GroupKind]; dup {
			panic("kinds: duplicate row for " + info.GroupKind.String())
		}
		byGroupKind[info.GroupKind] = info
		if info.GroupKind.Group != "" {
			byKind[info.GroupKind.Kind] = append(byKind[info.GroupKind.Kind], info)
		}
	}
}

// UnknownOrder is the Order of every kind that is not in the table.
const UnknownOrder = 1 << 20

// Lookup returns the facts for a kind and whether it is known.
func Lookup(gk schema.GroupKind) (Info, bool) {
	info, ok := byGroupKind[gk]
	if !ok {
		return unknownInfo(gk), false
	}
	return info, true
}

// All returns every known kind in serialisation order.
func All() []Info {
	out := make([]Info, len(table))
	copy(out, table)
	return out
}

// RepairCoreAPIVersion answers whether an object written with a core-group
// apiVersion (such as "v1") but a kind that only exists in one other known
// group should be moved to that group, as KubeVirt's loader effectively does
// by dispatching on kind alone. It returns the row to repair to.
//
// Only the core group is repaired: a kind whose group is given explicitly is
// never second-guessed, and a core kind such as Pod never matches.
func RepairCoreAPIVersion(gvk schema.GroupVersionKind) (Info, bool) {
	if gvk.Group != "" {
		return Info{}, false
	}
	if _, ok := byGroupKind[gvk.GroupKind()]; ok {
		return Info{}, false
	}
	candidates := byKind[gvk.Kind]
	if len(candidates) != 1 {
		return Info{}, false
	}
	return candidates[0], true
}

// Less orders two kinds for serialisation: by table order, unknown kinds last
// and among themselves by group then kind, so the result is deterministic.
func Less(a, b schema.GroupKind) bool {
	ia, _ := Lookup(a)
	ib, _ := Lookup(b)
	if ia.Order != ib.Order {
		return ia.Order < ib.Order
	}
	if a.Group != b.Group {
		return a.Group < b.Group
	}
	return a.Kind < b.Kind
}

// Names returns the known kinds as "Kind.group" strings, sorted, for help
// texts and errors.
func Names() []string {
	out := make([]string, 0, len(table))
	for _, info := range table {
		out = append(out, strings.TrimSuffix(info.GroupKind.Kind+"."+info.GroupKind.Group, "."))
	}
	sort.Strings(out)
	return out
}
