package apply

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/installstrategy/installstrategy/pkg/strategy"
)

func TestIsTransient(t *testing.T) {
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
		{"invalid", apierrors.NewInvalid(schema.GroupKind{Kind: "Gadget"}, "x", nil), false},
		{"forbidden", apierrors.NewForbidden(gr, "x", errors.New("no")), false},
		{"denied by a webhook", apierrors.NewBadRequest(`admission webhook "x" denied the request`), false},
		{"already exists", apierrors.NewAlreadyExists(gr, "x"), false},
		{"another owner's object", &ConflictError{Ref: strategy.ObjectRef{Kind: "ConfigMap", Name: "x"}}, false},
	}
	for _, c := range cases {
		if got := IsTransient(c.err); got != c.want {
			t.Errorf("%s: IsTransient(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
