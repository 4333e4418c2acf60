// Package operator is the public SDK for an operator that installs a
// product from install strategies. The author supplies their custom
// resource kind through Resource (how to read a view of an object, an
// Installation, and write its status back), optionally Configurer (their
// own deployment configuration and identifier, e.g. KubeVirt's deployment
// ID), and Options.Product (the strategy generator in their binary). New
// returns a controller-runtime reconciler and SetupWithManager registers
// it. InstallationResource is our own Installation kind. The reconciler is
// a list of named stages (finalizer, one active object per namespace,
// config and identity, load, claim (the product's cluster-scoped objects
// are not another live installation's: else ClaimedByOther, nothing
// written), apply, garbage-collect strategies; and, on
// deletion, uninstall) that turns each object into its product in the
// cluster and reports progress in its status, with Kubernetes Events and
// Prometheus metrics along the way. docs/EMBEDDING.md is the guide.
//
// The apply stage is engine.Run, which has the pipeline's inner stages:
// it plans (steps in the kind table's order, workloads in waves by role),
// then applies and waits step by step — a wave must be rolled over before
// the next one is written, so "apply" and "wait" alternate rather than run
// once each — and then prunes what the target no longer holds. Each step
// is logged at --log-verbosity 1 ("step started", "step ready"), and
// status.components shows the rollout while it waits.
//
// Decisions, where the API leaves room (an "Installation" below is the
// view of an object of whatever kind is reconciled):
//
//   - Identity. The deployment configuration is the Installation's namespace,
//     registry, image prefix and version (defaults: the operator's), with the
//     pull policy (generate.ImagePullPolicyProperty), the pull secret names
//     and the customizeComponents digest as additional properties, and the
//     infra/workloads node selectors, tolerations and affinities as
//     placement. The identifier is computed with identity.Native. A strategy
//     named by spec.strategy.configMap keeps the identity stored with it.
//   - Every loaded strategy, whatever its source, is prepared the same way
//     (Prepare): placement and pull secrets first (pkg/placement: the
//     handler role gets spec.workloads, every other workload spec.infra),
//     then the customizeComponents patches, so a patch can override
//     anything, placement included (KubeVirt places after patching).
//   - Objects are marked with the Installation's labels (Owner: namespace
//     and name, pkg/inventory) and recorded in its inventory ConfigMap
//     (owned by the Installation); prune and uninstall delete only what the
//     inventory lists and still carries those labels. Objects an older
//     operator marked with "installstrategy.<namespace>.<name>" are this
//     Installation's and are relabelled in place.
//   - One active Installation per namespace: the oldest that is not being
//     deleted. The others get phase Deleted, Degraded=True and
//     Synchronized=False with reason AnotherInstallationActive, install
//     nothing, and look again every 30 s (one takes over when the active one
//     goes).
//   - Status during a healthy upgrade: phase Deploying, Progressing=True
//     UpdateInProgress, Available stays True, Degraded stays False (KubeVirt
//     sets Degraded=True there; `kubectl installstrategy status --watch`
//     treats Degraded=True as a failure, so we do not).
//   - Trust (docs/SECURITY.md): the load stage reads the operator's signing
//     key first (a Secret in Options.KeyNamespace, created on first start).
//     What the operator stores (its product, adopted dump Job results) is
//     signed with it and verified on every read; an untrusted stored copy is
//     ignored and regenerated from its source. A spec.strategy.configMap not
//     signed by a trusted key nor pinned by digest is Degraded
//     UntrustedStrategy; the phase and everything applied stay as they are.
//   - Failures: a tampered stored strategy is Degraded StrategyTampered with
//     phase Failed and nothing is applied; a failed dump Job is Degraded
//     DumpJobFailed and retried when the loader's backoff ends; a failed
//     DaemonSet canary is Degraded CanaryFailed with phase Failed (retried
//     with backoff, staying Failed until a retry succeeds); any other rollout
//     failure is Degraded DeploymentFailed (health) or ApplyFailed (with
//     Synchronized=False), retried with controller-runtime's backoff.
//   - status.components (the strategy's workloads that kinds.KeepsPods)
//     comes from engine.Run's events: each wait round (EventProgress)
//     sets the pod counts and readiness of the workloads it checked, a
//     workload written anew is not rolled over until a round says so, and
//     one the run does not reach keeps its last status (rolled over only
//     when the target did not change). It is written at most every
//     Options.ProgressInterval while steps wait, at once when one is ready.
//   - Uninstall: BlockUninstallIfWorkloadsExist keeps the finalizer while a
//     custom resource of the Installation's CRDs exists (Degraded
//     UninstallBlocked); RemoveWorkloads deletes them first. CRDs are deleted
//     only with spec.pruneCRDs. Stored strategies and dump Jobs of the
//     namespace are deleted unless another Installation there remains.
//   - Drift: every deployed Installation is reconciled again after
//     Options.ResyncPeriod, and at once when one of its Deployments or
//     DaemonSets changes spec or is deleted, or a strategy ConfigMap of its
//     namespace changes (not for the ones the operator stores or
//     garbage-collects itself). While a rollout runs in the namespace, the
//     workload changes are recorded instead: at its end, one the rollout
//     did not make (a generation past the one it wrote or found, a
//     deletion it neither pruned nor recreated) reconciles again at once;
//     its own writes reconcile nothing more.
//   - An author's own webhooks: a strategy's webhooks that the operator
//     itself answers (KubeVirt's virt-operator-validator) are declared as
//     Webhooks and served by ServeWebhooks from the operator's process,
//     on the certificate the engine issues into the TLS Secret the
//     operator's pods mount, followed through the API as it rotates;
//     Webhooks.Check verifies a strategy sends them to the operator's pod.
package operator
