package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Installation is one installed product: the operator loads the install
// strategy of the target configuration in spec, reconciles it into the
// Installation's namespace (the install namespace) and the cluster, and
// reports progress in status. It is KubeVirt's KubeVirt resource, for any
// product.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=inst,categories=installstrategy
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.observedVersion`,description="Version that is fully deployed"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`
// +kubebuilder:printcolumn:name="Progressing",type=string,JSONPath=`.status.conditions[?(@.type=="Progressing")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Installation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired installation.
	// +kubebuilder:default={}
	// +optional
	Spec InstallationSpec `json:"spec,omitempty"`
	// Status is what the operator observed and did. It defaults to
	// observedGeneration 0, so that a new Installation reads as not yet
	// observed (kstatus InProgress) until the operator writes its status.
	// +kubebuilder:default={observedGeneration: 0}
	// +optional
	Status InstallationStatus `json:"status,omitempty"`
}

// InstallationList is a list of Installations.
//
// +kubebuilder:object:root=true
type InstallationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the Installations.
	Items []Installation `json:"items"`
}

// InstallationSpec is the target configuration of an Installation. Every
// field that changes the product's manifests (version, registry, image
// prefix, pull policy and secrets, customizeComponents, placement) is part
// of the strategy's identity, so changing it loads or dumps another
// strategy and rolls the product over to it.
type InstallationSpec struct {
	// Version is the product version to install, also the image tag of its
	// components, e.g. "v1.2.0". Empty means the operator's own version.
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_][A-Za-z0-9_.+-]*$`
	// +optional
	Version string `json:"version,omitempty"`
	// Registry is the image registry of the product's components, e.g.
	// "quay.io/example". Empty means the operator's own registry.
	// +kubebuilder:validation:MaxLength=255
	// +optional
	Registry string `json:"registry,omitempty"`
	// ImagePrefix is put before every component name in image names:
	// <registry>/<imagePrefix><component>:<version>.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	ImagePrefix string `json:"imagePrefix,omitempty"`
	// ImagePullPolicy of the product's containers and of dump Jobs.
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +kubebuilder:default=IfNotPresent
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	// ImagePullSecrets, in the install namespace, given to the product's pods
	// and to dump Jobs.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// Strategy says where the install strategy comes from: the operator's
	// own product (the default), a dump Job of another operator image, or
	// an existing strategy ConfigMap.
	// +kubebuilder:default={product: {}}
	// +optional
	Strategy *StrategySource `json:"strategy,omitempty"`

	// CustomizeComponents patches objects of the strategy before they are
	// applied. The patches are part of the strategy's identity.
	// +optional
	CustomizeComponents *CustomizeComponents `json:"customizeComponents,omitempty"`

	// Infra places the control-plane components (api and controller roles).
	// +optional
	Infra *NodePlacement `json:"infra,omitempty"`
	// Workloads places the per-node components (handler role, DaemonSets).
	// +optional
	Workloads *NodePlacement `json:"workloads,omitempty"`

	// Canary paces the update of per-node DaemonSets.
	// +kubebuilder:default={}
	// +optional
	Canary *CanarySpec `json:"canary,omitempty"`

	// HistoryLimit is how many rolled-out strategies status.history keeps
	// (and garbage collection keeps stored with them, for rollback); 0
	// means 5.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	HistoryLimit int32 `json:"historyLimit,omitempty"`

	// UninstallStrategy says what deleting the Installation does while
	// custom resources of the product's CRDs (its workloads) still exist.
	// +kubebuilder:default=BlockUninstallIfWorkloadsExist
	// +optional
	UninstallStrategy UninstallStrategy `json:"uninstallStrategy,omitempty"`

	// CertificateRotation sets the lifetimes of the self-signed CA and of
	// the serving certificates the operator issues for the product's
	// webhooks and APIServices.
	// +kubebuilder:default={}
	// +optional
	CertificateRotation *CertificateRotation `json:"certificateRotation,omitempty"`

	// PruneCRDs lets the operator delete CustomResourceDefinitions that the
	// target strategy no longer contains (and, on uninstall, all of the
	// product's CRDs). Deleting a CRD deletes every custom resource of it,
	// so CRDs are never pruned unless this is true; and a rollout that
	// would prune one that still stores objects (other than the product's
	// own) is refused before any write (CRDChangeRefused) unless
	// crdSafety.allow names the CRD with rule crdPruned. The uninstall is
	// not judged so.
	// +optional
	PruneCRDs bool `json:"pruneCRDs,omitempty"`

	// Adopt lets the operator take over existing objects of the strategy
	// that no installation owns (installed by kubectl apply, Helm or a
	// person): they are relabelled as this Installation's, their fields
	// become the operator's, and from then on they are upgraded and pruned
	// like objects it created. Objects of another installation are never
	// adopted; without this, such objects are conflicts.
	// +optional
	Adopt bool `json:"adopt,omitempty"`

	// AllowDowngrade lets a source whose version the Installation does not
	// name (an OCI tag, a ConfigMap) roll the product back to an older
	// semantic version than the one deployed. Without it such a strategy
	// is refused (UntrustedStrategy): a signed older release put in the
	// place of the current one is a rollback attack. Naming the version in
	// spec.version allows that version.
	// +optional
	AllowDowngrade bool `json:"allowDowngrade,omitempty"`

	// CRDSafety accepts CRD changes the upgrade preflight refuses. Before
	// the first write of a rollout, every CRD of the target strategy is
	// compared with the live one and with the custom resources stored in
	// the cluster; a change that loses or invalidates what they hold
	// (docs/UPGRADES.md) is refused (Degraded, reason CRDChangeRefused; Stalled)
	// unless named here.
	// +optional
	CRDSafety *CRDSafety `json:"crdSafety,omitempty"`

	// UpgradePath says what happens when the target strategy's declared
	// upgradeFrom range does not admit the deployed version. Refuse (the
	// default) refuses the upgrade before any write. Walk lists the
	// versions the source offers (an oci or helm source: the tags of its
	// repository, at most 1000; a configMap source: the strategy
	// ConfigMaps of the namespace), loads those between the deployed one
	// and the target through the same trust as the target (a signature by
	// a trusted key for the product and that version; a pinned digest
	// vouches only for the target), and rolls out the shortest chain of
	// them, each fully rolled over before the next (docs/UPGRADES.md).
	// +kubebuilder:validation:Enum=Refuse;Walk
	// +optional
	UpgradePath UpgradePathPolicy `json:"upgradePath,omitempty"`
}

// UpgradePathPolicy says whether an upgrade outside the target's
// upgradeFrom range is refused or walked.
type UpgradePathPolicy string

// Upgrade path policies.
const (
	UpgradePathRefuse UpgradePathPolicy = "Refuse"
	UpgradePathWalk   UpgradePathPolicy = "Walk"
)

// CRDSafety accepts named unsafe CRD changes.
type CRDSafety struct {
	// Allow accepts the findings of one rule on one CRD each.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	Allow []CRDChangeAllowance `json:"allow,omitempty"`
}

// CRDChangeAllowance accepts one rule's findings on one CRD.
type CRDChangeAllowance struct {
	// CRD is the CustomResourceDefinition's name, e.g. things.example.com.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	CRD string `json:"crd"`
	// Rule is the rule accepted (crdPruned: a CRD pruneCRDs would delete
	// that still stores objects).
	// +kubebuilder:validation:Enum=scope;storedVersionRemoved;servedVersionRemoved;fieldRemoved;typeChanged;enumTightened;boundTightened;requiredAdded;defaultChanged;crdPruned
	Rule string `json:"rule"`
}

// StrategySourceType names the kind of a strategy source.
type StrategySourceType string

// Strategy source types; exactly one is set in a StrategySource.
const (
	// StrategySourceProduct is the operator's own built-in product.
	StrategySourceProduct StrategySourceType = "Product"
	// StrategySourceImage is a dump Job running another operator image.
	StrategySourceImage StrategySourceType = "Image"
	// StrategySourceConfigMap is an existing strategy ConfigMap.
	StrategySourceConfigMap StrategySourceType = "ConfigMap"
	// StrategySourceOCI is a strategy artifact in an OCI registry.
	StrategySourceOCI StrategySourceType = "OCI"
	// StrategySourceHelm is a Helm chart in an OCI registry, rendered by
	// the operator.
	StrategySourceHelm StrategySourceType = "Helm"
)

// StrategySource says where the install strategy comes from. Exactly one
// of its members is set.
//
// +kubebuilder:validation:XValidation:rule="[has(self.product), has(self.image), has(self.configMap), has(self.oci), has(self.helm)].filter(x, x).size() == 1",message="exactly one of product, image, configMap, oci or helm must be set"
type StrategySource struct {
	// Product selects the strategy of the operator's own built-in product,
	// generated in process (or dumped by the operator's own image when the
	// target version is not the operator's).
	// +optional
	Product *ProductStrategySource `json:"product,omitempty"`
	// Image is an operator image whose --dump-install-strategy mode writes
	// the strategy, run as a dump Job in the install namespace, e.g.
	// "quay.io/example/installstrategy-operator:v1.2.0".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Image string `json:"image,omitempty"`
	// ConfigMap names an existing strategy ConfigMap (native, chunked head
	// or KubeVirt form) in the install namespace.
	// +optional
	ConfigMap *ConfigMapStrategySource `json:"configMap,omitempty"`
	// OCI is a strategy artifact in an OCI registry (pushed with `kubectl
	// installstrategy publish oci://...`).
	// +optional
	OCI *OCIStrategySource `json:"oci,omitempty"`
	// Helm is a Helm chart in an OCI registry that the operator renders
	// (client-only, as helm template does) with values given here.
	// +optional
	Helm *HelmStrategySource `json:"helm,omitempty"`
}

// HelmStrategySource is a Helm chart in an OCI registry (pushed with helm
// push), rendered by the operator with the values of this Installation
// only. The chart is rendered only when its manifest digest is pinned
// here, or when a cosign signature by a trusted key binds that digest to
// the product (and spec.version, when set), as for an OCI source. Its
// strategy's version is spec.version, else the chart's version; its
// identifier hashes the chart's digest and the values, so changing the
// values is a new strategy.
type HelmStrategySource struct {
	// Chart is oci://HOST/REPOSITORY/CHART:TAG or
	// oci://HOST/REPOSITORY/CHART@sha256:DIGEST, the form helm itself
	// takes for OCI charts.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^oci://[^\s]+$`
	// +required
	Chart string `json:"chart"`
	// Digest pins the chart: the "sha256:" digest of its OCI manifest. A
	// pinned chart is rendered without a signature; a tag that moves
	// elsewhere is refused.
	// +kubebuilder:validation:Pattern=`^sha256:[a-f0-9]{64}$`
	// +optional
	Digest string `json:"digest,omitempty"`
	// Product is the product the signature must name; empty means the
	// chart's name (the repository's last path element).
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Product string `json:"product,omitempty"`
	// Verify, when set, names the only keys that vouch for this source:
	// the operator-wide trusted keys are then not used (one vendor's key
	// cannot vouch for another vendor's product).
	// +optional
	Verify *VerifySource `json:"verify,omitempty"`
	// SecretRef names a kubernetes.io/dockerconfigjson Secret in the
	// install namespace with the registry's credentials; empty pulls
	// anonymously.
	// +optional
	SecretRef *corev1.LocalObjectReference `json:"secretRef,omitempty"`
	// Interval is how often the tag is resolved again; 0 means 5 minutes.
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`
	// Insecure allows plain HTTP to the registry.
	// +optional
	Insecure bool `json:"insecure,omitempty"`
	// ReleaseName is .Release.Name; empty means the chart's name.
	// +kubebuilder:validation:MaxLength=53
	// +optional
	ReleaseName string `json:"releaseName,omitempty"`
	// KubeVersion is .Capabilities.KubeVersion (e.g. v1.33.0); empty
	// means Helm's default. The render never asks the cluster.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	KubeVersion string `json:"kubeVersion,omitempty"`
	// SkipCRDs leaves the chart's crds/ folder out of the render, as helm
	// install --skip-crds does; CRDs among the chart's templates stay, as
	// with Helm. Changing it is a new strategy.
	// +optional
	SkipCRDs bool `json:"skipCRDs,omitempty"`
	// Values are the chart's values (as a values file would give them),
	// merged over the chart's values.yaml. They come from here only: no
	// Secret or ConfigMap is read for values.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +optional
	Values *apiextensionsv1.JSON `json:"values,omitempty"`
}

// OCIStrategySource is a strategy artifact in an OCI registry. The
// operator resolves the reference's tag to a digest with one manifest
// HEAD per poll, pulls only when the digest changed, and applies the
// artifact only when a cosign signature by a trusted key binds that
// digest to the product (and spec.version, when set), or when its digest
// is pinned here.
type OCIStrategySource struct {
	// Reference is oci://HOST/REPOSITORY:TAG or
	// oci://HOST/REPOSITORY@sha256:DIGEST.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^oci://[^\s]+$`
	// +required
	Reference string `json:"reference"`
	// Digest pins the artifact: the "sha256:" manifest digest. A pinned
	// artifact is applied without a signature; a tag that moves elsewhere
	// is refused.
	// +kubebuilder:validation:Pattern=`^sha256:[a-f0-9]{64}$`
	// +optional
	Digest string `json:"digest,omitempty"`
	// Product is the product the signature must name; empty means the
	// last path element of the repository (oci://ghcr.io/acme/kubevirt
	// is product "kubevirt").
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Product string `json:"product,omitempty"`
	// Verify, when set, names the only keys that vouch for this source:
	// the operator-wide trusted keys are then not used (one vendor's key
	// cannot vouch for another vendor's product).
	// +optional
	Verify *VerifySource `json:"verify,omitempty"`
	// SecretRef names a kubernetes.io/dockerconfigjson Secret in the
	// install namespace with the registry's credentials; empty pulls
	// anonymously.
	// +optional
	SecretRef *corev1.LocalObjectReference `json:"secretRef,omitempty"`
	// Interval is how often the tag is resolved again; 0 means 5 minutes.
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`
	// Mirrors are further references of the same artifact (copied with
	// `kubectl installstrategy copy`), tried in order when the reference's
	// registry cannot be reached. The digest and signature rules are the
	// same for every one of them.
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	// +optional
	Mirrors []string `json:"mirrors,omitempty"`
	// Insecure allows plain HTTP to the registry.
	// +optional
	Insecure bool `json:"insecure,omitempty"`
}

// ProductStrategySource selects the operator's own product. It has no
// fields yet; its presence is the choice.
type ProductStrategySource struct{}

// ConfigMapStrategySource names a strategy ConfigMap in the install
// namespace.
type ConfigMapStrategySource struct {
	// Name of the ConfigMap.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	Name string `json:"name"`
	// Digest pins the strategy: "sha256:" and the hex SHA-256 of its
	// decoded manifests text (what `kubectl installstrategy inspect` shows
	// and the native form records). A strategy that is not signed by a
	// trusted key is applied only when its text hashes to this digest;
	// a KubeVirt-form ConfigMap, which carries no signature, needs it.
	// +kubebuilder:validation:Pattern=`^sha256:[a-f0-9]{64}$`
	// +optional
	Digest string `json:"digest,omitempty"`
	// Product is the product a signed strategy's statement must name.
	// Empty means the product of the strategy deployed now
	// (status.strategy.product, the product its signed statement named):
	// the product changes only when this field says so. With neither (a
	// first install that names no product), any product is taken, and
	// recorded.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Product string `json:"product,omitempty"`
	// Verify, when set, names the only keys that vouch for this source:
	// the operator-wide trusted keys are then not used (one vendor's key
	// cannot vouch for another vendor's product).
	// +optional
	Verify *VerifySource `json:"verify,omitempty"`
}

// VerifySource names the keys that alone vouch for a strategy source, as
// Flux's spec.verify does.
type VerifySource struct {
	// KeysConfigMap names a ConfigMap in the operator's key namespace
	// (where only cluster administrators write, as for the trusted keys
	// ConfigMap) whose every data value is a PEM file of one or more
	// "PUBLIC KEY" blocks. Only its keys vouch for the source; a missing
	// or empty ConfigMap vouches for nothing.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	KeysConfigMap string `json:"keysConfigMap"`
}

// CustomizeComponents holds patches applied to the strategy's objects
// before they are applied to the cluster.
type CustomizeComponents struct {
	// Patches are applied in order, each to every object it matches.
	// +kubebuilder:validation:MaxItems=256
	// +listType=atomic
	// +optional
	Patches []CustomizePatch `json:"patches,omitempty"`
}

// PatchType is the format of a customization patch.
type PatchType string

// Patch types.
const (
	// JSONPatchType is an RFC 6902 JSON patch (a list of operations).
	JSONPatchType PatchType = "json"
	// MergePatchType is an RFC 7386 JSON merge patch.
	MergePatchType PatchType = "merge"
	// StrategicMergePatchType is a Kubernetes strategic merge patch.
	StrategicMergePatchType PatchType = "strategic"
)

// CustomizePatch patches the strategy objects of one kind and name.
type CustomizePatch struct {
	// ResourceKind is the kind of the objects to patch, e.g. "Deployment".
	// "*" matches every kind.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^(\*|[A-Z][A-Za-z0-9]*)$`
	// +required
	ResourceKind string `json:"resourceKind"`
	// ResourceName is the name of the objects to patch. "*" matches every
	// name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	ResourceName string `json:"resourceName"`
	// Type is the patch format: json, merge or strategic.
	// +kubebuilder:validation:Enum=json;merge;strategic
	// +required
	Type PatchType `json:"type"`
	// Patch is the patch document, JSON or YAML.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=65536
	// +required
	Patch string `json:"patch"`
}

// NodePlacement places pods on nodes.
type NodePlacement struct {
	// NodeSelector is added to the pods' node selector.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Affinity is merged into the pods' own: required node affinities must
	// both hold, other terms are added.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// Tolerations are added to the pods' tolerations.
	// +listType=atomic
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
}

// CanarySpec paces the update of a per-node DaemonSet: maxUnavailable is
// InitialMaxUnavailable until the first updated pod is ready (the canary),
// then StepPercent percent of the nodes, then back to InitialMaxUnavailable
// once the rollout is over. A crash-looping canary stops the rollout.
type CanarySpec struct {
	// InitialMaxUnavailable is the DaemonSet's maxUnavailable while the
	// canary pods start.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=1
	// +optional
	InitialMaxUnavailable int32 `json:"initialMaxUnavailable,omitempty"`
	// StepPercent is the DaemonSet's maxUnavailable, in percent of the
	// nodes, once the canary is ready.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=10
	// +optional
	StepPercent int32 `json:"stepPercent,omitempty"`
}

// UninstallStrategy says what deleting an Installation does while the
// product's workloads (custom resources of its CRDs) still exist.
//
// +kubebuilder:validation:Enum=RemoveWorkloads;BlockUninstallIfWorkloadsExist
type UninstallStrategy string

// Uninstall strategies.
const (
	// UninstallRemoveWorkloads deletes the product and its workloads.
	UninstallRemoveWorkloads UninstallStrategy = "RemoveWorkloads"
	// UninstallBlockIfWorkloadsExist keeps the Installation (and the
	// product) until its workloads are gone, with condition reason
	// UninstallBlocked. It is the default.
	UninstallBlockIfWorkloadsExist UninstallStrategy = "BlockUninstallIfWorkloadsExist"
)

// CertificateRotation sets the lifetimes of the certificates the operator
// issues. A serving certificate never outlives its CA.
//
// +kubebuilder:validation:XValidation:rule="!has(self.ca) || !has(self.server) || !has(self.ca.duration) || !has(self.server.duration) || duration(self.server.duration) <= duration(self.ca.duration)",message="server.duration must not exceed ca.duration"
type CertificateRotation struct {
	// CA is the self-signed certificate authority.
	// +kubebuilder:default={duration: "168h0m0s", renewBefore: "48h0m0s"}
	// +optional
	CA *CertificateConfig `json:"ca,omitempty"`
	// Server is every serving certificate signed by the CA.
	// +kubebuilder:default={duration: "24h0m0s", renewBefore: "8h0m0s"}
	// +optional
	Server *CertificateConfig `json:"server,omitempty"`
}

// CertificateConfig is the lifetime of one kind of certificate. Durations
// are Go durations, e.g. "168h" or "90m".
//
// +kubebuilder:validation:XValidation:rule="!has(self.duration) || duration(self.duration) > duration('0s')",message="duration must be positive"
// +kubebuilder:validation:XValidation:rule="!has(self.duration) || !has(self.renewBefore) || duration(self.renewBefore) < duration(self.duration)",message="renewBefore must be shorter than duration"
type CertificateConfig struct {
	// Duration is how long a new certificate is valid.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	Duration *metav1.Duration `json:"duration,omitempty"`
	// RenewBefore is how long before its expiry a certificate is renewed.
	// Empty means a fifth of Duration.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	RenewBefore *metav1.Duration `json:"renewBefore,omitempty"`
}

// InstallationPhase is the coarse state of an Installation.
//
// +kubebuilder:validation:Enum=Deploying;Deployed;Deleting;Deleted;Failed
type InstallationPhase string

// Installation phases (KubeVirt's, plus Failed).
const (
	// PhaseDeploying: the target strategy is being loaded, applied or
	// rolled out.
	PhaseDeploying InstallationPhase = "Deploying"
	// PhaseDeployed: every component of the target strategy is rolled over
	// and the objects it no longer contains are pruned.
	PhaseDeployed InstallationPhase = "Deployed"
	// PhaseDeleting: the product is being removed.
	PhaseDeleting InstallationPhase = "Deleting"
	// PhaseDeleted: the product is removed (or, for a second Installation
	// of a product, was never installed).
	PhaseDeleted InstallationPhase = "Deleted"
	// PhaseFailed: the operator cannot make progress without a change to
	// the spec or the cluster; the Degraded condition says why.
	PhaseFailed InstallationPhase = "Failed"
)

// InstallationStatus is what the operator observed and did.
type InstallationStatus struct {
	// Phase is the coarse state.
	// +optional
	Phase InstallationPhase `json:"phase,omitempty"`
	// Conditions are the detailed state: Available, Progressing, Degraded,
	// Created and Synchronized, and kstatus's Ready, Reconciling and
	// Stalled (see the Condition* and Reason* constants).
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
	// ObservedGeneration is the metadata.generation the status describes;
	// 0 until the operator first writes the status.
	// +kubebuilder:default=0
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// ObservedVersion is the version that is fully deployed.
	// +optional
	ObservedVersion string `json:"observedVersion,omitempty"`
	// ObservedRegistry is the registry of the fully deployed version.
	// +optional
	ObservedRegistry string `json:"observedRegistry,omitempty"`
	// ObservedIdentifier is the strategy identifier that is fully deployed.
	// +optional
	ObservedIdentifier string `json:"observedIdentifier,omitempty"`
	// TargetVersion is the version being deployed.
	// +optional
	TargetVersion string `json:"targetVersion,omitempty"`
	// TargetRegistry is the registry being deployed.
	// +optional
	TargetRegistry string `json:"targetRegistry,omitempty"`
	// TargetIdentifier is the identifier of the strategy being deployed.
	// +optional
	TargetIdentifier string `json:"targetIdentifier,omitempty"`

	// Strategy is where the target strategy was loaded from.
	// +optional
	Strategy *StrategyStatus `json:"strategy,omitempty"`

	// UpgradePath is the walk that spec.upgradePath Walk takes, or took,
	// through intermediate versions to the current target: the version
	// deployed when it began, each intermediate version, and the target,
	// e.g. [v1.0.0, v2.0.0, v3.0.0]. It is cleared when the target
	// changes, when the walk is left before it ends, and on a refusal.
	// The history records each version as it is fully rolled out.
	// +kubebuilder:validation:MaxItems=101
	// +listType=atomic
	// +optional
	UpgradePath []string `json:"upgradePath,omitempty"`

	// Components is the rollout progress of each workload of the target
	// strategy.
	// +listType=map
	// +listMapKey=kind
	// +listMapKey=name
	// +optional
	Components []ComponentStatus `json:"components,omitempty"`

	// History lists the strategies the Installation rolled out, newest
	// first, at most spec.historyLimit: what kubectl installstrategy
	// history shows and rollback returns to. Garbage collection keeps the
	// stored strategies it names.
	// +optional
	History []StrategyRevision `json:"history,omitempty"`
}

// StrategyRevision is one strategy an Installation rolled out.
type StrategyRevision struct {
	// Revision counts up from 1.
	Revision int32 `json:"revision"`
	// Version, Registry and Identifier are the strategy's identity.
	// +optional
	Version string `json:"version,omitempty"`
	// +optional
	Registry string `json:"registry,omitempty"`
	// +optional
	Identifier string `json:"identifier,omitempty"`
	// ConfigMap is the stored strategy (the head of a chunked one) in the
	// Installation's namespace.
	// +optional
	ConfigMap string `json:"configMap,omitempty"`
	// Digest is the "sha256:" digest of its manifests text.
	// +optional
	Digest string `json:"digest,omitempty"`
	// OCI is the artifact it was pulled from (HOST/REPOSITORY@DIGEST),
	// for source OCI.
	// +optional
	OCI string `json:"oci,omitempty"`
	// Chart is the chart it was rendered from (HOST/REPOSITORY@DIGEST),
	// for source Helm; ValuesDigest the "sha256:" digest of the values.
	// +optional
	Chart string `json:"chart,omitempty"`
	// +optional
	ValuesDigest string `json:"valuesDigest,omitempty"`
	// Source is the kind of source it came from.
	// +optional
	Source StrategySourceType `json:"source,omitempty"`
	// DeployedAt is when it was fully rolled out.
	DeployedAt metav1.Time `json:"deployedAt"`
}

// StrategyStatus records the strategy an Installation is deploying.
type StrategyStatus struct {
	// Source is the kind of source the strategy came from.
	// +kubebuilder:validation:Enum=Product;Image;ConfigMap;OCI;Helm
	// +optional
	Source StrategySourceType `json:"source,omitempty"`
	// OCI is the artifact the strategy was pulled from, for source OCI:
	// HOST/REPOSITORY@sha256:DIGEST (of the mirror it came from, when
	// the reference's registry could not be reached).
	// +optional
	OCI string `json:"oci,omitempty"`
	// Chart is the chart the strategy was rendered from, for source Helm:
	// HOST/REPOSITORY@sha256:DIGEST; ValuesDigest is the "sha256:" digest
	// of the values it was rendered with.
	// +optional
	Chart string `json:"chart,omitempty"`
	// +optional
	ValuesDigest string `json:"valuesDigest,omitempty"`
	// VerifiedBy says why the strategy was trusted: the trusted key whose
	// signature verified it, or "pinned digest".
	// +optional
	VerifiedBy string `json:"verifiedBy,omitempty"`
	// Product is the product the signed statement that vouched for the
	// strategy named ("" when it named none); absent when no statement
	// vouched (a pinned digest). A configMap source that names no
	// product expects the same product again.
	// +optional
	Product *string `json:"product,omitempty"`
	// Image is the operator image of the dump Job, for source Image.
	// +optional
	Image string `json:"image,omitempty"`
	// ConfigMap is the strategy ConfigMap (the head of a chunked one) the
	// strategy was loaded from.
	// +optional
	ConfigMap string `json:"configMap,omitempty"`
	// Digest is the "sha256:" digest of the strategy's manifests text.
	// +optional
	Digest string `json:"digest,omitempty"`
}

// ComponentStatus is the rollout progress of one workload.
type ComponentStatus struct {
	// Name of the workload.
	// +required
	Name string `json:"name"`
	// Kind of the workload: Deployment, DaemonSet, StatefulSet.
	// +required
	Kind string `json:"kind"`
	// Role of the workload in its product: api, controller or handler.
	// +optional
	Role string `json:"role,omitempty"`
	// Desired is the number of pods wanted.
	// +optional
	Desired int32 `json:"desired"`
	// Updated is the number of pods running the target version.
	// +optional
	Updated int32 `json:"updated"`
	// Ready is the number of ready pods.
	// +optional
	Ready int32 `json:"ready"`
	// RolledOver is true once every pod runs the target version and is
	// ready.
	// +optional
	RolledOver bool `json:"rolledOver"`
}
