package operator

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/loader"
	"github.com/installstrategy/installstrategy/pkg/source"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/strategy"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// sourceLoad is the source of an Installation's strategy, as stageLoad
// loads it: pkg/source decides its trust before it is parsed; what is
// the operator's own is the errors' wording, the metrics' label and what
// status.strategy records.
type sourceLoad struct {
	source.Source
	// label names the source in the load metrics; untrusted loads of
	// the sources others write (configmap, oci, helm) are counted.
	label     string
	untrusted bool
	// customized is set when the source prepares the strategy itself
	// (a dump's loader caches it customised per generation).
	customized bool
	// wrap names the source in a load error (nil: as it is).
	wrap func(error) error
	// record fills status.strategy's source-specific fields once the
	// strategy is prepared.
	record func(*source.Loaded, *v1alpha1.StrategyStatus)
}

// load loads the strategy and names the source in an error.
func (sl sourceLoad) load(ctx context.Context) (*source.Loaded, error) {
	l, err := sl.Load(ctx)
	if err != nil && sl.wrap != nil {
		err = sl.wrap(err)
	}
	return l, err
}

// stageLoad loads the strategy of the target configuration from the
// spec's source (sourceOf) and prepares it (Prepare: placement and pull
// secrets, then the customizeComponents patches), the same way for every
// source.
func (r *Reconciler) stageLoad(ctx context.Context, s *state) (bool, error) {
	in := s.Installation
	if _, err := r.operatorKey(ctx); err != nil {
		// Nothing can be trusted without the key: say so, and retry.
		if ferr := r.failLoad(ctx, s, "", v1alpha1.ReasonStrategyLoadFailed, err); ferr != nil {
			return false, ferr
		}
		return false, err
	}
	status := &v1alpha1.StrategyStatus{Source: in.Spec.StrategySourceType()}
	sl, err := r.sourceOf(ctx, s, status)
	var l *source.Loaded
	if err == nil {
		l, err = sl.load(ctx)
	}
	if err == nil && l.Pending == nil {
		sl, l, err = r.walkUpgradePath(ctx, s, sl, l)
	}
	if err != nil {
		if sl.untrusted && errors.As(err, new(*trust.UntrustedError)) {
			r.metrics.UntrustedStrategies.WithLabelValues(sl.label).Inc()
		}
		return r.loadFailed(ctx, s, err)
	}
	if l.Pending != nil {
		r.metrics.StrategyLoads.WithLabelValues("job").Inc()
		return r.pending(ctx, s, l.Pending)
	}
	label := sl.label
	if label == "" {
		label = l.From // a dump: "cache" or "store"
	}
	r.metrics.StrategyLoads.WithLabelValues(label).Inc()
	if !sl.customized {
		if err := Prepare(l.Strategy, in); err != nil {
			return r.loadFailed(ctx, s, &InvalidSpecError{Err: err})
		}
		if status.Source != v1alpha1.StrategySourceProduct {
			s.Target = l.Strategy.Identity
		}
	}
	s.Strategy = l.Strategy
	status.Digest = l.Digest
	if sl.record != nil {
		sl.record(l, status)
	}
	s.update(func(in *v1alpha1.Installation) { in.Status.Strategy = status })
	return false, nil
}

// sourceOf is the source of the Installation's strategy. status.Source is
// the spec's source type; another version of the built-in product is
// dumped by the operator's own image, and recorded as that image.
func (r *Reconciler) sourceOf(ctx context.Context, s *state, status *v1alpha1.StrategyStatus) (sourceLoad, error) {
	in := s.Installation
	switch status.Source {
	case v1alpha1.StrategySourceConfigMap:
		return r.configMapSource(ctx, in)
	case v1alpha1.StrategySourceOCI:
		return r.ociSource(ctx, in)
	case v1alpha1.StrategySourceHelm:
		return r.helmSource(ctx, in)
	case v1alpha1.StrategySourceImage:
		status.Image = in.Spec.Strategy.Image
		return r.dumpSource(s, status.Image), nil
	}
	if r.opts.OperatorImage != "" && r.opts.Defaults.Version != "" && s.Config.Version != r.opts.Defaults.Version {
		// Another version of the built-in product: the operator's own
		// image dumps it.
		status.Source, status.Image = v1alpha1.StrategySourceImage, r.opts.OperatorImage
		return r.dumpSource(s, status.Image), nil
	}
	return sourceLoad{Source: source.Product{Generate: r.opts.Product, Config: s.Config, Store: r.store}, label: "product",
		record: func(l *source.Loaded, st *v1alpha1.StrategyStatus) { st.ConfigMap = l.ConfigMap }}, nil
}

// dumpSource is the strategy the image's operator dumps (pkg/loader: its
// cache, then the operator's store, then a dump Job); the loader prepares
// it (per generation).
func (r *Reconciler) dumpSource(s *state, image string) sourceLoad {
	in := s.Installation
	prepare := func(st *strategy.Strategy) error {
		if err := Prepare(st, in); err != nil {
			return &InvalidSpecError{Err: err}
		}
		return nil
	}
	req := loader.Request{Config: s.Config, Algorithm: s.Algorithm, Image: image, ImagePullSecrets: pullSecretNames(&in.Spec),
		Generation: in.Generation, Customize: prepare}
	return sourceLoad{Source: source.Dump{Loader: r.loader, Request: req}, customized: true}
}

// configMapSource is the strategy ConfigMap an Installation names, read
// through the trust gate with configMapPolicy: its metadata is judged
// before any chunk is fetched, its text before it is parsed, so an
// untrusted ConfigMap costs at most its bounded decode.
func (r *Reconciler) configMapSource(ctx context.Context, in *v1alpha1.Installation) (sourceLoad, error) {
	sl := sourceLoad{label: "configmap", untrusted: true}
	namespace, name := in.Namespace, in.Spec.Strategy.ConfigMap.Name
	entries, err := r.plain.List(ctx, namespace)
	for _, e := range entries {
		if e.Name != name {
			continue
		}
		policy, err := r.configMapPolicy(ctx, in)
		if err != nil {
			return sl, fmt.Errorf("strategy configmap %s: %w", e, err)
		}
		sl.Source = source.ConfigMap{Reader: r.plain, Entry: e, Gate: trust.Gate{Policy: policy}}
		sl.wrap = func(err error) error {
			if errors.As(err, new(*store.CorruptError)) {
				return err
			}
			return fmt.Errorf("strategy configmap %s: %w", e, err)
		}
		sl.record = func(l *source.Loaded, st *v1alpha1.StrategyStatus) {
			st.ConfigMap, st.VerifiedBy = l.ConfigMap, l.VerifiedBy
			if l.Statement != nil {
				st.Product = ptr.To(l.Statement.Product)
			}
		}
		return sl, nil
	}
	if err != nil {
		return sl, err
	}
	return sl, fmt.Errorf("strategy configmap %s/%s: %w", namespace, name, store.ErrNotFound)
}

// loadFailed records a load error and says what comes next: a refusal
// waits for the Installation to change (or the resync), an untrusted
// strategy for the next poll, a corrupt stored one is Failed, a failed
// dump Job is retried after its backoff; anything else is retried with
// the reconcile's error.
func (r *Reconciler) loadFailed(ctx context.Context, s *state, loadErr error) (bool, error) {
	in := s.Installation
	var corrupt *store.CorruptError
	var jobErr *loader.JobError
	var untrusted *trust.UntrustedError
	switch {
	case isRefusal(loadErr):
		// Nothing is applied until the Installation changes (or the
		// next resync finds the cause gone); what runs stays as it is.
		refusal, _ := asRefusal(loadErr)
		s.Result.RequeueAfter = r.resync()
		return true, r.failLoad(ctx, s, "", refusal.RefusalReason(), loadErr)
	case errors.As(loadErr, &untrusted):
		// Nothing is applied; what runs stays as it is (phase kept).
		s.Result.RequeueAfter = r.pollInterval(in)
		return true, r.failLoad(ctx, s, "", v1alpha1.ReasonUntrustedStrategy, loadErr)
	case errors.As(loadErr, &corrupt):
		s.Result.RequeueAfter = r.resync()
		return true, r.failLoad(ctx, s, v1alpha1.PhaseFailed, v1alpha1.ReasonStrategyTampered, loadErr)
	case errors.As(loadErr, &jobErr):
		s.Result.RequeueAfter = max(time.Until(jobErr.RetryAt), time.Second)
		return true, r.failLoad(ctx, s, "", v1alpha1.ReasonDumpJobFailed, loadErr)
	}
	if err := r.failLoad(ctx, s, "", v1alpha1.ReasonStrategyLoadFailed, loadErr); err != nil {
		return false, err
	}
	return false, loadErr
}

// pending records a dump Job at work and asks to come back.
func (r *Reconciler) pending(ctx context.Context, s *state, p *source.Pending) (bool, error) {
	s.update(func(in *v1alpha1.Installation) {
		in.Status.Phase = v1alpha1.PhaseDeploying
		in.Status.TargetVersion, in.Status.TargetRegistry, in.Status.TargetIdentifier = s.Target.Version, s.Target.Registry, s.Target.Identifier
		reason := v1alpha1.ReasonDeploymentInProgress
		if observedIdentity(in) != (strategy.Identity{}) {
			reason = v1alpha1.ReasonUpdateInProgress
		}
		in.SetCondition(v1alpha1.ConditionProgressing, metav1.ConditionTrue, reason, "dump job "+p.Job+" is writing the strategy")
	})
	if err := r.writeStatus(ctx, s); err != nil {
		return false, err
	}
	s.Outcome = "pending"
	s.Result.RequeueAfter = p.RequeueAfter
	return true, nil
}
