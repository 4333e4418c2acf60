// Package metakeys is the one home of the metadata vocabulary of
// installstrategy: every label, annotation, field-manager name and
// managed-by value it writes or reads on Kubernetes objects, its own
// ("installstrategy.io/...") and those of the tools it works beside
// (KubeVirt, Helm, the recommended app.kubernetes.io labels).
//
// It imports nothing of the project, so every package can use it. A key is
// declared here once and nowhere else; test/architecture fails when an
// "installstrategy.io/..." or "kubevirt.io/..." key literal appears in
// another package (test files and api/v1alpha1 aside).
//
// Names follow the key: the part after the slash, then Label, Annotation
// or FieldManager; keys of another tool start with its name (KubeVirt,
// Helm, App).
package metakeys

// The recommended labels (app.kubernetes.io) and managed-by values.
const (
	// ManagedByLabel is the standard label naming the tool that wrote an
	// object. KubeVirt strips it from the objects of a strategy; the
	// reconciler puts it on every object it applies.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedBy is its value on every object an installation applies and
	// on the strategy ConfigMaps installstrategy writes.
	ManagedBy = "installstrategy"
	// KubeVirtManagedBy is the value KubeVirt's virt-operator writes.
	KubeVirtManagedBy = "virt-operator"
	// HelmManagedBy is the value Helm puts on every object of a release.
	HelmManagedBy = "Helm"
	// AppPartOfLabel, AppNameLabel, AppComponentLabel and AppVersionLabel
	// are the recommended labels every object of a generated product
	// carries (pkg/generate).
	AppPartOfLabel    = "app.kubernetes.io/part-of"
	AppNameLabel      = "app.kubernetes.io/name"
	AppComponentLabel = "app.kubernetes.io/component"
	AppVersionLabel   = "app.kubernetes.io/version"
)

// Field managers.
const (
	// FieldManager is the server-side apply field manager of the
	// reconciler when apply.Options.FieldManager is "".
	FieldManager = "installstrategy"
	// HelmAdoptFieldManager writes the removal of Helm's ownership
	// annotations when a release is retired (pkg/helmrelease).
	HelmAdoptFieldManager = "installstrategy-helm-adopt"
	// AdoptionFieldManager writes AdoptedAnnotation on a system object an
	// installation adopts: a manager of its own, so that the reconciler's
	// applies, which never carry the annotation, do not remove it.
	AdoptionFieldManager = "installstrategy-adoption"
	// APIServerFieldManager is the field manager of the API server's own
	// writes (its bootstrap objects).
	APIServerFieldManager = "kube-apiserver"
	// KubeVirtFieldManager is virt-operator's field manager: its client's
	// user agent, the binary's name (virt-operator in its image; a local
	// build of /work/shared/tools/virtoperator is named
	// virt-operator-v1.9.0, and that is what the takeover of a real run
	// met). The test environment writes as it (internal/testenv).
	KubeVirtFieldManager = "virt-operator-v1.9.0"
)

// Keys of the strategy ConfigMaps KubeVirt writes, and the identity
// annotations virt-operator puts on the objects it applies.
const (
	// KubeVirtLabel is KubeVirt's component label ("kubevirt.io":
	// "virt-api", ...) on its objects and pods.
	KubeVirtLabel                = "kubevirt.io"
	KubeVirtStrategyLabel        = "kubevirt.io/install-strategy"
	KubeVirtVersionAnnotation    = "kubevirt.io/install-strategy-version"
	KubeVirtRegistryAnnotation   = "kubevirt.io/install-strategy-registry"
	KubeVirtIdentifierAnnotation = "kubevirt.io/install-strategy-identifier"
	KubeVirtEncodingAnnotation   = "kubevirt.io/install-strategy-cm-encoding"
	// KubeVirtGenerationAnnotation and KubeVirtCustomizerAnnotation are
	// what virt-operator also puts on the objects it applies.
	KubeVirtGenerationAnnotation = "kubevirt.io/generation"
	KubeVirtCustomizerAnnotation = "kubevirt.io/customizer-identifier"
	// KubeVirtMigrationCNTypesLabel marks the Secret of KubeVirt's
	// migration certificates that supports its CN types.
	KubeVirtMigrationCNTypesLabel = "kubevirt.io/supports-migration-cn-types"
	// KubeVirtChooseMeLabel is the label the KubeVirt example's placement
	// validation webhook selects its test objects by.
	KubeVirtChooseMeLabel = "kubevirt.io/choose-me"
	// KubeVirtFinalizer is virt-operator's finalizer on the KubeVirt CR
	// (since v1.9.0; KubeVirtOldFinalizer before), removed by
	// virt-operator once it has uninstalled KubeVirt (the KubeVirt example
	// removes both when it replaced virt-operator).
	KubeVirtFinalizer    = "kubevirt.io/foregroundDeleteKubeVirt"
	KubeVirtOldFinalizer = "foregroundDeleteKubeVirt"
)

// Keys of the native form of a strategy ConfigMap (pkg/codec, pkg/store).
const (
	StrategyLabel         = "installstrategy.io/strategy"
	VersionAnnotation     = "installstrategy.io/version"
	RegistryAnnotation    = "installstrategy.io/registry"
	IdentifierAnnotation  = "installstrategy.io/identifier"
	EncodingAnnotation    = "installstrategy.io/encoding"
	DigestAnnotation      = "installstrategy.io/digest"
	DecodedSizeAnnotation = "installstrategy.io/decoded-size"
	// ProductAnnotation names the product a strategy is of, e.g.
	// "kubevirt": OCI artifacts and signed statements carry it, so a
	// strategy signed for one product is not taken for another's.
	ProductAnnotation = "installstrategy.io/product"
	// ChunksAnnotation marks the head of a strategy stored in chunk
	// ConfigMaps (see pkg/store); its text is not in the head itself. Its
	// value lists the chunks' names and the sha256 of each part.
	ChunksAnnotation = "installstrategy.io/chunks"
	// ChunkLabel marks a chunk ConfigMap of a strategy stored in chunks.
	ChunkLabel = "installstrategy.io/strategy-chunk"
	// ChunkIndexAnnotation on a chunk is its 0-based position.
	ChunkIndexAnnotation = "installstrategy.io/chunk-index"
	// ChunkOfAnnotation on a chunk is the digest of the whole decoded text
	// of the strategy it belongs to (informational; the head is the
	// authority).
	ChunkOfAnnotation = "installstrategy.io/chunk-of"
	// SignatureAnnotation is a signature over the digest of the decoded
	// text: base64 of an ASN.1 ECDSA P-256 signature over its SHA-256,
	// cosign's keyed blob signature (see pkg/trust). It may be on a
	// KubeVirt-form ConfigMap too.
	SignatureAnnotation = "installstrategy.io/signature"
	// SignatureKeyAnnotation is the id of the key that made the signature:
	// "sha256:" of the public key's PKIX DER.
	SignatureKeyAnnotation = "installstrategy.io/signature-key"
	// IdentitySignatureAnnotation is a signature, by the same key, over
	// codec.IdentityDigest: it binds a signed text to the namespace and
	// identity it is stored for, so a signed strategy copied under another
	// identifier or into another namespace does not verify. The operator's
	// store writes and requires it.
	IdentitySignatureAnnotation = "installstrategy.io/signature-identity"
	// StatementAnnotation is a signed statement of what the strategy is
	// (pkg/trust.Statement as JSON: product, version, registry,
	// identifier, text digest), and StatementSignatureAnnotation its
	// signature by the key of SignatureKeyAnnotation (base64 ASN.1 ECDSA
	// over the SHA-256 of the annotation's bytes). Unlike the identity
	// signature it names no namespace, so a release can be signed
	// offline; the operator requires it of signed configMap sources, so a
	// signed older release put under the named ConfigMap is seen as what
	// it is.
	StatementAnnotation          = "installstrategy.io/statement"
	StatementSignatureAnnotation = "installstrategy.io/statement-signature"
	// HelmChartAnnotation, HelmChartVersionAnnotation and
	// HelmAppVersionAnnotation name the chart a strategy rendered from a
	// chart came from: its name, version and appVersion (absent when the
	// chart has none).
	HelmChartAnnotation        = "installstrategy.io/helm-chart"
	HelmChartVersionAnnotation = "installstrategy.io/helm-chart-version"
	HelmAppVersionAnnotation   = "installstrategy.io/helm-app-version"
	// PlacementProperty is the additional property under which the
	// KubeVirt identity algorithm hashes a configuration's Placement
	// (pkg/identity).
	PlacementProperty = "installstrategy.io/placement"
)

// Keys the reconciler writes on the objects it applies (pkg/apply,
// pkg/engine).
const (
	// InstallationLabel holds the installation's name (or, when the name
	// is not a valid label value, a hash of it; see inventory.Owner).
	InstallationLabel = "installstrategy.io/installation"
	// InstallationNamespaceLabel holds the installation's namespace.
	InstallationNamespaceLabel = "installstrategy.io/installation-namespace"
	// InstallStrategyVersionAnnotation records the target version an
	// object was applied for (on the object and its pod template).
	InstallStrategyVersionAnnotation = "installstrategy.io/install-strategy-version"
	// InstallStrategyRegistryAnnotation records the target registry.
	InstallStrategyRegistryAnnotation = "installstrategy.io/install-strategy-registry"
	// InstallStrategyIdentifierAnnotation records the target deployment
	// identifier.
	InstallStrategyIdentifierAnnotation = "installstrategy.io/install-strategy-identifier"
	// ImplicitAnnotation marks an object the reconciler adds to a strategy
	// (a Namespace its objects live in that it does not define): created
	// as the installation's when absent, never adopted when it exists.
	ImplicitAnnotation = "installstrategy.io/implicit"
	// AppliedHashAnnotation holds the hash of what was last applied; with
	// the managed-by label it marks an object as written by the
	// reconciler.
	AppliedHashAnnotation = "installstrategy.io/applied-hash"
	// KeptTemplateAnnotation, on a workload, says that its live pod
	// template was kept in place of the strategy's, because it already
	// held the strategy's when the workload was adopted (see
	// apply.Applier.Prepare); its value is the hash of the template that
	// was not written (the strategy's, with the identity annotations), so
	// that the template is kept only while the strategy and the identity
	// stay the same.
	KeptTemplateAnnotation = "installstrategy.io/kept-pod-template"
	// CertificateHashAnnotation is put on the pod template of a workload
	// that mounts certificates the reconciler issues: a hash of them, so a
	// renewed certificate rolls the workload's pods.
	CertificateHashAnnotation = "installstrategy.io/certificate-hash"
	// KeptCertificateAnnotation, on a TLS Secret of a strategy, holds the
	// hash of the certificate it kept from the installer it was adopted
	// from.
	KeptCertificateAnnotation = "installstrategy.io/kept-certificate"
	// RoleAnnotation names the role of a workload in its product
	// (kinds.Role). The reconciler orders rollouts by it: api first on
	// create and last on update, handler DaemonSets first (canary) on
	// update.
	RoleAnnotation = "installstrategy.io/role"
	// ResourcePolicyAnnotation is installstrategy's own resource policy
	// annotation; its only policy is "keep" (inventory.KeepPolicy): the
	// object is never deleted by prune or uninstall.
	ResourcePolicyAnnotation = "installstrategy.io/resource-policy"
)

// Keys of the inventory, history and revision ConfigMaps.
const (
	// InventoryLabel marks inventory ConfigMaps.
	InventoryLabel = "installstrategy.io/inventory"
	// OwnerKindAnnotation records who drives the installation
	// (inventory.KindInstallation or KindPlugin).
	OwnerKindAnnotation = "installstrategy.io/owner-kind"
	// InstallationAnnotation records the installation's full name on its
	// inventory (InstallationLabel may hold a hash).
	InstallationAnnotation = "installstrategy.io/installation"
	// ReleasedAnnotation marks the inventory of an installation that was
	// uninstalled but kept its CRDs: it still lists them (a later
	// uninstall can remove them), but it no longer holds the product's
	// cluster-scoped objects against another installation.
	ReleasedAnnotation = "installstrategy.io/released"
	// HooksRanAnnotation records the strategy whose Helm hooks ran last: a
	// reconcile of the same strategy runs them no more.
	HooksRanAnnotation = "installstrategy.io/hooks-ran"
	// HistoryLabel marks history ConfigMaps.
	HistoryLabel = "installstrategy.io/history"
	// AnchorAnnotationPrefix starts the Namespace annotation that anchors
	// the revisions of one plugin installation; the rest is the
	// installation's name label value (inventory.Owner.NameValue).
	AnchorAnnotationPrefix = "revisions.installstrategy.io/"
	// RevisionOfLabel marks the ConfigMaps in which the plugin keeps the
	// strategies its installations ran, for rollback.
	RevisionOfLabel = "installstrategy.io/revision-of"
	// DumpJobLabel marks dump Jobs and their pods (pkg/loader); a dump
	// Job's IdentifierAnnotation is the identifier it dumps.
	DumpJobLabel = "installstrategy.io/dump-job"
	// StrategyConfigMapAnnotation and StrategyDigestAnnotation on a
	// KubeVirt CR name a strategy ConfigMap of its namespace and the
	// sha256 of its text (examples/kubevirt-operator).
	StrategyConfigMapAnnotation = "installstrategy.io/strategy-configmap"
	StrategyDigestAnnotation    = "installstrategy.io/strategy-digest"
	// AdoptedAnnotation on a system object (pkg/inventory) says an
	// installation took it over rather than created it; its value is the
	// installation's NAMESPACE/NAME. It is kept on the object itself because
	// the inventory's adopted mark is in a ConfigMap a namespace editor may
	// write: either mark keeps the object from being deleted unless
	// consent names it.
	AdoptedAnnotation = "installstrategy.io/adopted"
	// AllowCRDChangeAnnotation on a KubeVirt CR accepts CRD changes the
	// upgrade preflight refuses, as an Installation's spec.crdSafety.allow
	// does: comma-separated CRD=RULE pairs, the plugin's
	// --allow-crd-change form (examples/kubevirt-operator).
	AllowCRDChangeAnnotation = "installstrategy.io/allow-crd-change"
)

// Helm's keys, and what retiring a Helm release writes (pkg/helmrelease,
// pkg/plan's hooks, pkg/inventory's resource policy).
const (
	// HelmReleaseNameAnnotation and HelmReleaseNamespaceAnnotation are
	// Helm's ownership annotations on every object of a release.
	HelmReleaseNameAnnotation      = "meta.helm.sh/release-name"
	HelmReleaseNamespaceAnnotation = "meta.helm.sh/release-namespace"
	// HelmResourcePolicyAnnotation is Helm's resource policy.
	HelmResourcePolicyAnnotation = "helm.sh/resource-policy"
	// HelmHookAnnotation lists the events a hook runs on (comma
	// separated).
	HelmHookAnnotation = "helm.sh/hook"
	// HelmHookWeightAnnotation orders the hooks of one event (an integer,
	// lower first; anything else counts as 0, as in Helm).
	HelmHookWeightAnnotation = "helm.sh/hook-weight"
	// HelmHookDeletePolicyAnnotation lists when a hook's object is deleted.
	HelmHookDeletePolicyAnnotation = "helm.sh/hook-delete-policy"
	// HelmReleaseSecretType is the type of Helm's release Secrets.
	HelmReleaseSecretType = "helm.sh/release.v1"
	// HelmReleaseBackupSecretType is the type of the Secret that keeps a
	// retired release's Secrets, one data key per release Secret (its
	// name), holding Helm's encoded release as it was.
	HelmReleaseBackupSecretType = "installstrategy.io/helm-release-backup"
	// HelmReleaseLabel on that Secret holds the release name.
	HelmReleaseLabel = "installstrategy.io/helm-release"
	// HelmReleaseSourceAnnotation on a strategy made from a release names
	// the release.
	HelmReleaseSourceAnnotation = "installstrategy.io/helm-release-source"
)

// Kubernetes' own marks installstrategy reads.
const (
	// BootstrappingLabel marks the objects the API server creates for
	// itself (the RBAC defaults: cluster-admin, admin, edit, view, the
	// system: roles and bindings), and which it reconciles at each start.
	BootstrappingLabel = "kubernetes.io/bootstrapping"
)

// Keys of the test harness (internal/localcluster, internal/testenv).
const (
	// TestBehaviourLabel is the pod label that selects a kwok test
	// behaviour (localcluster.Behaviour).
	TestBehaviourLabel = "installstrategy.io/test-behaviour"
	// TestTerminationMessageAnnotation on a pod with the await-result
	// behaviour is the termination message its containers end with.
	TestTerminationMessageAnnotation = "installstrategy.io/test-termination-message"
	// RealNodeLabel (value "true") marks the real node of a local cluster;
	// the taint of the same key keeps every pod that does not tolerate it
	// away from it.
	RealNodeLabel = "installstrategy.io/real-node"
	RealNodeTaint = "installstrategy.io/real-node"
	// FakeNodeLabel (value "true") marks every kwok node.
	FakeNodeLabel = "installstrategy.io/fake-node"
	// TestNamespaceLabel marks the namespaces tests make.
	TestNamespaceLabel = "installstrategy.io/test"
)
