package reconcile

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// UninstallOptions tunes Uninstall. The zero value deletes the objects
// marked with apply.DefaultManagedBy, CRDs included.
type UninstallOptions struct {
	// ManagedBy is the managed-by value of the installation; "" means
	// apply.DefaultManagedBy.
	ManagedBy string
	// KeepCRDs leaves CRDs (and so the users' custom resources).
	KeepCRDs bool
	// Wait waits until every deleted object is gone.
	Wait bool
	// OnEvent, when set, is called for every deleted object.
	OnEvent func(Event)
	// CASecret names the Secret that keeps the installation's CA (see
	// CertOptions.CASecret); "" means DefaultCASecret.
	CASecret string
}

// Uninstall deletes every object that is ours (see plan.Prunable), in
// prune order: webhooks and
// APIServices first, CRDs last. It returns the deleted objects.
func Uninstall(ctx context.Context, cfg *rest.Config, opts UninstallOptions) ([]strategy.ObjectRef, error) {
	a, err := apply.NewForConfig(cfg, apply.Options{ManagedBy: opts.ManagedBy})
	if err != nil {
		return nil, err
	}
	items, err := plan.Prunable(ctx, a, &strategy.Strategy{}, plan.ObserveOptions{PruneCRDs: !opts.KeepCRDs})
	if err != nil {
		return nil, fmt.Errorf("uninstall: %w", err)
	}
	var (
		deleted []strategy.ObjectRef
		errs    []error
	)
	for _, it := range items {
		if it.Action != apply.ActionDelete {
			continue
		}
		if err := a.Delete(ctx, it.Live); err != nil {
			errs = append(errs, err)
			continue
		}
		deleted = append(deleted, it.Ref)
		if opts.OnEvent != nil {
			opts.OnEvent(Event{Type: EventPruned, Step: "uninstall", Ref: it.Ref, Action: apply.ActionDelete})
		}
	}
	// The CA Secret carries the managed-by label but no identity (it is
	// not a strategy object), so prune never lists it; its key must not
	// outlive the installation.
	caRefs, err := deleteCASecrets(ctx, cfg, opts)
	deleted = append(deleted, caRefs...)
	if err != nil {
		errs = append(errs, err)
	}
	if opts.Wait {
		for _, it := range items {
			if it.Action == apply.ActionDelete {
				if err := a.WaitGone(ctx, it.Live); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return deleted, fmt.Errorf("uninstall: %w", err)
	}
	return deleted, nil
}

// deleteCASecrets deletes, in every namespace, the CA Secret of the
// installation marked with opts.ManagedBy.
func deleteCASecrets(ctx context.Context, cfg *rest.Config, opts UninstallOptions) ([]strategy.ObjectRef, error) {
	name := opts.CASecret
	if name == "" {
		name = DefaultCASecret
	}
	managedBy := opts.ManagedBy
	if managedBy == "" {
		managedBy = apply.DefaultManagedBy
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("uninstall: %w", err)
	}
	list, err := kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{
		LabelSelector: apply.ManagedByLabel + "=" + managedBy,
		FieldSelector: "metadata.name=" + name,
	})
	if err != nil {
		return nil, fmt.Errorf("uninstall: list ca secrets: %w", err)
	}
	var refs []strategy.ObjectRef
	var errs []error
	for _, sec := range list.Items {
		err := kube.CoreV1().Secrets(sec.Namespace).Delete(ctx, sec.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &sec.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("uninstall: delete ca secret %s/%s: %w", sec.Namespace, sec.Name, err))
			continue
		}
		refs = append(refs, strategy.ObjectRef{Kind: "Secret", Namespace: sec.Namespace, Name: sec.Name})
	}
	return refs, errors.Join(errs...)
}
