package engine

import (
	"context"
	"fmt"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/health"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

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
