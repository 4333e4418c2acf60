package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
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
	// OnEvent, when set, is called for every deleted (EventPruned) or
	// kept (EventKept) object. An object whose resource policy keeps it
	// (inventory.KeptBy) is kept and leaves the inventory, as Helm's
	// uninstall leaves it orphaned.
	OnEvent func(Event)
	// CASecret names the Secret that keeps the installation's CA (see
	// CertOptions.CASecret); "" means DefaultCASecret.
	CASecret string
	// AdmissionOnly deletes only the installation's webhooks and
	// APIServices (and keeps its inventory of the rest): what a caller
	// does before it deletes the product's custom resources itself, so
	// that a webhook whose backend is down cannot refuse their deletion.
	AdmissionOnly bool
	// SystemConsent names the system objects (inventory.SystemObject) the
	// installation adopted that may be deleted; the zero value keeps them
	// all (inventory.DeletionNeedsConsent).
	SystemConsent inventory.SystemConsent
	// Strategy, when set, is the strategy installed: its Helm hooks of the
	// pre-delete phase run before anything is deleted, those of the
	// post-delete phase after (and the namespaces they live in are
	// deleted after them), as helm uninstall runs them. Nil runs none.
	Strategy *strategy.Strategy
	// deferNamespaces are namespaces this uninstall leaves, with their
	// inventory entries, for a later one (post-delete hooks run in them).
	deferNamespaces []string
}

func (rc *Reconciler) uninstall(ctx context.Context, opts UninstallOptions) ([]strategy.ObjectRef, error) {
	if err := opts.Owner.Validate(); err != nil {
		return nil, fmt.Errorf("uninstall: %w", err)
	}
	a, kube := rc.applier(apply.Options{Owner: opts.Owner, SystemConsent: opts.SystemConsent}), rc.kube
	invs := inventory.NewStore(kube)
	inv, err := invs.Get(ctx, opts.Owner)
	if err != nil {
		return nil, fmt.Errorf("uninstall: %w", err)
	}
	items, err := removable(ctx, a, inv, opts)
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
	// Webhooks and APIServices go first (prune order): a webhook whose
	// backend is down must not keep anything else from being deleted, the
	// CA Secret included.
	admission, rest := splitAdmission(items)
	dc := newDeleteClients(a, kube)
	d, k, err := deleteItems(ctx, dc, inv, opts.CASecret, admission, emit)
	if err != nil {
		errs = append(errs, err)
	}
	if opts.AdmissionOnly {
		if err := errors.Join(errs...); err != nil {
			return d, fmt.Errorf("uninstall: %w", err)
		}
		if len(d) > 0 || len(k) > 0 {
			if err := invs.Write(ctx, inv); err != nil && !apierrors.IsNotFound(err) {
				return d, fmt.Errorf("uninstall: %w", err)
			}
		}
		return d, nil
	}
	// The CA Secret is the installation's bookkeeping, not a strategy
	// object: its key must not outlive the installation, and it goes
	// before the namespace it may be in is checked for foreign objects.
	deleted, err := deleteCASecrets(ctx, a, kube, opts)
	if err != nil {
		errs = append(errs, err)
	}
	deleted = append(deleted, d...)
	d2, _, err := deleteItems(ctx, dc, inv, opts.CASecret, rest, emit)
	deleted = append(deleted, d2...)
	d = append(d, d2...)
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
	if err := releaseInventory(ctx, invs, inv, opts); err != nil {
		return deleted, fmt.Errorf("uninstall: %w", err)
	}
	return deleted, nil
}

// removable lists what an uninstall deletes (plan.Removable): every object
// of the inventory, or, for an installation without one, of what an older
// installstrategy marked as its own; Namespaces the caller deletes later
// (deferNamespaces) are left out.
func removable(ctx context.Context, a plan.Cluster, inv *inventory.Inventory, opts UninstallOptions) ([]plan.Item, error) {
	if !inv.Exists() {
		legacy, err := plan.LegacyObjects(ctx, a)
		if err != nil {
			return nil, err
		}
		inv.Add(legacy...)
	}
	items, err := plan.Removable(ctx, a, plan.ObserveOptions{PruneCRDs: !opts.KeepCRDs, Inventory: inv})
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(items, func(it plan.Item) bool {
		return it.Ref.GroupKind() == namespaceKind && slices.Contains(opts.deferNamespaces, it.Ref.Name)
	}), nil
}

// releaseInventory ends the inventory of an uninstalled installation: it
// is deleted, unless objects were kept (CRDs, deferred Namespaces), which
// stay recorded in a released inventory, so a later uninstall can remove
// them and another installation of the product may take them over.
func releaseInventory(ctx context.Context, invs *inventory.Store, inv *inventory.Inventory, opts UninstallOptions) error {
	if (opts.KeepCRDs || len(opts.deferNamespaces) > 0) && len(inv.Entries) > 0 {
		inv.Released = true
		if err := invs.Write(ctx, inv); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	}
	return invs.Delete(ctx, opts.Owner)
}

func contains(refs []strategy.ObjectRef, ref strategy.ObjectRef) bool {
	for _, r := range refs {
		if r == ref {
			return true
		}
	}
	return false
}

// splitAdmission splits items (in prune order) into the leading
// webhooks and APIServices (the kind table's prune order 0) and the rest.
func splitAdmission(items []plan.Item) (admission, rest []plan.Item) {
	i := 0
	for ; i < len(items); i++ {
		if info, _ := kinds.Lookup(items[i].Ref.GroupKind()); info.PruneOrder != kinds.PruneOrderOf(kinds.StageAdmission) {
			break
		}
	}
	return items[:i], items[i:]
}

// deleteCASecrets deletes the installation's CA Secret, in every namespace
// (the CA lives where the strategy's TLS Secrets are), retrying transient
// failures as the applier does.
func deleteCASecrets(ctx context.Context, a applier, kube kubernetes.Interface, opts UninstallOptions) ([]strategy.ObjectRef, error) {
	name := opts.CASecret
	if name == "" {
		name = DefaultCASecret
	}
	selectors := []string{opts.Owner.Selector()}
	if opts.Owner.Kind == inventory.KindInstallation {
		selectors = append(selectors, metakeys.ManagedByLabel+"="+inventory.LegacyManagedBy(opts.Owner.Namespace, opts.Owner.Name))
	}
	var refs []strategy.ObjectRef
	var errs []error
	for _, sel := range selectors {
		list, err := kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{LabelSelector: sel, FieldSelector: "metadata.name=" + name})
		if err != nil {
			return refs, fmt.Errorf("list ca secrets: %w", err)
		}
		for _, sec := range list.Items {
			err := a.Retry(ctx, func() error {
				return kube.CoreV1().Secrets(sec.Namespace).Delete(ctx, sec.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &sec.UID}})
			})
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("delete ca secret %s/%s: %w", sec.Namespace, sec.Name, err))
				continue
			}
			refs = append(refs, strategy.ObjectRef{Group: kinds.Secret.Group, Kind: kinds.Secret.Kind, Namespace: sec.Namespace, Name: sec.Name})
		}
	}
	return refs, errors.Join(errs...)
}
