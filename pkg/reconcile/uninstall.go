package reconcile

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// UninstallOptions tunes Uninstall. Owner is required; the zero value of
// the rest deletes CRDs too and does not wait.
type UninstallOptions struct {
	// Owner is the installation to remove.
	Owner inventory.Owner
	// KeepCRDs leaves CRDs (and so the users' custom resources).
	KeepCRDs bool
	// Wait waits until every deleted object is gone.
	Wait bool
	// OnEvent, when set, is called for every deleted or kept object.
	OnEvent func(Event)
	// CASecret names the Secret that keeps the installation's CA (see
	// CertOptions.CASecret); "" means DefaultCASecret.
	CASecret string
}

func (rc *Reconciler) uninstall(ctx context.Context, opts UninstallOptions) ([]strategy.ObjectRef, error) {
	if err := opts.Owner.Validate(); err != nil {
		return nil, fmt.Errorf("uninstall: %w", err)
	}
	a, kube := rc.applier(apply.Options{Owner: opts.Owner}), rc.kube
	invs := inventory.NewStore(kube)
	inv, err := invs.Get(ctx, opts.Owner)
	if err != nil {
		return nil, fmt.Errorf("uninstall: %w", err)
	}
	if !inv.Exists() {
		legacy, err := plan.LegacyObjects(ctx, a)
		if err != nil {
			return nil, fmt.Errorf("uninstall: %w", err)
		}
		inv.Add(legacy...)
	}
	items, err := plan.Removable(ctx, a, plan.ObserveOptions{PruneCRDs: !opts.KeepCRDs, Inventory: inv})
	if err != nil {
		return nil, fmt.Errorf("uninstall: %w", err)
	}
	emit := func(e Event) {
		if opts.OnEvent != nil {
			e.Step = "uninstall"
			opts.OnEvent(e)
		}
	}
	var errs []error
	// The CA Secret is the installation's bookkeeping, not a strategy
	// object: its key must not outlive the installation, and it goes
	// before the namespace it may be in is checked for foreign objects.
	deleted, err := deleteCASecrets(ctx, kube, opts)
	if err != nil {
		errs = append(errs, err)
	}
	d, _, err := deleteItems(ctx, a, kube, inv, opts.CASecret, items, emit)
	deleted = append(deleted, d...)
	if err != nil {
		errs = append(errs, err)
	}
	if opts.Wait {
		for _, it := range items {
			if it.Action == apply.ActionDelete && contains(d, it.Ref) {
				if err := a.WaitGone(ctx, it.Live); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return deleted, fmt.Errorf("uninstall: %w", err)
	}
	if opts.KeepCRDs && len(inv.Entries) > 0 {
		// The kept CRDs stay recorded, so a later uninstall can remove them.
		if err := invs.Write(ctx, inv); err != nil && !apierrors.IsNotFound(err) {
			return deleted, fmt.Errorf("uninstall: %w", err)
		}
		return deleted, nil
	}
	if err := invs.Delete(ctx, opts.Owner); err != nil {
		return deleted, fmt.Errorf("uninstall: %w", err)
	}
	return deleted, nil
}

func contains(refs []strategy.ObjectRef, ref strategy.ObjectRef) bool {
	for _, r := range refs {
		if r == ref {
			return true
		}
	}
	return false
}

// deleteCASecrets deletes the installation's CA Secret, in every namespace
// (the CA lives where the strategy's TLS Secrets are).
func deleteCASecrets(ctx context.Context, kube kubernetes.Interface, opts UninstallOptions) ([]strategy.ObjectRef, error) {
	name := opts.CASecret
	if name == "" {
		name = DefaultCASecret
	}
	selectors := []string{opts.Owner.Selector()}
	if opts.Owner.Kind == inventory.KindInstallation {
		selectors = append(selectors, apply.ManagedByLabel+"="+inventory.LegacyManagedBy(opts.Owner.Namespace, opts.Owner.Name))
	}
	var refs []strategy.ObjectRef
	var errs []error
	for _, sel := range selectors {
		list, err := kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{LabelSelector: sel, FieldSelector: "metadata.name=" + name})
		if err != nil {
			return refs, fmt.Errorf("uninstall: list ca secrets: %w", err)
		}
		for _, sec := range list.Items {
			err := kube.CoreV1().Secrets(sec.Namespace).Delete(ctx, sec.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &sec.UID}})
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("uninstall: delete ca secret %s/%s: %w", sec.Namespace, sec.Name, err))
				continue
			}
			refs = append(refs, strategy.ObjectRef{Kind: "Secret", Namespace: sec.Namespace, Name: sec.Name})
		}
	}
	return refs, errors.Join(errs...)
}
