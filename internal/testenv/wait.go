package testenv

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// DefaultTimeout bounds a wait whose context has no deadline.
const DefaultTimeout = 2 * time.Minute

// PollInterval is how often the waits check their condition.
const PollInterval = 200 * time.Millisecond

// Condition is checked by the waits: done reports success; state describes
// what was observed (it is shown when the wait times out); an error is
// remembered as the last state and the wait goes on, since a transient
// error should not end it.
type Condition func(ctx context.Context) (done bool, state string, err error)

// TimeoutError is returned by Poll when the condition was not met in time.
type TimeoutError struct {
	// What names what was waited for.
	What string
	// Last is the last observed state or error.
	Last string
	// Err is the context's error.
	Err error
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("wait for %s: %v; last observed: %s", e.What, e.Err, e.Last)
}

func (e *TimeoutError) Unwrap() error { return e.Err }

// Poll checks cond every PollInterval until it is done or ctx ends (after
// DefaultTimeout when ctx has no deadline). On timeout it returns a
// *TimeoutError with the last observed state.
func Poll(ctx context.Context, what string, cond Condition) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	last := "nothing observed yet"
	ticker := time.NewTicker(PollInterval)
	defer ticker.Stop()
	for {
		done, state, err := cond(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			// The error is most likely the context's; keep the last real state.
		case err != nil:
			last = "error: " + err.Error()
		case done:
			return nil
		default:
			last = state
		}
		select {
		case <-ctx.Done():
			return &TimeoutError{What: what, Last: last, Err: ctx.Err()}
		case <-ticker.C:
		}
	}
}

// WaitFor is Poll that ends the test with t.Fatal when the condition is not
// met in time.
func WaitFor(ctx context.Context, t testing.TB, what string, cond Condition) {
	t.Helper()
	if err := Poll(ctx, what, cond); err != nil {
		t.Fatal(err)
	}
}

// Never checks that cond stays false for d: it fails the test as soon as
// cond is done, and returns the last state after d. Use it sparingly (it
// always takes d) for "this must not happen" checks, such as a never-ready
// pod becoming ready.
func Never(ctx context.Context, t testing.TB, d time.Duration, what string, cond Condition) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	err := Poll(ctx, what, func(ctx context.Context) (bool, string, error) {
		done, state, err := cond(ctx)
		if err == nil && done {
			t.Fatalf("%s happened; observed: %s", what, state)
		}
		return false, state, err
	})
	var te *TimeoutError
	if !errors.As(err, &te) || !errors.Is(te.Err, context.DeadlineExceeded) {
		t.Fatalf("watching that %s never happens: %v", what, err)
	}
	return te.Last
}
