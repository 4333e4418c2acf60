package operator

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// stage is one named step of the reconcile pipeline. Run returns done when
// the pipeline stops here for now (the state's result says when to come
// back).
type stage struct {
	Name string
	Run  func(ctx context.Context, s *state) (done bool, err error)
}

// state is what the stages of one reconcile share.
type state struct {
	// Installation is the view of the object reconciled (Resource.View);
	// its Status is written by the stages (under the state's lock while a
	// rollout runs) and into the object by writeStatus.
	Installation *v1alpha1.Installation
	// Object is the object reconciled, as read at the start.
	Object client.Object
	// Config is the deployment configuration (stage config).
	Config *identity.Config
	// Algorithm computes the configuration's identifier (stage config).
	Algorithm identity.Algorithm
	// Target is the identity of the strategy to deploy.
	Target strategy.Identity
	// Strategy is the loaded, customised strategy (stage load).
	Strategy *strategy.Strategy
	// Result says when to reconcile again.
	Result ctrl.Result
	// Outcome names the reconcile's outcome for the metrics.
	Outcome string

	log     logr.Logger
	mu      sync.Mutex // guards Installation.Status
	writeMu sync.Mutex // serialises status writes
	// written is the status as read at the start or last written: a
	// write of the same status is skipped (an unchanged resync writes
	// nothing).
	written *v1alpha1.InstallationStatus
	// lastWrite is the object as this reconcile's last status write
	// returned it: the next write starts from it instead of reading the
	// object again (a conflict, someone else's write since, reads it).
	lastWrite client.Object
	// claims is the claim stage's answer, which the rollout that follows
	// takes (engine.Options.Claims) instead of checking again.
	claims *engine.Claims
	// walking is set when the strategy loaded is an intermediate version
	// of an upgrade path (walkUpgradePath).
	walking bool
}

// stages returns the pipeline of an Installation that is not being deleted.
func (r *Reconciler) stages() []stage {
	return []stage{
		{"finalizer", r.stageFinalizer},
		{"active", r.stageActive},
		{"config", r.stageConfig},
		{"load", r.stageLoad},
		{"claim", r.stageClaim},
		{"apply", r.stageApply},
		{"gc", r.walkOn(r.stageGC)},
	}
}

// deleteStages returns the pipeline of an Installation being deleted.
func (r *Reconciler) deleteStages() []stage {
	return []stage{
		{"deleting", r.stageDeleting},
		{"workloads", r.stageWorkloads},
		{"uninstall", r.stageUninstall},
		{"strategies", r.stageDeleteStrategies},
		{"release", r.stageRelease},
	}
}

// current returns the Installation from the cache, or from the API server
// when the cached copy is not the version the operator last wrote or read
// (see Reconciler.wrote).
func (r *Reconciler) current(ctx context.Context, key client.ObjectKey) (client.Object, error) {
	obj := r.res.New()
	if err := r.client.Get(ctx, key, obj); err != nil {
		return nil, err
	}
	if rv, ok := r.wrote.Load(key); !ok || rv == obj.GetResourceVersion() {
		return obj, nil
	}
	if err := r.reader.Get(ctx, key, obj); err != nil {
		return nil, err
	}
	r.wrote.Store(key, obj.GetResourceVersion())
	return obj, nil
}

// Reconcile runs the stages for one Installation.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	if req.Namespace == r.opts.KeyNamespace {
		// The key namespace is never an install namespace: its ConfigMap
		// editors would choose the keys that vouch for what is applied.
		log.Error(ErrKeyNamespaceWatched, "installation in the key namespace not reconciled", "namespace", req.Namespace)
		return ctrl.Result{}, nil
	}
	obj, err := r.current(ctx, req.NamespacedName)
	if apierrors.IsNotFound(err) {
		r.wrote.Delete(req.NamespacedName)
		r.metrics.forget(req.Namespace, req.Name)
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	in, err := r.view(obj)
	if err != nil {
		// The author's object cannot be read as an installation: nothing
		// is done until it changes.
		log.Error(err, "not reconciled")
		return ctrl.Result{}, nil
	}
	s := &state{Installation: in, Object: obj, log: log, Outcome: "deployed", written: in.Status.DeepCopy()}
	start := time.Now()
	defer func() { r.metrics.ReconcileSeconds.WithLabelValues(s.Outcome).Observe(time.Since(start).Seconds()) }()
	stages := r.stages()
	if in.IsDeleting() {
		stages = r.deleteStages()
		s.Outcome = "deleted"
	}
	for _, st := range stages {
		done, err := st.Run(ctx, s)
		if err != nil {
			s.Outcome = "error"
			r.metrics.Reconciles.WithLabelValues("error").Inc()
			r.metrics.setPhase(in.Namespace, in.Name, in.Status.Phase)
			return s.Result, fmt.Errorf("stage %s: %w", st.Name, err)
		}
		if done {
			break
		}
	}
	r.metrics.Reconciles.WithLabelValues(s.Outcome).Inc()
	if in.Status.Phase != "" && !in.IsDeleting() {
		r.metrics.setPhase(in.Namespace, in.Name, in.Status.Phase)
	}
	return s.Result, nil
}

// update runs f on the status under the state's lock.
func (s *state) update(f func(in *v1alpha1.Installation)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s.Installation)
}

// stageFinalizer puts the finalizer on the Installation.
func (r *Reconciler) stageFinalizer(ctx context.Context, s *state) (bool, error) {
	in, obj := s.Installation, s.Object
	if controllerutil.ContainsFinalizer(obj, v1alpha1.Finalizer) {
		return false, nil
	}
	obj = obj.DeepCopyObject().(client.Object)
	controllerutil.AddFinalizer(obj, v1alpha1.Finalizer)
	if err := r.client.Update(ctx, obj); err != nil {
		return false, fmt.Errorf("add finalizer: %w", err)
	}
	s.Object = obj
	in.Finalizers, in.ResourceVersion = obj.GetFinalizers(), obj.GetResourceVersion()
	r.wrote.Store(client.ObjectKeyFromObject(obj), obj.GetResourceVersion())
	return false, nil
}

// activeInstallation returns the Installation of the namespace that may
// manage the product: the oldest that is not being deleted (ties go to the
// lesser name). Installations set aside as AnotherInstallationActive count,
// so one of them takes over when the active one goes.
func (r *Reconciler) activeInstallation(ctx context.Context, namespace string) (*v1alpha1.Installation, error) {
	list, err := r.list(ctx, namespace)
	if err != nil {
		return nil, fmt.Errorf("list installations of namespace %s: %w", namespace, err)
	}
	var winner *v1alpha1.Installation
	for _, c := range list {
		if c.IsDeleting() {
			continue
		}
		if winner == nil || c.CreationTimestamp.Before(&winner.CreationTimestamp) ||
			(c.CreationTimestamp.Equal(&winner.CreationTimestamp) && c.Name < winner.Name) {
			winner = c
		}
	}
	return winner, nil
}

// stageActive stops an Installation that is not the active one of its
// namespace: phase Deleted, AnotherInstallationActive, nothing installed.
func (r *Reconciler) stageActive(ctx context.Context, s *state) (bool, error) {
	in := s.Installation
	winner, err := r.activeInstallation(ctx, in.Namespace)
	if err != nil {
		return false, err
	}
	if winner == nil || winner.Name == in.Name {
		return false, nil
	}
	msg := fmt.Sprintf("installation %s/%s is active in this namespace; this one installs nothing", winner.Namespace, winner.Name)
	changed := in.Status.Phase != v1alpha1.PhaseDeleted
	in.Status.Phase = v1alpha1.PhaseDeleted
	changed = in.SetCondition(v1alpha1.ConditionSynchronized, metav1.ConditionFalse, v1alpha1.ReasonAnotherInstallationActive, msg) || changed
	changed = in.SetCondition(v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonAnotherInstallationActive, msg) || changed
	changed = in.SetCondition(v1alpha1.ConditionAvailable, metav1.ConditionFalse, v1alpha1.ReasonAnotherInstallationActive, msg) || changed
	changed = in.SetCondition(v1alpha1.ConditionProgressing, metav1.ConditionFalse, v1alpha1.ReasonAnotherInstallationActive, msg) || changed
	if changed || in.Status.ObservedGeneration != in.Generation {
		if err := r.writeStatus(ctx, s); err != nil {
			return false, err
		}
		r.event(in, corev1.EventTypeWarning, v1alpha1.ReasonAnotherInstallationActive, "Check", "%s", msg)
		s.log.Info("another installation is active", "active", winner.Name)
	}
	s.Outcome = "inactive"
	s.Result.RequeueAfter = 30 * time.Second
	return true, nil
}

// stageConfig maps the spec onto the deployment configuration and computes
// the target identity (native algorithm).
func (r *Reconciler) stageConfig(_ context.Context, s *state) (bool, error) {
	cfg, alg, err := r.config(s.Installation)
	if err != nil {
		return false, err
	}
	s.Algorithm = alg
	id, err := cfg.Identity(alg)
	if err != nil {
		return false, fmt.Errorf("identity: %w", err)
	}
	s.Config, s.Target = cfg, id
	return false, nil
}
