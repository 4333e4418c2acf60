// Package reconcile owns the staged pipeline that makes a cluster match a
// strategy: it builds the plan (pkg/plan), then for every step applies its
// objects (pkg/apply) and waits until they are rolled over (pkg/health)
// before the next step starts, generates certificates for empty TLS Secrets
// and injects their CA bundle into webhooks and APIServices, rolls
// DaemonSets out with a canary on the update path, and finally prunes what
// the strategy no longer holds. Run is the one entry point; Options.OnEvent
// reports progress.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/crdsafety"
	"github.com/installstrategy/installstrategy/pkg/generate"
	"github.com/installstrategy/installstrategy/pkg/health"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
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
	// metakeys.FieldManager.
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
	// Roles maps workload names to roles; nil means plan.DefaultRoles.
	Roles map[string]generate.Role
	// NoPrune leaves objects the strategy no longer holds.
	NoPrune bool
	// PruneCRDs lets prune delete CRDs (and their custom resources).
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
	// the CRD preflight reads; 0 means DefaultMaxStoredObjects. A change
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
	// resource policy: plan.KeptReasonPrefix).
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

type run struct {
	opts Options
	s    *strategy.Strategy
	// original is the strategy as the caller gave it, before namespaces
	// were defaulted (which Options.Claims is matched against).
	original *strategy.Strategy
	// req is what the strategy declares the cluster must offer (nil
	// when it declares nothing); s no longer holds it.
	req *strategy.Requirements
	// checked is set once beforeFirstWrite passed.
	checked bool
	a       *apply.Applier
	kube    kubernetes.Interface
	checker *health.Checker
	certs   *certState
	inv     *inventory.Inventory
	invs    *inventory.Store
	mu      sync.Mutex
	res     *Result
	// probed is the applier of the step running (apply.Probe over its
	// objects), which the certificates' reads of its Secrets use too.
	probed *apply.Applier
	// crds is the applied CRD step not yet waited for (settleCRDs).
	crds *appliedCRDs
	// ensured holds, by name, the results of the Namespaces applied
	// ahead of the steps (ensureNamespace), which their step takes.
	ensured map[string]apply.Result
	// absent holds the cluster-scoped objects the claim check found
	// absent (read no more before the first write).
	absent map[strategy.ObjectRef]bool
}

// appliedCRDs is a CRD step whose objects were applied: the API server
// establishes them while the steps that do not need their kinds run.
type appliedCRDs struct {
	step    plan.Step
	objs    []*unstructured.Unstructured
	results []apply.Result
	// defines holds the kind each object defines (ok false for the
	// step's Namespaces), by index.
	defines []definedKind
}

type definedKind struct {
	gk schema.GroupKind
	ok bool
}

// needed returns the indexes of the objects step must wait for: every one
// for a CRD step, else those defining a kind step writes (none when the
// step writes none of their kinds). A step that writes one CRD's kind
// waits for that CRD only: the others go on being established while it
// runs (KubeVirt's instancetypes need 2 of its 21 CRDs).
func (c *appliedCRDs) needed(step plan.Step) []int {
	if c == nil {
		return nil
	}
	var out []int
	if step.Stage == kinds.StageCRDs {
		for i := range c.objs {
			out = append(out, i)
		}
		return out
	}
	writes := map[schema.GroupKind]bool{}
	for _, it := range step.Items {
		writes[it.Object.GroupVersionKind().GroupKind()] = true
	}
	crds := 0
	for i, d := range c.defines {
		if d.ok {
			crds++
			if writes[d.gk] {
				out = append(out, i)
			}
		}
	}
	if len(out) > 0 && len(out) == crds {
		// All of the step's CRDs: with its Namespaces, the whole step.
		return c.needed(plan.Step{Stage: kinds.StageCRDs})
	}
	return out
}

// split returns the part of c at the indexes idx and the rest (nil when
// empty).
func (c *appliedCRDs) split(idx []int) (part, rest *appliedCRDs) {
	part = &appliedCRDs{step: c.step}
	rest = &appliedCRDs{step: c.step}
	in := map[int]bool{}
	for _, i := range idx {
		in[i] = true
	}
	for i := range c.objs {
		dst := rest
		if in[i] {
			dst = part
		}
		dst.objs = append(dst.objs, c.objs[i])
		dst.results = append(dst.results, c.results[i])
		dst.defines = append(dst.defines, c.defines[i])
	}
	if len(rest.objs) == 0 {
		rest = nil
	}
	return part, rest
}

// leaveCreatedCRDs drops from the CRD step still to settle the objects
// this run created, for a run that does not wait (Options.NoWait) at its
// end: no step writes their kinds any more (those that did waited for
// them), and a new CRD has no stored versions to migrate, so waiting for
// the API server to establish them would only delay the end of the run,
// as neither kubectl apply nor helm install without --wait does. CRDs
// this run updated are still waited for, for their stored versions.
func (r *run) leaveCreatedCRDs() {
	c := r.crds
	if c == nil {
		return
	}
	var keep []int
	for i, res := range c.results {
		if res.Action != apply.ActionCreate {
			keep = append(keep, i)
		}
	}
	if len(keep) > 0 {
		r.crds, _ = c.split(keep)
		return
	}
	r.crds = nil
	r.emit(Event{Type: EventStepReady, Step: c.step.Name})
}

func (r *run) emit(e Event) {
	if r.opts.OnEvent == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.opts.OnEvent(e)
}

// beforeFirstWrite runs, once per run, the checks that precede its first
// write (the pre-hooks' included): the cluster-scoped objects are not
// another live installation's (ClaimedError); no CRD change loses or
// invalidates what custom resources hold unless an override accepts it;
// the cluster offers what the strategy requires; the API server takes
// every object the run would write (a server-side dry run).
func (r *run) beforeFirstWrite(ctx context.Context) error {
	if r.checked {
		return nil
	}
	for _, check := range []func(context.Context) error{r.claim, r.crdPreflight, r.declaredPreflight, r.serverPreflight} {
		if err := check(ctx); err != nil {
			return err
		}
	}
	r.checked = true
	return nil
}

func (r *run) run(ctx context.Context) (*Result, error) {
	s, opts := r.s, r.opts
	if err := r.beforeFirstWrite(ctx); err != nil {
		return r.res, err
	}
	if err := r.ensureNamespace(ctx, r.opts.Owner.Namespace); err != nil {
		return r.res, err
	}
	refs, err := r.recordable()
	if err != nil {
		return r.res, err
	}
	r.inv.Add(refs...)
	r.inv.Version = s.Identity.Version
	r.inv.Released = false
	if err := r.invs.Write(ctx, r.inv); err != nil {
		return r.res, err
	}
	r.certs, err = newCertState(ctx, r, r.opts.Certificates, false)
	if err != nil {
		return r.res, err
	}
	if err := r.certs.publishBundle(ctx); err != nil {
		return r.res, err
	}
	var conflicts []error
	for _, step := range r.res.Plan.Steps {
		if idx := r.crds.needed(step); len(idx) > 0 {
			if err := r.settleCRDs(ctx, idx); err != nil {
				return r.res, err
			}
		}
		errs, err := r.step(ctx, step)
		conflicts = append(conflicts, errs...)
		if err != nil {
			r.emit(Event{Type: EventDegraded, Step: step.Name, Reason: err.Error()})
			return r.res, &StepError{Step: step.Name, Err: err}
		}
	}
	if opts.NoWait {
		r.leaveCreatedCRDs()
	}
	if err := r.settleCRDs(ctx, nil); err != nil {
		return r.res, err
	}
	if len(conflicts) > 0 {
		return r.res, errors.Join(conflicts...)
	}
	if !opts.NoPrune {
		if err := r.prune(ctx); err != nil {
			return r.res, &StepError{Step: plan.PruneStep, Err: err}
		}
	}
	if err := r.recordApplied(ctx); err != nil {
		return r.res, &StepError{Step: plan.PruneStep, Err: err}
	}
	r.res.RolledOver = true
	if opts.ServedCertificates.Enabled {
		served, err := r.certs.checkServed(ctx, opts.ServedCertificates)
		if err != nil {
			return r.res, err
		}
		if served == nil {
			served = []ServedCertificate{}
		}
		r.res.ServedCertificates = served
	}
	return r.res, nil
}

func (rc *Reconciler) newRun(ctx context.Context, s *strategy.Strategy, opts Options) (*run, error) {
	opts.defaults()
	if err := opts.Owner.Validate(); err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	// A transient failure (a webhook whose backend is still starting, 429,
	// 5xx) is retried until the step's deadline.
	a := rc.a.WithOptions(apply.Options{Identity: s.Identity, FieldManager: opts.FieldManager, Owner: opts.Owner, Adopt: opts.Adopt, Adoptable: opts.Adoptable, SystemConsent: opts.SystemConsent, RetryFor: opts.StageDeadline, LeavePodTemplates: opts.LeavePodTemplates})
	if !opts.Claims.answers(s, opts.Owner) {
		// Kinds served since the last run are found. (A claim check whose
		// answer the run takes has just asked discovery.)
		a.ResetMapper()
	}
	kube := rc.kube
	original := s
	req, s, err := s.Requirements()
	if err != nil {
		return nil, err
	}
	s, err = a.DefaultNamespaces(s, opts.Owner.Namespace)
	if err != nil {
		return nil, err
	}
	s = withImplicitNamespaces(s, opts.Owner.Namespace)
	invs := inventory.NewStore(kube)
	invs.FieldManager, invs.OwnerReference = opts.FieldManager, opts.OwnerReference
	inv, err := invs.Get(ctx, opts.Owner)
	if err != nil {
		return nil, err
	}
	if !inv.Exists() && opts.Observed != (strategy.Identity{}) {
		// The first inventory of an installation an older installstrategy
		// applied starts from what that version marked as its own. One
		// that observes nothing was never installed, by any version.
		legacy, err := plan.LegacyObjects(ctx, a)
		if err != nil {
			return nil, fmt.Errorf("inventory of %s: %w", opts.Owner, err)
		}
		inv.Add(legacy...)
	}
	return &run{
		opts: opts, s: s, original: original, req: req, a: a, kube: kube, inv: inv, invs: invs,
		// A rolling-out workload's pods are listed every few polls (for
		// a failed pod), not at every poll.
		checker: &health.Checker{Kube: kube, Identity: s.Identity, PodsEvery: 5 * opts.Interval, VerifyPods: opts.VerifyPods},
		res:     &Result{Plan: plan.Build(s, plan.Options{Observed: opts.Observed, Roles: opts.Roles})},
	}, nil
}

// withImplicitNamespaces adds a Namespace object for every namespace the
// objects of s (and the owner's inventory) live in that s does not define:
// created as the installation's own when absent, merged into (never
// deleted) when someone else made it (kinds.Info.MergeIntoExisting).
func withImplicitNamespaces(s *strategy.Strategy, ownerNS string) *strategy.Strategy {
	defined := map[string]bool{}
	for _, o := range s.Objects {
		if o.GroupVersionKind().GroupKind() == (schema.GroupKind{Kind: "Namespace"}) {
			defined[o.GetName()] = true
		}
	}
	var add []*unstructured.Unstructured
	need := func(ns string) {
		if ns == "" || defined[ns] {
			return
		}
		defined[ns] = true
		ob := &unstructured.Unstructured{}
		ob.SetAPIVersion("v1")
		ob.SetKind("Namespace")
		ob.SetName(ns)
		ob.SetAnnotations(map[string]string{metakeys.ImplicitAnnotation: "true"})
		add = append(add, ob)
	}
	need(ownerNS)
	for _, o := range s.Objects {
		need(o.GetNamespace())
	}
	if len(add) == 0 {
		return s
	}
	out := &strategy.Strategy{Identity: s.Identity, Objects: append(append([]*unstructured.Unstructured{}, s.Objects...), add...)}
	out.Sort()
	return out
}

// recordable returns what the inventory records before anything is
// written: every strategy object of a kind the cluster serves (or a CRD of
// the strategy defines), except Namespaces, which are recorded once they
// are known to be the installation's (created by it, or its own), not
// someone else's that it merged into (see recordNamespaces).
func (r *run) recordable() ([]strategy.ObjectRef, error) {
	crdKinds := plan.CRDKinds(r.s)
	out := make([]strategy.ObjectRef, 0, len(r.s.Objects))
	for _, o := range r.s.Objects {
		ref := strategy.RefOf(o)
		if ref.GroupKind() == namespaceKind {
			continue
		}
		if _, defined := crdKinds[ref.GroupKind()]; !defined {
			_, err := r.a.Mapping(ref, o.GroupVersionKind().Version)
			var notServed *apply.NotServedError
			if errors.As(err, &notServed) {
				continue
			}
			if err != nil {
				return nil, err
			}
		}
		out = append(out, ref)
	}
	return out, nil
}

// recordAdopted marks ref's inventory entry as adopted, not created
// (inventory.Entry.Adopted), holding r.mu.
func (r *run) recordAdopted(ref strategy.ObjectRef) {
	e := r.inv.Entries[ref]
	e.ObjectRef, e.Adopted = ref, true
	r.inv.Entries[ref] = e
}

// recordNamespaces adds the Namespaces of results that are the
// installation's to the inventory, and writes it when that changed it.
func (r *run) recordNamespaces(ctx context.Context, results ...apply.Result) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, res := range results {
		if res.Ref.GroupKind() == namespaceKind && !res.Shared && res.Action != apply.ActionSkip && res.Action != apply.ActionConflict && res.Action != "" {
			r.inv.Add(res.Ref)
		}
	}
	return r.invs.Write(ctx, r.inv)
}

// ensureNamespace applies the strategy's Namespace object named ns (its
// own, or an implicit one) ahead of the namespace step, and records it when
// it is the installation's: the inventory lives in the owner's namespace,
// the CA Secret in the namespace of the first certificate, and both are
// written before any step.
func (r *run) ensureNamespace(ctx context.Context, ns string) error {
	for _, o := range r.s.Objects {
		if o.GroupVersionKind().GroupKind() == namespaceKind && o.GetName() == ns {
			if _, ok := r.ensuredResult(o); ok {
				return nil
			}
			res, err := r.a.Apply(ctx, o)
			r.emit(Event{Type: EventApplied, Step: "namespace", Ref: res.Ref, Action: res.Action, Reason: res.Reason})
			if err != nil {
				return fmt.Errorf("namespace %s of installation %s: %w", ns, r.opts.Owner, err)
			}
			r.mu.Lock()
			if !res.Shared {
				r.inv.Add(res.Ref)
			}
			if res.Adopted {
				r.recordAdopted(res.Ref)
			}
			r.mu.Unlock()
			// Its step takes this result instead of applying it again.
			res.Object = health.Essentials(res.Object)
			r.mu.Lock()
			if r.ensured == nil {
				r.ensured = map[string]apply.Result{}
			}
			r.ensured[ns] = res
			r.mu.Unlock()
			return nil
		}
	}
	return nil
}

// ensuredResult returns the result of obj's apply by ensureNamespace in
// this run, when obj is a Namespace it applied.
func (r *run) ensuredResult(obj *unstructured.Unstructured) (apply.Result, bool) {
	if obj.GroupVersionKind().GroupKind() != namespaceKind {
		return apply.Result{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	res, ok := r.ensured[obj.GetName()]
	return res, ok
}

func (r *run) plan(ctx context.Context) (*plan.Plan, error) {
	p := r.res.Plan
	var claimed *ClaimedError
	err := r.claim(ctx)
	switch {
	case errors.As(err, &claimed):
		p.Blocked = claimed.Error()
	case err != nil:
		return p, err
	}
	if p.CRDSafety, err = r.crdChanges(ctx); err != nil {
		return p, err
	}
	if p.Unmet, err = r.unmet(ctx); err != nil {
		return p, err
	}
	r.certs, err = newCertState(ctx, r, r.opts.Certificates, true)
	if err != nil {
		return nil, err
	}
	err = plan.Observe(ctx, r.a, p, r.s, plan.ObserveOptions{Parallelism: r.opts.Parallelism, PruneCRDs: r.opts.PruneCRDs, Desired: r.certs.desired, Inventory: r.inv})
	if r.opts.NoPrune {
		p.Prune = nil
	}
	if err != nil {
		return p, err
	}
	migrate, err := r.migrationsPlanned(ctx, p)
	if migrate != nil {
		withMigrationStep(p, migrate)
	}
	return p, err
}

// recordApplied writes the inventory after prune: the strategy's objects
// that were applied or are in conflict (not skipped for a kind not served,
// not someone else's Namespace merged into), the CRDs prune kept, and what
// it could not delete; without prune, what it held too.
func (r *run) recordApplied(ctx context.Context) error {
	next := inventory.New(r.opts.Owner)
	if r.opts.NoPrune {
		for ref, e := range r.inv.Entries {
			next.Entries[ref] = e
		}
	}
	next.Version = r.s.Identity.Version
	for _, res := range r.res.Applied {
		if res.Action == apply.ActionSkip || res.Shared {
			continue
		}
		e := r.inv.Entries[res.Ref]
		e.ObjectRef = res.Ref
		next.Entries[res.Ref] = e
	}
	// What prune could not delete, and the CRDs it kept, are still in
	// the inventory it left.
	target := r.s.Index()
	for ref, e := range r.inv.Entries {
		if _, ok := next.Entries[ref]; !ok && target[ref] == nil {
			next.Entries[ref] = e
		}
	}
	r.inv.Entries = next.Entries
	r.inv.Version = next.Version
	return r.invs.Write(ctx, r.inv)
}

// step applies one step's objects, then waits until they are ready. It
// returns the conflicts separately from the error that stops the run.
func (r *run) step(ctx context.Context, step plan.Step) ([]error, error) {
	r.emit(Event{Type: EventStepStarted, Step: step.Name})
	// Objects the cache does not hold are looked up by a list per
	// resource and namespace, not one read each (the certificates'
	// reads of their Secrets included).
	raw := make([]*unstructured.Unstructured, 0, len(step.Items))
	for _, it := range step.Items {
		if _, ok := r.ensuredResult(it.Object); !ok {
			raw = append(raw, it.Object)
		}
	}
	a := r.a.Probe(ctx, raw)
	r.mu.Lock()
	r.probed = a
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.probed = nil
		r.mu.Unlock()
	}()
	objs := make([]*unstructured.Unstructured, 0, len(step.Items))
	for _, it := range step.Items {
		obj, err := r.certs.desired(ctx, it.Object)
		if err != nil {
			return nil, err
		}
		objs = append(objs, obj)
	}
	results := make([]apply.Result, len(objs))
	var (
		mu        sync.Mutex
		conflicts []error
		errs      []error
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.opts.Parallelism)
	for i, obj := range objs {
		if res, ok := r.ensuredResult(obj); ok {
			// Applied ahead of the steps by this run (ensureNamespace).
			results[i] = res
			continue
		}
		g.Go(func() error {
			res, err := r.applyOne(gctx, a, step, obj)
			// Kept until the step's wait: only what its health check reads.
			res.Object = health.Essentials(res.Object)
			results[i] = res
			var conflict *apply.ConflictError
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.As(err, &conflict):
				conflicts = append(conflicts, err)
			case err != nil:
				errs = append(errs, err)
			}
			r.emit(Event{Type: EventApplied, Step: step.Name, Ref: res.Ref, Action: res.Action, Reason: res.Reason})
			return nil
		})
	}
	_ = g.Wait()
	r.mu.Lock()
	// The run keeps what happened to each object, not the objects: the
	// step's live copies and the writes' responses (as large as the
	// strategy together) are dropped with the step.
	for _, res := range results {
		res.Object = nil
		r.res.Applied = append(r.res.Applied, res)
		if res.Adopted {
			r.res.Adopted = append(r.res.Adopted, res.Ref)
			r.recordAdopted(res.Ref)
		}
	}
	r.mu.Unlock()
	if err := r.recordNamespaces(ctx, results...); err != nil {
		return conflicts, err
	}
	if err := errors.Join(errs...); err != nil {
		return conflicts, err
	}
	if step.Stage == kinds.StageCRDs {
		// Not waited for here: the API server establishes the CRDs while
		// the steps that do not need their kinds run (virt-operator does
		// not wait for them at all). The first step that writes one of
		// their kinds, or the end of the run, waits (settleCRDs).
		c := &appliedCRDs{step: step, objs: objs, results: results}
		for _, o := range objs {
			gk, ok := strategy.DefinedKind(o) // not the step's Namespaces
			c.defines = append(c.defines, definedKind{gk: gk, ok: ok})
		}
		r.crds = c
		return conflicts, nil
	}
	if err := r.wait(ctx, step, objs, results, waitHow{}); err != nil {
		return conflicts, err
	}
	r.emit(Event{Type: EventStepReady, Step: step.Name})
	return conflicts, nil
}

// settleCRDs waits for the objects at idx of the applied CRD step (all of
// them when idx is nil), if any, until they are established, then makes
// their kinds known to the applier and migrates stored versions the CRDs
// drop; the rest stay for a later step or the end of the run. Its failure
// is the CRD step's, which is ready once all its objects are.
func (r *run) settleCRDs(ctx context.Context, idx []int) error {
	c := r.crds
	if c == nil {
		return nil
	}
	var rest *appliedCRDs
	if idx != nil {
		c, rest = c.split(idx)
	}
	r.crds = rest
	// A CRD's write response is judged only when it already shows the
	// CRD established (an update of an established one): a created CRD's
	// response has no conditions yet, and by now (a step or more later)
	// the API server has likely established it, so it is read instead of
	// waiting out a round. The wait's last copies serve the stored
	// versions' check below, which reads only their status.
	seen := map[strategy.ObjectRef]*unstructured.Unstructured{}
	var seenMu sync.Mutex
	err := r.wait(ctx, c.step, c.objs, c.results, waitHow{readyResponsesOnly: true, uncachedInterval: crdPollInterval, seen: func(live *unstructured.Unstructured) {
		seenMu.Lock()
		defer seenMu.Unlock()
		seen[strategy.RefOf(live)] = health.Essentials(live) // status, not KubeVirt's 8 MB of schemas
	}})
	if err == nil && written(c.results) {
		// Kinds of the new (or changed) CRDs are served now, or about to
		// be: discovery lists them shortly after they are established.
		err = r.waitServed(ctx, c)
	}
	if err == nil {
		// Even when this run wrote no CRD: an earlier one may have
		// written it and stopped before migrating (the wait's copies of
		// the CRDs, else reads from the cache when there is one).
		err = r.migrateStoredVersions(ctx, c.objs, seen)
	}
	if err != nil {
		r.emit(Event{Type: EventDegraded, Step: c.step.Name, Reason: err.Error()})
		return &StepError{Step: c.step.Name, Err: err}
	}
	if rest == nil {
		r.emit(Event{Type: EventStepReady, Step: c.step.Name})
	}
	return nil
}

// waitServed waits (within the step deadline) until discovery serves the
// kind of every CRD in c, asking it again (the applier's REST mapper reset)
// unless what it said last serves them all already: the API
// server adds a new CRD's group and version to discovery shortly after it
// reports the CRD established, and a mapping asked in between would take
// the kind for one the cluster does not serve, and skip the custom
// resources of the strategy's own CRD (seen once in make test-repeat,
// TestCRDsEstablishWhileLaterStepsRun).
func (r *run) waitServed(ctx context.Context, c *appliedCRDs) error {
	type kind struct {
		ref     strategy.ObjectRef
		version string
	}
	var want []kind
	for _, o := range c.objs {
		gvr, ok := strategy.DefinedResource(o) // not Namespaces; a CRD serving no version has nothing to map
		if !ok {
			continue
		}
		gk, _ := strategy.DefinedKind(o)
		want = append(want, kind{strategy.ObjectRef{Group: gk.Group, Kind: gk.Kind}, gvr.Version})
	}
	missing := ""
	served := func() (bool, error) {
		for _, k := range want {
			_, err := r.a.Mapping(k.ref, k.version)
			var notServed *apply.NotServedError
			if errors.As(err, &notServed) {
				missing = k.ref.GroupKind().String()
				return false, nil
			}
			if err != nil {
				return false, err
			}
		}
		return true, nil
	}
	// A recreated CRD (an immutable field changed, its scope) may map
	// as it did before: discovery is asked again whatever it said last.
	asked := slices.ContainsFunc(c.results, func(res apply.Result) bool { return res.Action == apply.ActionRecreate })
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, r.opts.StageDeadline, true, func(ctx context.Context) (bool, error) {
		if !asked {
			asked = true
			// What discovery said last may serve them all already (a
			// step before waited for its CRDs since they were
			// established): no need to ask again.
			if ok, err := served(); ok || err != nil {
				return ok, err
			}
		}
		r.a.ResetMapper()
		return served()
	})
	if err != nil && missing != "" && ctx.Err() == nil {
		return fmt.Errorf("kind %s of an established CRD is not served by discovery: %w", missing, err)
	}
	return err
}

// written reports whether any result wrote its object.
func written(results []apply.Result) bool {
	for _, res := range results {
		switch res.Action {
		case apply.ActionCreate, apply.ActionUpdate, apply.ActionRecreate:
			return true
		}
	}
	return false
}

// applyOne applies one object with a (the run's applier, probed for the
// step); DaemonSets on the update path go through the canary rollout. A
// Job that completed before with the same applied hash and was removed
// since (ttlSecondsAfterFinished) is not run again.
func (r *run) applyOne(ctx context.Context, a *apply.Applier, step plan.Step, obj *unstructured.Unstructured) (apply.Result, error) {
	if step.Stage == kinds.StageWorkloads && obj.GetKind() == "DaemonSet" && obj.GetAPIVersion() == "apps/v1" &&
		r.res.Plan.Path == plan.PathUpdate && !r.opts.Canary.Disabled && !r.opts.NoWait {
		return r.canary(ctx, step, obj)
	}
	if res, done, err := r.completedJob(ctx, obj); done || err != nil {
		return res, err
	}
	return a.Apply(ctx, obj)
}

// completedJob reports a Job the inventory records as completed with the
// applied hash obj has now, and that no longer exists (plan.CompletedJob).
func (r *run) completedJob(ctx context.Context, obj *unstructured.Unstructured) (apply.Result, bool, error) {
	ref := strategy.RefOf(obj)
	r.mu.Lock()
	e := r.inv.Entries[ref]
	r.mu.Unlock()
	if e.Hash == "" {
		return apply.Result{}, false, nil
	}
	live, err := r.a.Get(ctx, obj)
	if err != nil || live != nil {
		return apply.Result{}, false, err
	}
	prepared, err := r.a.Prepare(obj, nil)
	if err != nil {
		return apply.Result{Ref: ref}, true, err
	}
	r.mu.Lock()
	done := plan.CompletedJob(r.inv, prepared)
	r.mu.Unlock()
	if !done {
		return apply.Result{}, false, nil
	}
	return apply.Result{Ref: ref, Action: apply.ActionUnchanged, Reason: plan.CompletedJobReason}, true, nil
}

// ReappliedReason is the reason of an EventApplied for an object the wait
// of its own step found deleted and applied again.
const ReappliedReason = "deleted while its step waited; applied again"

// reapplying wraps a step's getter: an object of the step that is gone
// while the step waits for it (someone deleted it after its write) is
// applied again, once per object and wait, so the wait goes on with the
// new object instead of failing at the step's deadline. A Job the getter
// reports gone stays gone (its TTL removes it once it finished).
func (r *run) reapplying(step plan.Step, get health.Getter) health.Getter {
	var mu sync.Mutex
	done := map[strategy.ObjectRef]bool{}
	return func(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		live, err := get(ctx, obj)
		if err != nil || live != nil {
			return live, err
		}
		ref := strategy.RefOf(obj)
		if info, _ := kinds.Lookup(ref.GroupKind()); info.Health == kinds.HealthJob {
			return nil, nil
		}
		mu.Lock()
		again := !done[ref]
		done[ref] = true
		mu.Unlock()
		if !again {
			return nil, nil
		}
		res, err := r.a.Apply(ctx, obj)
		if err != nil {
			return nil, fmt.Errorf("apply again after its deletion: %w", err)
		}
		r.emit(Event{Type: EventApplied, Step: step.Name, Ref: ref, Action: res.Action, Reason: ReappliedReason})
		return res.Object, nil
	}
}

// confirming returns get, checking what it gives against the API server
// when an object's copy has stayed at one resourceVersion for
// ConfirmEvery: a cache whose informer stopped following the cluster (its
// watch seen to hang for minutes after an etcd restart) would otherwise
// show a not-ready copy until the step's deadline, and the retry after it
// would read the same copy. Once the API server's copy differs from the
// one get gave, that object is read from the API server for the rest of
// the wait. A wait on an object that does not change (a rollout waiting
// for pods) costs one read per object per ConfirmEvery. An applier without
// a cache (the plugin's) already reads the API server at every poll: get
// is returned as it is.
func (r *run) confirming(step plan.Step, get health.Getter) health.Getter {
	if !r.a.Cached() {
		return get
	}
	direct := r.a.Direct()
	every := r.confirmEvery()
	type copySeen struct {
		rv     string
		since  time.Time
		direct bool
	}
	var mu sync.Mutex
	seen := map[strategy.ObjectRef]*copySeen{}
	return func(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		ref := strategy.RefOf(obj)
		mu.Lock()
		s := seen[ref]
		if s == nil {
			s = &copySeen{}
			seen[ref] = s
		}
		useDirect := s.direct
		mu.Unlock()
		if useDirect {
			return direct.Get(ctx, obj)
		}
		got, err := get(ctx, obj)
		if err != nil || got == nil {
			return got, err
		}
		now := time.Now()
		mu.Lock()
		if rv := got.GetResourceVersion(); rv != s.rv {
			s.rv, s.since = rv, now
			mu.Unlock()
			return got, nil
		}
		due := now.Sub(s.since) >= every
		mu.Unlock()
		if !due {
			return got, nil
		}
		fresh, err := direct.Get(ctx, obj)
		if err != nil {
			// The copy at hand is checked; the API server is asked again
			// next round.
			return got, nil
		}
		stale := fresh == nil || fresh.GetResourceVersion() != got.GetResourceVersion()
		mu.Lock()
		s.since = now
		s.direct = stale
		mu.Unlock()
		if stale {
			// The informer may have stopped for every object of the kind:
			// decisions too read the API server for a while.
			r.a.DistrustCache(apply.DistrustFor)
			reason := "the API server has none"
			if fresh != nil {
				reason = "the API server has resourceVersion " + fresh.GetResourceVersion()
			}
			r.emit(Event{Type: EventStaleCache, Step: step.Name, Ref: ref,
				Reason: fmt.Sprintf("the cache held resourceVersion %s unchanged for %s, %s; read from the API server for the rest of the wait", got.GetResourceVersion(), every, reason)})
		}
		return fresh, nil
	}
}

// confirmEvery is how long a copy may stay unchanged during a wait before
// the API server is asked (see confirming): Options.ConfirmEvery, or a
// tenth of the step's deadline and at least ten polls.
func (r *run) confirmEvery() time.Duration {
	if r.opts.ConfirmEvery > 0 {
		return r.opts.ConfirmEvery
	}
	return max(r.opts.StageDeadline/10, 10*r.opts.Interval)
}

// getter reads live objects for the health checks. A Job this run wrote
// that is gone was removed by its ttlSecondsAfterFinished, which only
// happens once it finished: its Events (Completed, or a failure) say how.
//
// The first check of an object this run wrote uses what the write
// returned, the object as the API server had it then: a CRD or workload
// just written is rarely ready at once, and reading it again right away
// (the cache has not seen the write yet) would cost a request each. With
// readyResponsesOnly, only responses that are ready already are used: the
// wait of a CRD step comes a step or more after its writes, when a
// created CRD's response (no conditions yet) is long out of date.
func (r *run) getter(ctx context.Context, results []apply.Result, readyResponsesOnly bool) health.Getter {
	uids := map[strategy.ObjectRef]types.UID{}
	gens := map[strategy.ObjectRef]int64{}
	var (
		mu      sync.Mutex
		written = map[strategy.ObjectRef]*unstructured.Unstructured{}
	)
	for _, res := range results {
		if res.Object != nil {
			uids[res.Ref] = res.Object.GetUID()
			gens[res.Ref] = res.Object.GetGeneration()
			switch res.Action {
			case apply.ActionCreate, apply.ActionUpdate, apply.ActionRecreate:
				if readyResponsesOnly {
					if st, err := r.checker.Check(ctx, res.Object); err != nil || !st.Ready {
						continue
					}
				}
				written[res.Ref] = res.Object
			}
		}
	}
	return func(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		mu.Lock()
		first, ok := written[strategy.RefOf(obj)]
		delete(written, strategy.RefOf(obj))
		mu.Unlock()
		if ok {
			return first.DeepCopy(), nil
		}
		// A cached copy older than what this run wrote would report the
		// previous rollout's health.
		live, err := r.a.GetAtLeast(ctx, obj, gens[strategy.RefOf(obj)])
		if err != nil || live != nil {
			return live, err
		}
		ref := strategy.RefOf(obj)
		info, _ := kinds.Lookup(ref.GroupKind())
		if uid := uids[ref]; info.Health == kinds.HealthJob && uid != "" {
			return r.finishedJob(ctx, obj, uid)
		}
		return nil, nil
	}
}

// finishedJob returns obj with the Complete or Failed condition its
// Events report for the Job with uid, or nil when they report neither.
func (r *run) finishedJob(ctx context.Context, obj *unstructured.Unstructured, uid types.UID) (*unstructured.Unstructured, error) {
	evs, err := r.kube.CoreV1().Events(obj.GetNamespace()).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(uid)})
	if err != nil {
		return nil, fmt.Errorf("events of %s: %w", strategy.RefOf(obj), err)
	}
	cond := ""
	msg := ""
	for _, ev := range evs.Items {
		switch {
		case ev.Reason == "Completed":
			cond, msg = "Complete", ev.Message
		case ev.Type == "Warning" && (ev.Reason == "BackoffLimitExceeded" || ev.Reason == "DeadlineExceeded" || ev.Reason == "PodFailurePolicy" || ev.Reason == "MaxFailedIndexesExceeded"):
			cond, msg = "Failed", ev.Reason+": "+ev.Message
		}
		if cond == "Failed" {
			break
		}
	}
	if cond == "" {
		return nil, nil
	}
	out := obj.DeepCopy()
	out.SetUID(uid)
	_ = unstructured.SetNestedSlice(out.Object, []any{map[string]any{"type": cond, "status": "True", "message": msg}}, "status", "conditions")
	return out, nil
}

// waitHow tunes run.wait.
type waitHow struct {
	// readyResponsesOnly judges a write's response only when it is ready
	// already; others are read (see run.getter).
	readyResponsesOnly bool
	// seen, when set, is given every copy the wait judged.
	seen func(*unstructured.Unstructured)
	// uncachedInterval, when shorter, replaces Options.Interval while
	// the applier has no cache to wake the wait on changes.
	uncachedInterval time.Duration
}

// crdPollInterval spaces the rounds of a CRD wait without a cache (the
// plugin): the API server establishes a CRD within a second or two of its
// creation, so a second between rounds was up to half of that wait; each
// round reads only the CRDs not yet established (kinds.Health.StaysReady).
const crdPollInterval = 250 * time.Millisecond

// wait waits until the written objects of a step are ready.
func (r *run) wait(ctx context.Context, step plan.Step, objs []*unstructured.Unstructured, results []apply.Result, how waitHow) error {
	if r.opts.NoWait && step.Stage != kinds.StageCRDs {
		return nil
	}
	var waitFor []*unstructured.Unstructured
	for i, o := range objs {
		switch results[i].Action {
		case apply.ActionSkip, apply.ActionConflict:
			continue
		case apply.ActionUnchanged:
			if results[i].Object == nil {
				continue // a completed Job removed since
			}
		}
		info, _ := kinds.Lookup(o.GroupVersionKind().GroupKind())
		if info.Health == kinds.HealthNone || (info.Health == kinds.HealthAPIService && !r.opts.WaitForAPIServices) {
			continue
		}
		waitFor = append(waitFor, o)
	}
	if len(waitFor) == 0 {
		return nil
	}
	progress := func(st []health.Status) { r.emit(Event{Type: EventProgress, Step: step.Name, Progress: st}) }
	get := r.reapplying(step, r.confirming(step, r.getter(ctx, results, how.readyResponsesOnly)))
	if how.seen != nil {
		inner := get
		get = func(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
			live, err := inner(ctx, obj)
			if live != nil {
				how.seen(live)
			}
			return live, err
		}
	}
	interval, changed := r.opts.Interval, r.a.Changed()
	if changed == nil && how.uncachedInterval > 0 && (interval == 0 || how.uncachedInterval < interval) {
		interval = how.uncachedInterval
	}
	if err := r.checker.Wait(ctx, get, waitFor, health.WaitOptions{Deadline: r.opts.StageDeadline, Interval: interval, OnProgress: progress, Changed: changed}); err != nil {
		return err
	}
	// Jobs that completed are recorded with their applied hash: a resync
	// after their TTL removed them does not run them again.
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, o := range objs {
		info, _ := kinds.Lookup(o.GroupVersionKind().GroupKind())
		if info.Health != kinds.HealthJob || results[i].Object == nil {
			continue
		}
		if h := results[i].Object.GetAnnotations()[metakeys.AppliedHashAnnotation]; h != "" {
			e := r.inv.Entries[results[i].Ref]
			e.ObjectRef, e.Hash = results[i].Ref, h
			r.inv.Entries[results[i].Ref] = e
		}
	}
	return nil
}

// prune deletes what the strategy no longer holds and the installation's
// inventory does, in the kind table's prune order (see deleteItems).
func (r *run) prune(ctx context.Context) error {
	r.emit(Event{Type: EventStepStarted, Step: plan.PruneStep})
	items, err := plan.Prunable(ctx, r.a, r.s, plan.ObserveOptions{PruneCRDs: r.opts.PruneCRDs, Parallelism: r.opts.Parallelism, Inventory: r.inv})
	if err != nil {
		return err
	}
	r.res.Plan.Prune = items
	// Entries whose objects are gone leave the inventory.
	listed := map[strategy.ObjectRef]bool{}
	for _, it := range items {
		listed[it.Ref] = true
	}
	target := r.s.Index()
	for ref := range r.inv.Entries {
		if target[ref] == nil && !listed[ref] {
			delete(r.inv.Entries, ref)
		}
	}
	deleted, kept, err := deleteItems(ctx, r.a, r.kube, r.inv, r.opts.Certificates.CASecret, items, func(e Event) {
		e.Step = plan.PruneStep
		r.emit(e)
	})
	r.res.Pruned = append(r.res.Pruned, deleted...)
	r.res.Kept = append(r.res.Kept, kept...)
	if err != nil {
		return err
	}
	r.emit(Event{Type: EventStepReady, Step: plan.PruneStep})
	return nil
}
