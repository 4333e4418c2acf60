package v1alpha1

// ConditionType is the type of an Installation condition.
type ConditionType string

// Condition types (KubeVirt's).
const (
	// ConditionAvailable is True while every component of the deployed
	// strategy is ready.
	ConditionAvailable ConditionType = "Available"
	// ConditionProgressing is True while a strategy is being deployed,
	// updated or removed.
	ConditionProgressing ConditionType = "Progressing"
	// ConditionDegraded is True while something is wrong: the strategy
	// cannot be loaded, a rollout failed, an uninstall is blocked.
	ConditionDegraded ConditionType = "Degraded"
	// ConditionCreated is True once every object of the target strategy
	// exists.
	ConditionCreated ConditionType = "Created"
	// ConditionSynchronized is False while objects of the target strategy
	// cannot be applied.
	ConditionSynchronized ConditionType = "Synchronized"
	// ConditionCertificatesServed (the operator's own) is True when every
	// Service of a generated certificate that the operator could reach
	// presented that certificate, False when one presented another,
	// Unknown when none could be reached from the operator.
	ConditionCertificatesServed ConditionType = "CertificatesServed"
)

// Condition reasons. The first group is KubeVirt's (same strings), the
// second the installstrategy operator's own.
const (
	// ReasonAllComponentsReady: every component is rolled over and ready.
	ReasonAllComponentsReady = "AllComponentsReady"
	// ReasonAllResourcesCreated: every object of the strategy exists.
	ReasonAllResourcesCreated = "AllResourcesCreated"
	// ReasonDeploymentInProgress: a first install is under way.
	ReasonDeploymentInProgress = "DeploymentInProgress"
	// ReasonUpdateInProgress: an update to another strategy is under way.
	ReasonUpdateInProgress = "UpdateInProgress"
	// ReasonDeploymentFailed: applying or rolling out the strategy failed.
	ReasonDeploymentFailed = "DeploymentFailed"
	// ReasonDeletionInProgress: the product is being removed.
	ReasonDeletionInProgress = "DeletionInProgress"

	// ReasonStrategyLoadFailed: the strategy could not be loaded from any
	// source.
	ReasonStrategyLoadFailed = "StrategyLoadFailed"
	// ReasonStrategyTampered: a stored strategy failed its digest or chunk
	// checks and was refused.
	ReasonStrategyTampered = "StrategyTampered"
	// ReasonUntrustedStrategy: the strategy is neither signed by a trusted
	// key nor pinned by its digest (or its signature or digest does not
	// match); nothing of it is applied.
	ReasonUntrustedStrategy = "UntrustedStrategy"
	// ReasonStrategyPulled (an Event): a strategy artifact was downloaded
	// from an OCI registry and trusted.
	ReasonStrategyPulled = "StrategyPulled"
	// ReasonDumpJobFailed: the dump Job that writes the strategy failed.
	ReasonDumpJobFailed = "DumpJobFailed"
	// ReasonCanaryFailed: a canary pod of a DaemonSet update crash-loops
	// and the rollout is stopped.
	ReasonCanaryFailed = "CanaryFailed"
	// ReasonApplyFailed: an object of the strategy could not be applied.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonAllResourcesSynchronized: every object of the strategy was
	// applied.
	ReasonAllResourcesSynchronized = "AllResourcesSynchronized"
	// ReasonAnotherInstallationActive: an older Installation in the same
	// namespace is active; this one does nothing.
	ReasonAnotherInstallationActive = "AnotherInstallationActive"
	// ReasonClaimedByOther: the strategy's cluster-scoped objects (CRDs,
	// ClusterRoles, webhooks) belong to another installation that still
	// exists (an Installation in another namespace, or a plugin
	// installation), named in the message; this one writes nothing and
	// waits until that one is gone, then takes over what it left.
	ReasonClaimedByOther = "ClaimedByOther"
	// ReasonUnsafeCRDChange: a CRD of the target strategy changes in a
	// way that loses or invalidates what stored custom resources hold
	// (pkg/crdsafety; the message names the CRD, version, field and
	// rule); nothing was written. spec.crdSafety.allow accepts one.
	ReasonUnsafeCRDChange = "UnsafeCRDChange"
	// ReasonUninstallBlocked: uninstallStrategy is
	// BlockUninstallIfWorkloadsExist and workloads still exist.
	ReasonUninstallBlocked = "UninstallBlocked"
	// ReasonDeleted: the product was removed.
	ReasonDeleted = "Deleted"
	// ReasonServedCertificatesMatch: the Services reached present the
	// generated certificates.
	ReasonServedCertificatesMatch = "ServedCertificatesMatch"
	// ReasonServedCertificateMismatch: a Service presents a certificate
	// other than its Secret's (a pod kept an old one).
	ReasonServedCertificateMismatch = "ServedCertificateMismatch"
	// ReasonServedCertificatesUnreachable: no Service of a generated
	// certificate could be reached from the operator.
	ReasonServedCertificatesUnreachable = "ServedCertificatesUnreachable"
)

// Finalizer is the finalizer the operator puts on an Installation so that
// it can remove the product before the Installation goes away.
const Finalizer = "installstrategy.io/uninstall"
