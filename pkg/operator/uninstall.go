package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/source"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// UninstallBlockedRequeue is how soon a blocked uninstall looks again.
const UninstallBlockedRequeue = 5 * time.Second

// stageDeleting marks the Installation as being removed.
func (r *Reconciler) stageDeleting(ctx context.Context, s *state) (bool, error) {
	in := s.Installation
	if !controllerutil.ContainsFinalizer(in, v1alpha1.Finalizer) {
		return true, nil
	}
	if in.Status.Phase == v1alpha1.PhaseDeleting {
		return false, nil
	}
	s.update(func(in *v1alpha1.Installation) {
		in.Status.Phase = v1alpha1.PhaseDeleting
		in.SetCondition(v1alpha1.ConditionProgressing, metav1.ConditionTrue, v1alpha1.ReasonDeletionInProgress, "removing the product")
		in.SetCondition(v1alpha1.ConditionAvailable, metav1.ConditionFalse, v1alpha1.ReasonDeletionInProgress, "removing the product")
	})
	if err := r.writeStatus(ctx, s); err != nil {
		return false, err
	}
	r.event(in, corev1.EventTypeNormal, v1alpha1.ReasonDeletionInProgress, "Uninstall", "removing the product")
	s.log.Info("uninstall started")
	return false, nil
}

// workload is a custom resource of the product and the resource it is
// served as.
type workload struct {
	unstructured.Unstructured
	resource schema.GroupVersionResource
}

// productWorkloads lists custom resources of the CRDs the Installation
// installed, up to max per CRD (0: all), leaving out those of the
// strategy itself (KubeVirt's cluster instancetypes are custom resources
// of its own CRDs): the uninstall removes those, they are not workloads.
func (r *Reconciler) productWorkloads(ctx context.Context, owner inventory.Owner, max int) ([]workload, error) {
	var crds []unstructured.Unstructured
	for _, sel := range []string{owner.Selector(), metakeys.ManagedByLabel + "=" + inventory.LegacyManagedBy(owner.Namespace, owner.Name)} {
		l, err := r.dyn.Resource(crdResource).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return nil, fmt.Errorf("list crds: %w", err)
		}
		crds = append(crds, l.Items...)
	}
	var out []workload
	for _, crd := range crds {
		gvr, ok := strategy.DefinedResource(&crd)
		if !ok || inventory.KeptBy(crd.GetAnnotations()) != "" {
			// A CRD its resource policy keeps stays with its custom
			// resources: they neither block the uninstall nor go.
			continue
		}
		group, plural := gvr.Group, gvr.Resource
		found := 0
		opts := metav1.ListOptions{Limit: 500}
		for max == 0 || found < max {
			list, err := r.dyn.Resource(gvr).List(ctx, opts)
			if apierrors.IsNotFound(err) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("list %s.%s: %w", plural, group, err)
			}
			for _, cr := range list.Items {
				if !apply.IsOurs(&cr, owner) && (max == 0 || found < max) {
					out = append(out, workload{cr, gvr})
					found++
				}
			}
			if opts.Continue = list.GetContinue(); opts.Continue == "" {
				break
			}
		}
	}
	return out, nil
}

// stageWorkloads applies the uninstall strategy to the product's custom
// resources: BlockUninstallIfWorkloadsExist waits while any exists,
// RemoveWorkloads deletes them.
func (r *Reconciler) stageWorkloads(ctx context.Context, s *state) (bool, error) {
	in := s.Installation
	owner := Owner(in)
	if in.Spec.UninstallStrategyOrDefault() == v1alpha1.UninstallBlockIfWorkloadsExist {
		crs, err := r.productWorkloads(ctx, owner, 1)
		if err != nil {
			return false, err
		}
		if len(crs) > 0 {
			msg := fmt.Sprintf("uninstall blocked: custom resources of the product exist, e.g. %s %s/%s; delete them or set uninstallStrategy RemoveWorkloads",
				crs[0].GetKind(), crs[0].GetNamespace(), crs[0].GetName())
			if s.Installation.SetCondition(v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonUninstallBlocked, msg) {
				if err := r.writeStatus(ctx, s); err != nil {
					return false, err
				}
				r.event(in, corev1.EventTypeWarning, v1alpha1.ReasonUninstallBlocked, "Uninstall", "%s", msg)
			}
			s.Outcome = "blocked"
			s.Result.RequeueAfter = UninstallBlockedRequeue
			return true, nil
		}
		return false, nil
	}
	crs, err := r.productWorkloads(ctx, owner, 0)
	if err != nil {
		return false, err
	}
	if len(crs) > 0 {
		// The product's webhooks go first: one whose backend is down
		// (failurePolicy Fail) would refuse every delete it guards.
		deleted, err := engine.Uninstall(ctx, r.cfg, engine.UninstallOptions{Owner: owner, AdmissionOnly: true})
		for _, ref := range deleted {
			r.metrics.Objects.WithLabelValues(ref.Kind, "delete").Inc()
		}
		if err != nil {
			return false, err
		}
	}
	var errs []error
	for _, cr := range crs {
		err := r.dyn.Resource(cr.resource).Namespace(cr.GetNamespace()).Delete(ctx, cr.GetName(), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete %s %s/%s: %w", cr.GetKind(), cr.GetNamespace(), cr.GetName(), err))
		}
	}
	return false, errors.Join(errs...)
}

// stageUninstall deletes every object of the product (CRDs only with
// pruneCRDs), in prune order, and waits until they are gone.
func (r *Reconciler) stageUninstall(ctx context.Context, s *state) (bool, error) {
	in := s.Installation
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	// Everything in the Installation's inventory that still carries its
	// labels, the CA Secret included; CRDs only with pruneCRDs.
	var kept, hooks []string
	applied, skipped := r.appliedStrategy(ctx, in)
	if skipped != nil {
		r.event(in, corev1.EventTypeWarning, ReasonDeleteHooksSkipped, "Uninstall", "no pre/post-delete hooks run: %v", skipped)
		s.log.Info("delete hooks skipped", "reason", skipped.Error())
	}
	deleted, err := r.rc.Uninstall(ctx, engine.UninstallOptions{
		Owner: Owner(in), KeepCRDs: !in.Spec.PruneCRDs, Wait: true, Strategy: applied,
		OnEvent: func(e engine.Event) {
			switch {
			case e.Type == engine.EventKept:
				kept = append(kept, e.Ref.String()+" ("+e.Reason+")")
			case e.Type == engine.EventApplied && strings.HasPrefix(e.Step, "hook "):
				hooks = append(hooks, e.Ref.String()+" ("+strings.TrimPrefix(e.Step, "hook ")+")")
			}
		}})
	if len(hooks) > 0 {
		r.event(in, corev1.EventTypeNormal, ReasonDeleteHooks, "Uninstall", "ran %d delete hooks: %s", len(hooks), strings.Join(hooks, "; "))
	}
	for _, ref := range deleted {
		r.metrics.Objects.WithLabelValues(ref.Kind, "delete").Inc()
	}
	if len(kept) > 0 {
		r.event(in, corev1.EventTypeNormal, v1alpha1.ReasonKept, "Uninstall", "kept %d objects: %s", len(kept), strings.Join(kept, "; "))
	}
	if err != nil {
		return false, err
	}
	s.log.Info("product removed", "objects", len(deleted), "kept", len(kept))
	return false, nil
}

// stageDeleteStrategies deletes the namespace's stored strategies and dump
// Jobs, unless another Installation of the namespace still needs them.
func (r *Reconciler) stageDeleteStrategies(ctx context.Context, s *state) (bool, error) {
	in := s.Installation
	winner, err := r.activeInstallation(ctx, in.Namespace)
	if err != nil {
		return false, err
	}
	if winner != nil {
		return false, nil
	}
	entries, err := r.store.List(ctx, in.Namespace)
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, e := range entries {
		if err := r.store.Delete(ctx, e); err != nil {
			errs = append(errs, err)
		}
	}
	bg := metav1.DeletePropagationBackground
	if err := r.kube.BatchV1().Jobs(in.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &bg},
		metav1.ListOptions{LabelSelector: metakeys.DumpJobLabel}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("delete dump jobs: %w", err))
	}
	return false, errors.Join(errs...)
}

// stageRelease records phase Deleted and removes the finalizer.
func (r *Reconciler) stageRelease(ctx context.Context, s *state) (bool, error) {
	in := s.Installation
	s.update(func(in *v1alpha1.Installation) {
		in.Status.Phase = v1alpha1.PhaseDeleted
		in.Status.Components = nil
		in.SetCondition(v1alpha1.ConditionProgressing, metav1.ConditionFalse, v1alpha1.ReasonDeleted, "the product was removed")
		in.SetCondition(v1alpha1.ConditionAvailable, metav1.ConditionFalse, v1alpha1.ReasonDeleted, "the product was removed")
		in.SetCondition(v1alpha1.ConditionDegraded, metav1.ConditionFalse, v1alpha1.ReasonDeleted, "")
	})
	if err := r.writeStatus(ctx, s); err != nil && !apierrors.IsNotFound(err) {
		return false, err
	}
	r.event(in, corev1.EventTypeNormal, v1alpha1.ReasonDeleted, "Uninstall", "the product was removed")
	latest := r.res.New()
	if err := r.reader.Get(ctx, client.ObjectKeyFromObject(in), latest); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}
	if controllerutil.RemoveFinalizer(latest, v1alpha1.Finalizer) {
		if err := r.client.Update(ctx, latest); err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("remove finalizer: %w", err)
		}
	}
	r.metrics.forget(in.Namespace, in.Name)
	r.wrote.Delete(client.ObjectKeyFromObject(in))
	s.log.Info("uninstall finished")
	return true, nil
}

// Events of an Installation's deletion about the chart's delete hooks.
const (
	// ReasonDeleteHooks: the pre/post-delete hooks of the strategy last
	// applied ran.
	ReasonDeleteHooks = "DeleteHooks"
	// ReasonDeleteHooksSkipped: the strategy last applied could not be
	// loaded or was not trusted, so no delete hook ran.
	ReasonDeleteHooksSkipped = "DeleteHooksSkipped"
)

// appliedStrategy loads, for the delete hooks, the strategy the
// Installation last applied, through the same trust decision as a
// reconcile: a configMap, OCI or Helm source through its policy (its
// signatures or pinned digest), the product and dump-Job strategies from
// the operator's store (signed by the operator's key). What it loads must
// be what was applied: the text's digest recorded in status.strategy
// (for a Helm source, whose render may draw new random values, the
// identifier: the chart's archive digest, the values and the release
// options). Anything else returns nil and why: a deletion then runs no
// hook rather than one from a source that changed since or was
// tampered with.
func (r *Reconciler) appliedStrategy(ctx context.Context, in *v1alpha1.Installation) (*strategy.Strategy, error) {
	st := in.Status.Strategy
	if st == nil || st.Digest == "" || in.Status.ObservedIdentifier == "" && in.Status.ObservedVersion == "" {
		return nil, nil // nothing was applied: nothing to hook
	}
	if _, err := r.operatorKey(ctx); err != nil {
		return nil, err
	}
	var (
		loaded *strategy.Strategy
		digest string
		err    error
	)
	var sl sourceLoad
	switch in.Spec.StrategySourceType() {
	case v1alpha1.StrategySourceConfigMap:
		sl, err = r.configMapSource(ctx, in)
	case v1alpha1.StrategySourceOCI:
		sl, err = r.ociSource(ctx, in)
	case v1alpha1.StrategySourceHelm:
		sl, err = r.helmSource(ctx, in)
	default:
		var l *store.Loaded
		if l, err = r.store.Load(ctx, in.Namespace, observedIdentity(in)); err == nil {
			loaded, digest = l.Strategy, l.Digest
		}
	}
	if err == nil && sl.Source != nil {
		var l *source.Loaded
		if l, err = sl.load(ctx); err == nil {
			if l.Strategy == nil {
				err = errors.New("the source is not ready")
			} else {
				loaded, digest = l.Strategy, l.Digest
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("the strategy last applied: %w", err)
	}
	same := digest == st.Digest
	if in.Spec.StrategySourceType() == v1alpha1.StrategySourceHelm {
		same = loaded.Identity.Identifier == in.Status.ObservedIdentifier
	}
	if !same {
		return nil, fmt.Errorf("the strategy the source gives now (%s, %s) is not the one last applied (%s, %s)",
			loaded.Identity.Identifier, digest, in.Status.ObservedIdentifier, st.Digest)
	}
	if err := Prepare(loaded, in); err != nil {
		return nil, err
	}
	return loaded, nil
}
