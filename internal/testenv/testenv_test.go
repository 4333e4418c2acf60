package testenv

import (
	"context"
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestRequireLoopback(t *testing.T) {
	for _, tc := range []struct {
		host string
		ok   bool
	}{
		{"https://127.0.0.1:6443", true},
		{"https://127.0.0.9", true},
		{"https://[::1]:6443", true},
		{"https://localhost:6443", true},
		{"https://10.0.0.1:6443", false},
		{"https://my-cluster.example.com", false},
		{"https://127.0.0.1.example.com", false},
	} {
		err := requireLoopback(tc.host)
		if (err == nil) != tc.ok {
			t.Errorf("requireLoopback(%q) = %v, want ok=%t", tc.host, err, tc.ok)
		}
	}
}

func TestPollReportsLastObservedState(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*PollInterval)
	defer cancel()
	n := 0
	err := Poll(ctx, "the thing", func(context.Context) (bool, string, error) {
		n++
		if n == 2 {
			return false, "", errors.New("transient")
		}
		return false, "observed " + strings.Repeat("x", n), nil
	})
	var te *TimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("Poll = %v, want a *TimeoutError", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) || te.What != "the thing" || !strings.HasPrefix(te.Last, "observed x") || n < 3 {
		t.Fatalf("Poll = %v (what %q, last %q after %d calls)", err, te.What, te.Last, n)
	}
}

func TestPollSucceeds(t *testing.T) {
	n := 0
	err := Poll(t.Context(), "third call", func(context.Context) (bool, string, error) {
		n++
		return n == 3, "", nil
	})
	if err != nil || n != 3 {
		t.Fatalf("Poll = %v after %d calls, want nil after 3", err, n)
	}
}

func TestNeverReturnsLastState(t *testing.T) {
	last := Never(t.Context(), t, 2*PollInterval, "a miracle", func(context.Context) (bool, string, error) {
		return false, "nothing happened", nil
	})
	if last != "nothing happened" {
		t.Fatalf("Never = %q", last)
	}
}

func TestDeploymentRolledOut(t *testing.T) {
	dep := func(gen, observed int64, want, replicas, updated, available int32) *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Generation: gen},
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(want)},
			Status: appsv1.DeploymentStatus{
				ObservedGeneration: observed, Replicas: replicas, UpdatedReplicas: updated, AvailableReplicas: available,
			},
		}
	}
	for _, tc := range []struct {
		name string
		d    *appsv1.Deployment
		want bool
	}{
		{"done", dep(2, 2, 3, 3, 3, 3), true},
		{"spec not observed", dep(3, 2, 3, 3, 3, 3), false},
		{"old replicas left", dep(2, 2, 3, 4, 3, 3), false},
		{"not all updated", dep(2, 2, 3, 3, 2, 3), false},
		{"not all available", dep(2, 2, 3, 3, 3, 2), false},
		{"scaled to zero", dep(1, 1, 0, 0, 0, 0), true},
	} {
		if got, state := DeploymentRolledOut(tc.d); got != tc.want {
			t.Errorf("%s: DeploymentRolledOut = %t (%s), want %t", tc.name, got, state, tc.want)
		}
	}
}
