package engine

import (
	"fmt"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/crdsafety"
	"github.com/installstrategy/installstrategy/pkg/health"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// Options tunes Run. Owner is required; the zero value of the rest installs
// for a fresh cluster (nothing observed: the create path), waits up to 5
// minutes per step, prunes everything but CRDs, and adopts nothing.
type Options struct {
	// Observed is the identity the cluster runs now; it chooses the
	// workload path (plan.ChoosePath). Zero means a fresh install, so an
	// installation without an inventory does not search for the objects
	// an older installstrategy marked as its own (plan.LegacyObjects: a
	// list of every kind of the kind table).
	Observed strategy.Identity
	// Owner is the installation: its labels mark what Run applies, its
	// inventory (a ConfigMap in Owner.Namespace) records it, and prune
	// deletes only from that inventory. Owner.Namespace is also the
	// namespace of namespaced objects that name none.
	Owner inventory.Owner
	// OwnerReference, when set, is put on the inventory ConfigMap (the
	// operator names its Installation, so the inventory goes with it).
	OwnerReference *metav1.OwnerReference
	// FieldManager is the server-side apply field manager; "" means
	// apply.DefaultFieldManager.
	FieldManager string
	// Adopt says whether existing objects that are not ours are taken
	// over; the zero value reports them as conflicts.
	Adopt apply.AdoptPolicy
	// Adoptable, when not nil, narrows Adopt to the objects it lists
	// (apply.Options.Adoptable: a Helm release's proven objects).
	Adoptable map[strategy.ObjectRef]bool
	// SystemConsent names the system objects (inventory.SystemObject)
	// that may be adopted, and, once adopted, pruned; the zero value
	// names none (apply.Options.SystemConsent, plan.Prunable).
	SystemConsent inventory.SystemConsent
	// Roles maps workload names to roles for workloads without a
	// metakeys.RoleAnnotation (plan.Options.Roles; kinds.KubeVirtRoles()
	// for KubeVirt's); a workload in neither has its kind's role.
	Roles map[string]kinds.Role
	// NoPrune leaves objects the strategy no longer holds.
	NoPrune bool
	// PruneCRDs lets prune delete CRDs (and their custom resources). A
	// CRD to delete that still stores objects (other than the
	// installation's own, pruned too) is refused before the first write
	// (crdsafety.RuleCRDPruned) unless AllowCRDChanges names it.
	PruneCRDs bool
	// NoWait applies every step without waiting for readiness. CRDs are
	// still waited for where a later step writes their kinds, and updated
	// CRDs at the end (their stored versions); a CRD the run created and
	// no later step needs is not (see leaveCreatedCRDs).
	NoWait bool
	// LeavePodTemplates puts no identity annotations on pod templates
	// (apply.Options.LeavePodTemplates): adopting running workloads
	// restarts no pod. It implies NoWait, since rollover checks look for
	// those annotations on the pods.
	LeavePodTemplates bool
	// WaitForAPIServices waits for APIServices to become Available; the
	// zero value only writes them (their backends may have no endpoint).
	WaitForAPIServices bool
	// StageDeadline bounds the wait of each step; 0 means
	// DefaultStageDeadline.
	StageDeadline time.Duration
	// Interval is the polling interval of waits; 0 means 1 second.
	Interval time.Duration
	// ConfirmEvery is how long a wait trusts a cached copy that does not
	// change before it reads the object from the API server (see
	// EventStaleCache); 0 means a tenth of StageDeadline, at least ten
	// Intervals.
	ConfirmEvery time.Duration
	// VerifyPods has every wait decide a workload's health from its pods,
	// also when its status says it is rolled out (health.Checker.VerifyPods):
	// a pod list per workload per poll, so a container that crashes soon
	// after each start is not taken as ready between its crashes. The
	// operator sets it while an Installation is Degraded.
	VerifyPods bool
	// Parallelism bounds concurrent writes within a step; 0 means 8.
	Parallelism int
	// Certificates tunes certificate generation for empty TLS Secrets.
	Certificates CertOptions
	// Canary tunes the DaemonSet canary rollout of the update path.
	Canary CanaryOptions
	// ServedCertificates, when enabled, checks after the rollout the
	// certificates the Services of generated TLS Secrets present (see
	// ServedCheck); the outcome is in Result.ServedCertificates.
	ServedCertificates ServedCheck
	// OnEvent, when set, is called (from one goroutine at a time) with
	// the progress of the run.
	OnEvent func(Event)
	// Claims is the answer of a CheckClaims of the same strategy and
	// owner just before: the run takes it instead of reading the
	// strategy's cluster-scoped objects again. Nil (or an answer for
	// another strategy or owner) means the run checks.
	Claims *Claims
	// AllowCRDChanges accepts the unsafe CRD changes it names, by CRD and
	// rule (pkg/crdsafety). The zero value refuses every unsafe change of
	// a CRD before anything is written (a *crdsafety.UnsafeError).
	AllowCRDChanges []crdsafety.Allow
	// MaxStoredObjects bounds how many custom resources per CRD version
	// the CRD preflight reads; 0 means defaultMaxStoredObjects. A change
	// none of those read is affected by is still refused when more are
	// stored.
	MaxStoredObjects int
	// ServerPreflight says when the run dry-runs, before its first write,
	// every object it would create or update (see PreflightError); the
	// zero value, PreflightChanges, does when the run moves an
	// installation from one version to another.
	ServerPreflight PreflightMode
	// Rollback says the run rolls the installation back to an earlier
	// strategy: its Helm hooks run in the pre-rollback and post-rollback
	// phases instead of pre-upgrade and post-upgrade (see hooks.go).
	Rollback bool
}

func (o *Options) defaults() {
	if o.LeavePodTemplates {
		o.NoWait = true
	}
	if o.FieldManager == "" {
		o.FieldManager = metakeys.FieldManager
	}
	if o.StageDeadline == 0 {
		o.StageDeadline = DefaultStageDeadline
	}
	if o.Interval == 0 {
		o.Interval = time.Second
	}
	if o.Parallelism <= 0 {
		o.Parallelism = 8
	}
}

// DefaultStageDeadline is how long one step may wait for its objects when
// Options.StageDeadline is 0.
const DefaultStageDeadline = 5 * time.Minute

// EventType classifies an Event.
type EventType string

// Event is one piece of progress of Run.
type Event struct {
	Type EventType
	Step string
	// Ref is the object, zero for step events.
	Ref    strategy.ObjectRef
	Action apply.Action
	Reason string
	// Progress is the health of the step's objects (EventProgress only).
	Progress []health.Status
}

// Result is what Run did.
type Result struct {
	// Plan is the plan that was run, as built before any write.
	Plan *plan.Plan
	// Applied holds the result of every strategy object, in step order,
	// without the object itself (Object is nil; Generation says which
	// generation the run left): a run of a large strategy does not hold a
	// second copy of it. Read the cluster for the live objects.
	Applied []apply.Result
	// Pruned lists the deleted objects, in deletion order.
	Pruned []strategy.ObjectRef
	// Kept lists objects prune left alone: CRDs without PruneCRDs,
	// Namespaces that hold objects that are not the installation's,
	// objects that no longer carry its labels, and objects whose resource
	// policy keeps them (inventory.KeptBy; these leave the inventory).
	Kept []strategy.ObjectRef
	// Adopted lists the objects taken over from no installation.
	Adopted []strategy.ObjectRef
	// RolledOver is true when every step was ready and prune ran.
	RolledOver bool
	// ServedCertificates holds, when Options.ServedCertificates asked for
	// it, what each Service port of a generated TLS Secret presented
	// (nil when not checked).
	ServedCertificates []ServedCertificate
}

// Count returns how many applied objects had an action.
func (r *Result) Count(a apply.Action) int {
	n := 0
	for _, x := range r.Applied {
		if x.Action == a {
			n++
		}
	}
	return n
}

// StepError says which step failed.
type StepError struct {
	Step string
	Err  error
}

func (e *StepError) Error() string { return fmt.Sprintf("step %s: %v", e.Step, e.Err) }

// Unwrap returns the cause (a *health.DegradedError when the step did not
// become ready).
func (e *StepError) Unwrap() error { return e.Err }

// Event types.
const (
	// EventStepStarted: a step begins.
	EventStepStarted EventType = "StepStarted"
	// EventApplied: an object was written or found unchanged (Action says
	// which).
	EventApplied EventType = "Applied"
	// EventStepReady: every object of the step is ready.
	EventStepReady EventType = "StepReady"
	// EventCanary: the canary rollout of a DaemonSet moved on (Reason
	// names the phase and the maxUnavailable value).
	EventCanary EventType = "Canary"
	// EventPruned: an object was deleted.
	EventPruned EventType = "Pruned"
	// EventKept: prune or uninstall left an object of the inventory in
	// place; Reason says why (a CRD without PruneCRDs, a Namespace that
	// holds others' objects, an object no longer labelled ours, or its
	// resource policy: plan.KeptReasonPrefix); or, in a step "hook
	// PHASE", a Helm hook whose delete policy leaves it after it
	// succeeded (HookLeftReason), never in the inventory.
	EventKept EventType = "Kept"
	// EventDegraded: a step failed or ran out of time.
	EventDegraded EventType = "Degraded"
	// EventProgress: a round of a step's wait; Progress holds the health
	// of every object the step waits for.
	EventProgress EventType = "Progress"
	// EventStaleCache: during a step's wait the cache's copy of Ref
	// stayed behind the API server's (Reason says how); the wait reads
	// that object from the API server from then on.
	EventStaleCache EventType = "StaleCache"
)
