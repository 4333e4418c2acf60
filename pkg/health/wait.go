package health

import (
	"context"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// DegradedError reports objects that did not become ready: they failed, or
// the progress deadline passed.
type DegradedError struct {
	// Reason is "Failed" or "ProgressDeadlineExceeded".
	Reason string
	// Objects holds the health of every object that is not ready.
	Objects []Status
}

// Degraded reasons.
const (
	ReasonFailed                   = "Failed"
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
)

func (e *DegradedError) Error() string {
	parts := make([]string, 0, len(e.Objects))
	for _, s := range e.Objects {
		parts = append(parts, fmt.Sprintf("%s: %s", s.Ref, s.Reason))
	}
	return fmt.Sprintf("%s: %s", e.Reason, strings.Join(parts, "; "))
}

// Getter returns the live state of an object (nil when it does not exist).
type Getter func(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error)

// WaitOptions tunes Wait. The zero value polls every second for at most
// ten minutes.
type WaitOptions struct {
	// Deadline bounds the wait; 0 means 10 minutes.
	Deadline time.Duration
	// Interval is the time between checks; 0 means 1 second.
	Interval time.Duration
	// OnProgress, when set, is called with the health of every object
	// after each round.
	OnProgress func([]Status)
	// Changed, when set, returns a channel closed at the next change of
	// what the getter reads (an informer cache's; see
	// apply.Applier.Changed): a round then runs without waiting out the
	// Interval, but not sooner than MinInterval after the last one.
	Changed func() <-chan struct{}
	// MinInterval spaces rounds woken by Changed; 0 means 100 ms.
	MinInterval time.Duration
}

// Wait polls objs until every one is ready. It returns a *DegradedError when
// one fails or the deadline passes, and ctx's error when ctx ends.
func (c *Checker) Wait(ctx context.Context, get Getter, objs []*unstructured.Unstructured, opts WaitOptions) error {
	if opts.Deadline == 0 {
		opts.Deadline = 10 * time.Minute
	}
	if opts.Interval == 0 {
		opts.Interval = time.Second
	}
	if opts.MinInterval == 0 {
		opts.MinInterval = 100 * time.Millisecond
	}
	deadline := time.Now().Add(opts.Deadline)
	first := true
	// kept holds the statuses of objects found ready whose rule says
	// they stay ready (kinds.Health.StaysReady): later rounds do not read
	// them again (without a cache, each read is a request, and a CRD's
	// can be megabytes).
	kept := map[int]Status{}
	for {
		var changed <-chan struct{}
		if opts.Changed != nil {
			// Taken before the round's reads: a change during them wakes
			// the next round.
			changed = opts.Changed()
		}
		started := time.Now()
		all, err := c.round(ctx, get, objs, kept)
		if err != nil {
			return err
		}
		for i, st := range all {
			if info, _ := kinds.Lookup(st.Ref.GroupKind()); st.Ready && info.Health.StaysReady() {
				kept[i] = st
			}
		}
		if opts.OnProgress != nil {
			opts.OnProgress(all)
		}
		var notReady, failed []Status
		for _, s := range all {
			if s.Failed {
				failed = append(failed, s)
			}
			if !s.Ready {
				notReady = append(notReady, s)
			}
		}
		switch {
		case len(failed) > 0:
			return &DegradedError{Reason: ReasonFailed, Objects: failed}
		case len(notReady) == 0:
			return nil
		case !time.Now().Before(deadline):
			return &DegradedError{Reason: ReasonProgressDeadlineExceeded, Objects: notReady}
		}
		interval := opts.Interval
		if first && changed != nil {
			// The first round may judge from copies older than the
			// cache's (a getter answers it with what the writes
			// returned, which for CRDs applied a step ago is long
			// past): the cache is asked again soon.
			interval = opts.MinInterval
		}
		first = false
		if err := SleepUntilChanged(ctx, interval, changed, started.Add(opts.MinInterval)); err != nil {
			return err
		}
	}
}

// SleepUntilChanged returns after interval, or once changed is closed
// (never when nil) but not before notBefore, or with ctx's error.
func SleepUntilChanged(ctx context.Context, interval time.Duration, changed <-chan struct{}, notBefore time.Time) error {
	t := time.NewTimer(interval)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	case <-changed:
	}
	if d := time.Until(notBefore); d > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
	}
	return nil
}

// roundParallelism bounds the reads of one round that run at once: a
// getter without a cache sends a GET for each object (KubeVirt's 21 CRDs
// took 130 ms one after the other).
const roundParallelism = 8

// round reads and checks every object of objs but those kept (by index:
// their status is taken as it is), up to roundParallelism at once; the
// statuses keep objs' order.
func (c *Checker) round(ctx context.Context, get Getter, objs []*unstructured.Unstructured, kept map[int]Status) ([]Status, error) {
	out := make([]Status, len(objs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(roundParallelism)
	for i, o := range objs {
		if st, ok := kept[i]; ok {
			out[i] = st
			continue
		}
		g.Go(func() error {
			live, err := get(gctx, o)
			switch {
			case err != nil:
				if ctx.Err() != nil {
					return ctx.Err()
				}
				out[i] = Status{Ref: strategy.RefOf(o), Reason: err.Error()}
			case live == nil:
				out[i] = Status{Ref: strategy.RefOf(o), Reason: "does not exist"}
			default:
				st, err := c.Check(gctx, live)
				if err != nil {
					// A read that failed is reported and retried next round.
					st.Ready, st.Reason = false, err.Error()
				}
				out[i] = st
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return out, nil
}
