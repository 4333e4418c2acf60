// Package kinds owns the one table of per-kind facts that the rest of
// installstrategy consults: the order in which KubeVirt serialises kinds, the
// API version a kind is written with, whether it is namespaced, its resource
// name, and where a workload keeps its pod template.
//
// Adding a kind is one row in [table] and one row in the table tests. No other
// package keeps per-kind lists.
package kinds

import (
	"sort"
	"strings"

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
}

// GroupVersionKind returns the kind with the version a strategy writes.
func (i Info) GroupVersionKind() schema.GroupVersionKind {
	return i.GroupKind.WithVersion(i.Version)
}

// APIVersion returns the apiVersion string a strategy writes for the kind.
func (i Info) APIVersion() string {
	return i.GroupVersionKind().GroupVersion().String()
}

var podSpecTemplate = []string{"spec", "template"}

// table lists the known kinds in serialisation order. The KubeVirt kinds are
// in the order KubeVirt's install strategy writes them; the others are placed
// where an install would want them.
var table = []Info{
	{GroupKind: gk("", "Namespace"), Version: "v1", Resource: "namespaces"},
	{GroupKind: gk("", "ServiceAccount"), Version: "v1", Resource: "serviceaccounts", Namespaced: true},
	{GroupKind: gk("rbac.authorization.k8s.io", "ClusterRole"), Version: "v1", Resource: "clusterroles"},
	{GroupKind: gk("rbac.authorization.k8s.io", "ClusterRoleBinding"), Version: "v1", Resource: "clusterrolebindings"},
	{GroupKind: gk("rbac.authorization.k8s.io", "Role"), Version: "v1", Resource: "roles", Namespaced: true},
	{GroupKind: gk("rbac.authorization.k8s.io", "RoleBinding"), Version: "v1", Resource: "rolebindings", Namespaced: true},
	{GroupKind: gk("apiextensions.k8s.io", "CustomResourceDefinition"), Version: "v1", Resource: "customresourcedefinitions"},
	{GroupKind: gk("scheduling.k8s.io", "PriorityClass"), Version: "v1", Resource: "priorityclasses"},
	{GroupKind: gk("", "Service"), Version: "v1", Resource: "services", Namespaced: true},
	{GroupKind: gk("", "Secret"), Version: "v1", Resource: "secrets", Namespaced: true},
	{GroupKind: gk("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"), Version: "v1", Resource: "validatingwebhookconfigurations"},
	{GroupKind: gk("admissionregistration.k8s.io", "MutatingWebhookConfiguration"), Version: "v1", Resource: "mutatingwebhookconfigurations"},
	{GroupKind: gk("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"), Version: "v1", Resource: "validatingadmissionpolicybindings"},
	{GroupKind: gk("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"), Version: "v1", Resource: "validatingadmissionpolicies"},
	{GroupKind: gk("apiregistration.k8s.io", "APIService"), Version: "v1", Resource: "apiservices"},
	{GroupKind: gk("apps", "Deployment"), Version: "v1", Resource: "deployments", Namespaced: true, PodTemplate: podSpecTemplate},
	{GroupKind: gk("apps", "DaemonSet"), Version: "v1", Resource: "daemonsets", Namespaced: true, PodTemplate: podSpecTemplate},
	{GroupKind: gk("apps", "StatefulSet"), Version: "v1", Resource: "statefulsets", Namespaced: true, PodTemplate: podSpecTemplate},
	{GroupKind: gk("batch", "Job"), Version: "v1", Resource: "jobs", Namespaced: true, PodTemplate: podSpecTemplate},
	{GroupKind: gk("policy", "PodDisruptionBudget"), Version: "v1", Resource: "poddisruptionbudgets", Namespaced: true},
	{GroupKind: gk("networking.k8s.io", "NetworkPolicy"), Version: "v1", Resource: "networkpolicies", Namespaced: true},
	{GroupKind: gk("security.openshift.io", "SecurityContextConstraints"), Version: "v1", Resource: "securitycontextconstraints", OpenShiftOnly: true},
	{GroupKind: gk("monitoring.coreos.com", "ServiceMonitor"), Version: "v1", Resource: "servicemonitors", Namespaced: true},
	{GroupKind: gk("monitoring.coreos.com", "PrometheusRule"), Version: "v1", Resource: "prometheusrules", Namespaced: true},
	{GroupKind: gk("", "ConfigMap"), Version: "v1", Resource: "configmaps", Namespaced: true},
	{GroupKind: gk("route.openshift.io", "Route"), Version: "v1", Resource: "routes", Namespaced: true, OpenShiftOnly: true},
	{GroupKind: gk("instancetype.kubevirt.io", "VirtualMachineClusterInstancetype"), Version: "v1beta1", Resource: "virtualmachineclusterinstancetypes"},
	{GroupKind: gk("instancetype.kubevirt.io", "VirtualMachineClusterPreference"), Version: "v1beta1", Resource: "virtualmachineclusterpreferences"},
}

func gk(group, kind string) schema.GroupKind { return schema.GroupKind{Group: group, Kind: kind} }

var (
	byGroupKind = map[schema.GroupKind]Info{}
	// byKind lists the non-core groups that have a kind of a given name.
	byKind = map[string][]Info{}
)

func init() {
	for i := range table {
		table[i].Order = i
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
		return Info{GroupKind: gk, Order: UnknownOrder}, false
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
