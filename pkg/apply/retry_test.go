package apply

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/installstrategy/installstrategy/pkg/strategy"
)

func TestIsTransientAndServerTrouble(t *testing.T) {
	gr := schema.GroupResource{Group: "example.com", Resource: "gadgets"}
	webhook := apierrors.NewInternalError(errors.New(`failed calling webhook "x": failed to call webhook: dial tcp 127.0.100.1:443: connect: connection refused`))
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"webhook backend not up", webhook, true},
		{"wrapped webhook error", fmt.Errorf("apply Gadget/x: %w", webhook), true},
		{"429", apierrors.NewTooManyRequests("slow down", 1), true},
		{"503", apierrors.NewServiceUnavailable("starting"), true},
		{"504", apierrors.NewTimeoutError("timeout", 1), true},
		{"server timeout", apierrors.NewServerTimeout(gr, "create", 1), true},
		{"object modified", apierrors.NewConflict(gr, "x", errors.New("the object has been modified")), true},
		{"connection refused", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, true},
		{"connection reset", fmt.Errorf("post: %w", syscall.ECONNRESET), true},
		{"unexpected EOF", io.ErrUnexpectedEOF, true},
		{"etcd leader change", errors.New("etcdserver: leader changed"), true},
		{"etcd leader change from the server", apierrors.NewInternalError(errors.New("etcdserver: leader changed")), true},
		{"webhook timed out", apierrors.NewInternalError(errors.New(`failed calling webhook "x": failed to call webhook: Post "https://x.y.svc:443/validate?timeout=10s": context deadline exceeded`)), true},
		{"500", apierrors.NewGenericServerResponse(500, "create", gr, "x", "boom", 0, true), true},
		{"502", apierrors.NewGenericServerResponse(502, "create", gr, "x", "bad gateway", 0, true), true},
		{"connection lost", errors.New("http2: client connection lost"), true},
		{"immutable", apierrors.NewInvalid(schema.GroupKind{Kind: "Job"}, "x", field.ErrorList{field.Invalid(field.NewPath("spec", "selector"), nil, "field is immutable")}), false},
		{"invalid", apierrors.NewInvalid(schema.GroupKind{Kind: "Gadget"}, "x", nil), false},
		{"forbidden", apierrors.NewForbidden(gr, "x", errors.New("no")), false},
		{"denied by a webhook", apierrors.NewBadRequest(`admission webhook "x" denied the request`), false},
		{"already exists", apierrors.NewAlreadyExists(gr, "x"), false},
		{"another owner's object", &ConflictError{Ref: strategy.ObjectRef{Kind: "ConfigMap", Name: "x"}}, false},
	}
	// The transient errors that say the API server or etcd is in trouble
	// (after which the cache is distrusted), not the answer to one request.
	trouble := map[string]bool{"503": true, "504": true, "server timeout": true, "connection refused": true,
		"connection reset": true, "unexpected EOF": true, "etcd leader change": true, "etcd leader change from the server": true,
		"500": true, "502": true, "connection lost": true}
	for _, c := range cases {
		if got := isTransient(c.err); got != c.want {
			t.Errorf("%s: IsTransient(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
		if got := serverTrouble(c.err); got != trouble[c.name] {
			t.Errorf("%s: serverTrouble(%v) = %v, want %v", c.name, c.err, got, trouble[c.name])
		}
	}
}

// TestRetryStopsAtPermanentErrors: a transient failure is sent again until
// it succeeds; a permanent one is returned after one attempt and says it
// was not retried, while apierrors' predicates still see the server's error.
func TestRetryStopsAtPermanentErrors(t *testing.T) {
	a := &Applier{opts: Options{RetryFor: 10 * time.Second}}
	gr := schema.GroupResource{Resource: "configmaps"}
	calls := 0
	err := a.retry(t.Context(), func() error {
		calls++
		if calls < 3 {
			return apierrors.NewTooManyRequests("slow down", 0)
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("transient: err %v after %d calls, want success after 3", err, calls)
	}
	calls = 0
	err = a.retry(t.Context(), func() error {
		calls++
		return apierrors.NewForbidden(gr, "x", errors.New("no"))
	})
	if calls != 1 || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "permanent, not retried") {
		t.Fatalf("permanent: %d calls, err %v; want 1 call and a forbidden error saying it was not retried", calls, err)
	}
	var perm *permanentError
	if !errors.As(err, &perm) {
		t.Fatalf("permanent: %T is not a *PermanentError", err)
	}
	calls = 0
	err = a.retry(t.Context(), func() error {
		calls++
		return apierrors.NewNotFound(gr, "x")
	})
	if calls != 1 || !apierrors.IsNotFound(err) || errors.As(err, &perm) {
		t.Fatalf("not found: %d calls, err %v; want 1 call and the plain not-found error", calls, err)
	}
}
