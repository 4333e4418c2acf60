package operator

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
)

// writeStatus writes the state's status through the status subresource,
// on the latest version of the object.
func (r *Reconciler) writeStatus(ctx context.Context, s *state) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	// Ready, Reconciling and Stalled are derived from the rest of the
	// status for the generation this reconcile works on, which the write
	// records as observed: kstatus reads them together.
	s.Installation.SetStatusConditions()
	status := s.Installation.Status.DeepCopy()
	status.ObservedGeneration = s.Installation.Generation
	key := client.ObjectKeyFromObject(s.Installation)
	// The view SetStatus writes from: the spec and metadata of this
	// reconcile, the status to write.
	view := &v1alpha1.Installation{ObjectMeta: *s.Installation.ObjectMeta.DeepCopy(), Spec: *s.Installation.Spec.DeepCopy(), Status: *status}
	s.mu.Unlock()
	if s.written != nil && apiequality.Semantic.DeepEqual(*s.written, *status) {
		return nil
	}
	known := s.lastWrite
	s.lastWrite = nil
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		latest := known
		known = nil
		if latest == nil {
			latest = r.res.New()
			if err := r.reader.Get(ctx, key, latest); err != nil {
				return err
			}
		}
		// s.written may be older than the object (someone else wrote
		// it since): the object itself decides.
		next, changed, err := r.withStatus(latest, view)
		if err != nil {
			return err
		}
		if !changed {
			r.wrote.Store(key, latest.GetResourceVersion())
			return nil
		}
		if err := r.client.Status().Update(ctx, next); err != nil {
			return err
		}
		r.wrote.Store(key, next.GetResourceVersion())
		s.lastWrite = next
		return nil
	})
	if apierrors.IsNotFound(err) {
		// Gone (its finalizer was removed): nothing to report on.
		return nil
	}
	if err != nil {
		return fmt.Errorf("write status of installation %s: %w", key, err)
	}
	s.written = status
	return nil
}

func (r *Reconciler) event(in *v1alpha1.Installation, eventType, reason, action, note string, args ...any) {
	r.recorder.Eventf(r.ref(in), nil, eventType, reason, action, "%s", eventNote(fmt.Sprintf(note, args...)))
}

// maxEventNote is the API server's limit on an Event's note.
const maxEventNote = 1024

// eventNote shortens a note to the API server's limit (which rejects the
// whole Event otherwise).
func eventNote(s string) string { return v1alpha1.Truncate(s, maxEventNote) }

// failLoad records a load failure: Degraded with reason, and the phase.
func (r *Reconciler) failLoad(ctx context.Context, s *state, phase v1alpha1.InstallationPhase, reason string, cause error) error {
	in := s.Installation
	s.update(func(in *v1alpha1.Installation) {
		switch {
		case phase != "":
			in.Status.Phase = phase
		case in.Status.Phase == "":
			in.Status.Phase = v1alpha1.PhaseDeploying
		}
		in.SetCondition(v1alpha1.ConditionDegraded, metav1.ConditionTrue, reason, cause.Error())
	})
	if err := r.writeStatus(ctx, s); err != nil {
		return err
	}
	r.event(in, corev1.EventTypeWarning, reason, "Load", "%s", cause.Error())
	s.log.Info("strategy not loaded", "reason", reason, "error", cause.Error())
	s.Outcome = "degraded"
	return nil
}
