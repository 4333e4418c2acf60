package apply

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// defaultRetryFor is how long Apply retries a transient failure when
// Options.RetryFor is 0.
const defaultRetryFor = time.Minute

// isTransient reports whether a failed request may succeed when sent again
// unchanged: the server is overloaded or briefly unavailable (429, 500,
// 502, 503, 504, timeouts, an etcd leader change), an admission webhook
// could not be called (its backend is not up yet: the API server answers
// 500 "failed calling webhook"), the object was modified meanwhile (409
// Conflict on update), or the connection broke. Validation, permission and
// immutability errors are permanent, and so is a *ConflictError (another
// owner's object).
func isTransient(err error) bool {
	if err == nil {
		return false
	}
	var owned *ConflictError
	if errors.As(err, &owned) {
		return false
	}
	switch {
	case apierrors.IsTooManyRequests(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err),
		apierrors.IsServiceUnavailable(err), apierrors.IsInternalError(err), apierrors.IsUnexpectedServerError(err):
		return true
	case apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err):
		return true
	}
	if status, ok := err.(apierrors.APIStatus); ok || errors.As(err, &status) {
		code := status.Status().Code
		return code == 500 || code == 502 || code == 503 || code == 504
	}
	if utilnet.IsConnectionReset(err) || utilnet.IsConnectionRefused(err) || utilnet.IsProbableEOF(err) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "etcdserver: leader changed") || strings.Contains(msg, "etcdserver: request timed out") ||
		strings.Contains(msg, "http2: client connection lost") || strings.Contains(msg, "TLS handshake timeout")
}

// serverTrouble reports whether a failed request says the API server or
// etcd is failing or restarting (unavailable, timing out, an internal
// error, a broken connection), after which informers may have stopped
// following the cluster: a transient error that is not the server's
// answer to this request alone (429, a 409 conflict, an admission webhook
// that could not be called yet).
func serverTrouble(err error) bool {
	if !isTransient(err) || apierrors.IsTooManyRequests(err) || apierrors.IsConflict(err) {
		return false
	}
	return !strings.Contains(err.Error(), "failed calling webhook")
}

// permanentError marks a failure the API server gave that isTransient
// judged permanent (validation, permission, immutability, a webhook's
// denial): it was not retried, and its message says so.
type permanentError struct{ Err error }

func (e *permanentError) Error() string { return e.Err.Error() + " (permanent, not retried)" }

// Unwrap gives the server's error, so apierrors' predicates still apply.
func (e *permanentError) Unwrap() error { return e.Err }

// permanent wraps an API server's error in a *permanentError; other errors
// (another owner's object, a local failure) are returned as they are.
func permanent(err error) error {
	var status apierrors.APIStatus
	var owned *ConflictError
	if errors.As(err, &owned) || !errors.As(err, &status) || apierrors.IsNotFound(err) {
		return err
	}
	return &permanentError{Err: err}
}

// Retry calls f as Apply and Delete send their requests: again while it
// fails with a transient error, for up to Options.RetryFor; a permanent
// error is returned at once as a *permanentError.
func (a *Applier) Retry(ctx context.Context, f func() error) error { return a.retry(ctx, f) }

// retry calls f until it succeeds, fails with an error that is not
// transient, or retrying has gone on for Options.RetryFor; the waits grow
// from 200 ms to 5 s. The last error says how long it was retried.
func (a *Applier) retry(ctx context.Context, f func() error) error {
	limit := a.opts.RetryFor
	if limit == 0 {
		limit = defaultRetryFor
	}
	start := time.Now()
	wait := 200 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil || limit < 0 {
			return err
		}
		if !isTransient(err) {
			return permanent(err)
		}
		if serverTrouble(err) {
			a.DistrustCache(DistrustFor)
		}
		if time.Since(start)+wait > limit {
			return fmt.Errorf("%w (still failing after %d attempts in %s)", err, attempt, time.Since(start).Round(time.Second))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (retrying stopped: %v)", err, ctx.Err())
		case <-t.C:
		}
		wait = min(wait*2, 5*time.Second)
	}
}
