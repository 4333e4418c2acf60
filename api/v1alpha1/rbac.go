package v1alpha1

// The operator's RBAC, as controller-gen markers: `make manifests` writes
// them to config/rbac/role.yaml (ClusterRole manager-role). They live here
// until the controller (internal/controller) exists; config/rbac/README.md
// says why each rule is needed.
//
// The Installation API itself.
// +kubebuilder:rbac:groups=installstrategy.io,resources=installations,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=installstrategy.io,resources=installations/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=installstrategy.io,resources=installations/finalizers,verbs=update
//
// What a strategy contains (one rule per group of pkg/kinds' table).
// +kubebuilder:rbac:groups="",resources=namespaces;serviceaccounts;services;secrets;configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles;clusterrolebindings;roles;rolebindings,verbs=get;list;watch;create;update;patch;delete;escalate;bind
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations;validatingadmissionpolicies;validatingadmissionpolicybindings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apiregistration.k8s.io,resources=apiservices,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apps,resources=deployments;daemonsets;statefulsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=priorityclasses,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=servicemonitors;prometheusrules,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=security.openshift.io,resources=securitycontextconstraints,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=route.openshift.io,resources=routes,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=instancetype.kubevirt.io,resources=virtualmachineclusterinstancetypes;virtualmachineclusterpreferences,verbs=get;list;watch;create;update;patch;delete
//
// Rollout checks: pods carry the target version annotations.
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
//
// Dump Jobs.
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;update;patch;delete
//
// Workloads of the sample product, for uninstallStrategy.
// +kubebuilder:rbac:groups=sample.installstrategy.io,resources=widgets;gadgets,verbs=get;list;watch;delete
//
// Events and leader election.
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=installstrategy-system,resources=leases,verbs=get;list;watch;create;update;patch;delete
