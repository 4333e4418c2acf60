package v1alpha1

// The operator's RBAC, as controller-gen markers: `make manifests` writes
// them to config/rbac/role.yaml (ClusterRole installstrategy-operator, and a
// Role of that name in installstrategy-system for leader election). They live
// in this package until the controller (pkg/operator) exists. Every
// rule says why it is needed; keep it so when adding one.
//
// Honest scope: the operator applies whatever an install strategy contains,
// in whatever namespace an Installation lives in, so it needs write access
// to every kind of pkg/kinds' table cluster-wide, including Secrets. Most
// importantly, a strategy carries ClusterRoles and bindings for the
// product; to create a role granting permissions the operator does not hold
// itself, and to bind it, the API server requires the escalate and bind
// verbs. With them the operator could grant itself anything: this
// ClusterRole is, in effect, cluster-admin, as virt-operator's is. Install
// the operator only where a cluster-admin would be trusted, and keep its
// strategy sources (images, ConfigMaps) under the same control.
//
// The Installation API: watch Installations, write their status, and add
// and remove the uninstall finalizer (finalizers subresource, for clusters
// with OwnerReferencesPermissionEnforcement).
// +kubebuilder:rbac:groups=installstrategy.io,resources=installations,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=installstrategy.io,resources=installations/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=installstrategy.io,resources=installations/finalizers,verbs=update
//
// Core objects a strategy contains (Namespaces, ServiceAccounts, Services,
// the empty TLS Secrets the operator fills with issued certificates, and
// ConfigMaps, which are also where strategies are stored and chunked).
// +kubebuilder:rbac:groups="",resources=namespaces;serviceaccounts;services;secrets;configmaps,verbs=get;list;watch;create;update;patch;delete
//
// RBAC a strategy contains, and the Role and RoleBinding of each dump Job.
// escalate: create or update a (Cluster)Role with rules the operator does
// not hold; bind: bind a role the operator does not hold.
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles;clusterrolebindings;roles;rolebindings,verbs=get;list;watch;create;update;patch;delete;escalate;bind
//
// The product's CRDs: applied first and waited on until Established;
// deleted only with spec.pruneCRDs.
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch;create;update;patch;delete
//
// Admission: webhooks (the operator injects its CA bundle) and validating
// admission policies; pruned first after a rollover.
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations;validatingadmissionpolicies;validatingadmissionpolicybindings,verbs=get;list;watch;create;update;patch;delete
//
// Aggregated APIServices (CA bundle injected, Available checked).
// +kubebuilder:rbac:groups=apiregistration.k8s.io,resources=apiservices,verbs=get;list;watch;create;update;patch;delete
//
// The product's workloads, rolled out and checked for rollover; the
// DaemonSet's maxUnavailable is patched during a canary rollout.
// +kubebuilder:rbac:groups=apps,resources=deployments;daemonsets;statefulsets,verbs=get;list;watch;create;update;patch;delete
//
// The remaining rows of the kind table. The monitoring.coreos.com,
// OpenShift and KubeVirt instancetype kinds are applied only when the
// cluster serves them (real KubeVirt strategies carry them).
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=priorityclasses,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=servicemonitors;prometheusrules,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=security.openshift.io,resources=securitycontextconstraints,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=route.openshift.io,resources=routes,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=instancetype.kubevirt.io,resources=virtualmachineclusterinstancetypes;virtualmachineclusterpreferences,verbs=get;list;watch;create;update;patch;delete
// The other built-in kinds of the kind table (pkg/kinds):
// +kubebuilder:rbac:groups="",resources=resourcequotas;limitranges;persistentvolumes;persistentvolumeclaims,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=flowcontrol.apiserver.k8s.io,resources=prioritylevelconfigurations;flowschemas,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses;csidrivers,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=node.k8s.io,resources=runtimeclasses,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingressclasses;ingresses,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=batch,resources=cronjobs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;list;watch;create;update;patch;delete
//
// Read-only pods: rollover checks read the version annotations and
// readiness of every pod of a workload; a failed dump Job is explained by
// its pod's status and the tail of its log.
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods/log,verbs=get
//
// Jobs: dump Jobs are created in the install namespace, watched until
// complete or failed, and deleted afterwards (background propagation
// deletes their pods); an uninstall deletes whatever dump Jobs are left
// with one deletecollection; a strategy may also contain Jobs, which are
// applied.
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;update;patch;delete;deletecollection
//
// The sample product's workloads (its custom resources): listed for
// uninstallStrategy BlockUninstallIfWorkloadsExist, deleted for
// RemoveWorkloads. A product with other CRDs needs its own rule here.
// +kubebuilder:rbac:groups=sample.installstrategy.io,resources=widgets;gadgets,verbs=get;list;watch;delete
//
// Events: recorded on Installations (e.g. FailedUpdate when a canary
// crash-loops); the dump Job's events are read to explain its failure.
// +kubebuilder:rbac:groups="",resources=events,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
//
// The metrics endpoint serves only callers the API server authenticates
// and authorizes for GET /metrics (operator.MetricsAuthFilter): a
// TokenReview and a SubjectAccessReview per caller and minute. A scraper
// needs the installstrategy-metrics-reader ClusterRole
// (config/rbac/metrics_reader_role.yaml).
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
//
// Leader election, only in the operator's own namespace (a Role, not a
// ClusterRole).
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=installstrategy-system,resources=leases,verbs=get;list;watch;create;update;patch;delete
