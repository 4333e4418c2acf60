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

// Condition types of kstatus (sigs.k8s.io/cli-utils/pkg/kstatus), which
// Flux, Helm 4's --wait, kubectl wait and Argo CD read. The operator
// derives them from the status on every write (SetStatusConditions) and
// keeps them beside the conditions above; at most one of them is True.
const (
	// ConditionReady is True only when the target strategy is fully
	// rolled over: phase Deployed, every component available at the
	// target version, nothing progressing or degraded, all of it observed
	// for the current generation.
	ConditionReady ConditionType = "Ready"
	// ConditionReconciling (kstatus's "abnormal-true" condition) is True
	// while the operator works towards the target: loading, applying,
	// rolling out, retrying a transient failure, or removing the product.
	// Its reason says which.
	ConditionReconciling ConditionType = "Reconciling"
	// ConditionStalled (kstatus's "abnormal-true" condition) is True when
	// the operator cannot make progress without a change to the spec or
	// the cluster: a refusal (see StalledReasons) or an exceeded progress
	// deadline. Its reason is the Degraded condition's.
	ConditionStalled ConditionType = "Stalled"
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
	// ReasonInvalidSpec: the spec cannot be turned into a strategy (a
	// customizeComponents patch that does not apply, a placement that
	// cannot be put on the pods); nothing of it is applied until the spec
	// changes.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonCRDChangeRefused: the target strategy changes a
	// CustomResourceDefinition in a way the upgrade-safety preflight
	// refuses (data of stored objects would be lost; pkg/crdsafety, the
	// message names the CRD, version, field, rule and objects); nothing
	// is written. spec.crdSafety.allow accepts one CRD and rule.
	ReasonCRDChangeRefused = "CRDChangeRefused"
	// ReasonUpgradePathRefused: spec.upgradePath is Walk, the target's
	// upgradeFrom does not admit the deployed version, and no chain of
	// trusted versions of the source leads to it (the message lists the
	// versions looked at and those refused); nothing is written.
	ReasonUpgradePathRefused = "UpgradePathRefused"
	// ReasonReconciling: the status reflects a new generation whose
	// outcome is not known yet (Ready and Reconciling only).
	ReasonReconciling = "Reconciling"
)

// Event reasons the operator records beside the condition reasons above:
// one per engine event it reports (pkg/engine's Event types of the same
// names), and the strategy's notes.
const (
	// ReasonPruned: an object the target strategy no longer holds was
	// deleted.
	ReasonPruned = "Pruned"
	// ReasonKept: prune or uninstall left an object of the inventory in
	// place; the note says why.
	ReasonKept = "Kept"
	// ReasonCanary: the canary rollout of a DaemonSet moved on (the note
	// names the phase and the maxUnavailable value).
	ReasonCanary = "Canary"
	// ReasonStaleCache: during a wait the cache's copy of an object stayed
	// behind the API server's; the wait reads it from the API server from
	// then on.
	ReasonStaleCache = "StaleCache"
	// ReasonNotes: the notes of the strategy just rolled out (a chart's
	// rendered NOTES.txt), once per strategy; the note is cut to 1 KiB
	// and says where the whole text is.
	ReasonNotes = "Notes"
)

// StalledReasons are the Degraded reasons that make an Installation
// Stalled (kstatus Failed) whatever its phase: refusals and failures that
// the operator's retries do not clear without a change to the spec or the
// cluster. Phase Failed is Stalled whatever the reason. Any other Degraded
// reason (StrategyLoadFailed, ApplyFailed, DumpJobFailed) is retried and
// keeps the Installation Reconciling.
var StalledReasons = []string{
	ReasonUntrustedStrategy,
	ReasonStrategyTampered,
	ReasonInvalidSpec,
	ReasonCRDChangeRefused,
	ReasonUpgradePathRefused,
	ReasonCanaryFailed,
	// A rollout that failed or exceeded its progress deadline (the
	// message says which: Failed or ProgressDeadlineExceeded).
	ReasonDeploymentFailed,
	ReasonClaimedByOther,
	ReasonAnotherInstallationActive,
	ReasonUninstallBlocked,
}

// Finalizer is the finalizer the operator puts on an Installation so that
// it can remove the product before the Installation goes away.
const Finalizer = "installstrategy.io/uninstall"
