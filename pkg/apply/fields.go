package apply

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// takeFields gives the applier's field manager the fields the previous
// installer set on an adopted object — server-side appliers (kubectl apply
// --server-side, Helm 4, Flux), kubectl's and Helm's client-side writes, and
// the client-side writes of the managers named after the object's
// managed-by label before the adoption (previous; KubeVirt's virt-operator
// labels what it writes "virt-operator", and its field manager is its
// binary's name: virt-operator, or virt-operator-v1.9.0 for a binary so
// named) —
// with one JSON patch guarded by the object's resourceVersion. Fields of
// controllers (kube-controller-manager's revision annotation, status) stay
// theirs.
func (a *Applier) takeFields(ctx context.Context, ri dynamic.ResourceInterface, obj *unstructured.Unstructured, previous string) (*unstructured.Unstructured, error) {
	for attempt := 1; ; attempt++ {
		out, err := a.takeFieldsAt(ctx, ri, obj, previous)
		// A failed resourceVersion test is a 422 (or 400, 409): someone
		// wrote the object since (the Deployment controller's status, say).
		// Take the fields again on the latest version.
		if err == nil || attempt == 5 || !(apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsConflict(err)) {
			return out, err
		}
		if obj, err = ri.Get(ctx, obj.GetName(), metav1.GetOptions{}); err != nil {
			return nil, err
		}
	}
}

// takeFieldsAt is takeFields on obj's resourceVersion.
func (a *Applier) takeFieldsAt(ctx context.Context, ri dynamic.ResourceInterface, obj *unstructured.Unstructured, previous string) (*unstructured.Unstructured, error) {
	var keep []metav1.ManagedFieldsEntry
	changed := false
	for _, f := range obj.GetManagedFields() {
		if f.Manager != a.opts.FieldManager && f.Subresource == "" && installerManager(f, previous) {
			changed = true
			f.Manager = a.opts.FieldManager
			f.Operation = metav1.ManagedFieldsOperationApply
		}
		keep = append(keep, f)
	}
	if !changed {
		return obj, nil
	}
	// Entries of one manager and operation must be merged into one: keep
	// the applier's own Apply entry, whose field set the next apply
	// recomputes, and union the others into it.
	merged, err := mergeManagedFields(keep, a.opts.FieldManager)
	if err != nil {
		return nil, err
	}
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/resourceVersion", "value": obj.GetResourceVersion()},
		{"op": "replace", "path": "/metadata/managedFields", "value": merged},
	})
	if err != nil {
		return nil, err
	}
	return ri.Patch(ctx, obj.GetName(), types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: a.opts.FieldManager})
}

// markAdopted writes metakeys.AdoptedAnnotation on obj, an adopted system
// object (inventory.MarkAdoption), with a field manager of its own
// (metakeys.AdoptionFieldManager): the applier's own applies never carry
// the annotation and so never remove it, and the mark stays where only
// who may write the object can take it off (inventory.DeletionNeedsConsent).
func (a *Applier) markAdopted(ctx context.Context, ri dynamic.ResourceInterface, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{metakeys.AdoptedAnnotation: a.opts.Owner.String()}}})
	if err != nil {
		return nil, err
	}
	return ri.Patch(ctx, obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: metakeys.AdoptionFieldManager})
}

// InheritsFields reports whether adopting live gives the applier's field
// manager the fields of entry f (see takeFields): f is an installer's
// (server-side appliers, kubectl, Helm, the manager named by live's
// managed-by label) and not a subresource's.
func InheritsFields(f metav1.ManagedFieldsEntry, live *unstructured.Unstructured) bool {
	return f.Subresource == "" && installerManager(f, live.GetLabels()[metakeys.ManagedByLabel])
}

// installerManager reports field managers of tools that install manifests:
// server-side appliers, kubectl, Helm, and the managers whose name starts
// with the object's managed-by label before the adoption (previous, "" for
// none), case aside.
func installerManager(f metav1.ManagedFieldsEntry, previous string) bool {
	return f.Operation == metav1.ManagedFieldsOperationApply || strings.HasPrefix(f.Manager, "kubectl") || strings.HasPrefix(f.Manager, "helm") ||
		(previous != "" && strings.HasPrefix(strings.ToLower(f.Manager), strings.ToLower(previous)))
}

// mergeManagedFields unions the field sets of entries that share a manager,
// operation and subresource, so the list stays valid after renaming.
func mergeManagedFields(entries []metav1.ManagedFieldsEntry, manager string) ([]metav1.ManagedFieldsEntry, error) {
	type key struct{ manager, op, sub, api string }
	var order []key
	sets := map[key]*fieldpath.Set{}
	first := map[key]metav1.ManagedFieldsEntry{}
	for _, e := range entries {
		k := key{e.Manager, string(e.Operation), e.Subresource, e.APIVersion}
		set := &fieldpath.Set{}
		if e.FieldsV1 != nil {
			if err := set.FromJSON(bytes.NewReader(e.FieldsV1.Raw)); err != nil {
				return nil, fmt.Errorf("managed fields of %s: %w", e.Manager, err)
			}
		}
		if prev, ok := sets[k]; ok {
			sets[k] = prev.Union(set)
			continue
		}
		order = append(order, k)
		sets[k], first[k] = set, e
	}
	out := make([]metav1.ManagedFieldsEntry, 0, len(order))
	for _, k := range order {
		e := first[k]
		raw, err := sets[k].ToJSON()
		if err != nil {
			return nil, fmt.Errorf("managed fields of %s: %w", manager, err)
		}
		e.FieldsV1 = &metav1.FieldsV1{Raw: raw}
		out = append(out, e)
	}
	return out, nil
}
