package apply

import (
	"fmt"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// Prepare returns the object Apply would write for obj given its live
// object (nil when absent): with the owner's labels and identity (see
// prepare), or, for an existing object that no installation owns of a kind
// the table merges into (kinds.Info.MergeIntoExisting), only the
// strategy's own fields (see prepareShared).
func (a *Applier) Prepare(obj, live *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	obj = withLive(obj, live)
	if live != nil && a.shared(obj, live) {
		return prepareShared(obj), nil
	}
	prepared, err := prepare(obj, a.opts.Identity, a.opts.Owner, !a.opts.LeavePodTemplates)
	if err != nil || live == nil {
		return prepared, err
	}
	return a.keepTemplate(obj, prepared, live)
}

// keepTemplate returns prepared with the live pod template in place of the
// strategy's when a workload is adopted whose live template already holds
// the strategy's: every field the strategy sets, with its value, plus what
// the previous installer and the server added (its own identity
// annotations, its node placement, an appended list entry, defaults; see
// Additions). Writing the strategy's template instead would change the
// template (if only by the identity annotations) and so replace every pod
// of the workload for nothing. KeptTemplateAnnotation records the hash of
// the template that was not written: while it still equals the strategy's
// and the live template still holds the strategy's, the template is kept on
// later applies too; a new strategy or identity, or drift that loses a
// strategy field, writes the strategy's template.
func (a *Applier) keepTemplate(obj, prepared, live *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	info, _ := kinds.Lookup(prepared.GroupVersionKind().GroupKind())
	if info.PodTemplate == nil {
		return prepared, nil
	}
	want, _, err := unstructured.NestedMap(prepared.Object, info.PodTemplate...)
	if err != nil {
		return nil, fmt.Errorf("prepare %s: pod template: %w", strategy.RefOf(obj), err)
	}
	h, err := hashOf(&unstructured.Unstructured{Object: want})
	if err != nil {
		return nil, fmt.Errorf("prepare %s: pod template: %w", strategy.RefOf(obj), err)
	}
	claim := ClaimOf(live, a.opts.Owner)
	adopting := claim == inventory.ClaimNone && a.adoptable(strategy.RefOf(obj), live)
	kept := claim == inventory.ClaimOurs && live.GetAnnotations()[metakeys.KeptTemplateAnnotation] == h
	if !adopting && !kept {
		return prepared, nil
	}
	if _, missing := templateHeld(obj, live); missing != "" {
		return prepared, nil
	}
	tmpl, _, _ := unstructured.NestedMap(live.Object, info.PodTemplate...)
	unstructured.RemoveNestedField(tmpl, "metadata", "creationTimestamp")
	out := prepared.DeepCopy()
	if err := unstructured.SetNestedMap(out.Object, tmpl, info.PodTemplate...); err != nil {
		return nil, fmt.Errorf("prepare %s: pod template: %w", strategy.RefOf(obj), err)
	}
	// The applied hash stays the strategy's: it is a property of the
	// strategy, not of what the previous installer left.
	ann := out.GetAnnotations()
	ann[metakeys.KeptTemplateAnnotation] = h
	out.SetAnnotations(ann)
	return out, nil
}

// writesTemplate reports whether a prepared workload's pod template is
// written as the strategy has it (not kept, see keepTemplate).
func writesTemplate(prepared *unstructured.Unstructured) bool {
	info, _ := kinds.Lookup(prepared.GroupVersionKind().GroupKind())
	_, kept := prepared.GetAnnotations()[metakeys.KeptTemplateAnnotation]
	return info.PodTemplate != nil && !kept
}

// templateHeld reports whether live is a workload whose pod template holds
// the one of the strategy object obj (see Additions; without the identity
// annotations Prepare adds, so obj may be prepared already): workload is false for kinds without a pod
// template, missing names the first field of the strategy's template that
// the live one does not hold ("" when it holds them all).
func templateHeld(obj, live *unstructured.Unstructured) (workload bool, missing string) {
	info, _ := kinds.Lookup(obj.GroupVersionKind().GroupKind())
	if info.PodTemplate == nil {
		return false, ""
	}
	want, _, _ := unstructured.NestedMap(strip(obj).Object, info.PodTemplate...)
	if ann, ok, _ := unstructured.NestedStringMap(want, "metadata", "annotations"); ok {
		delete(ann, metakeys.InstallStrategyVersionAnnotation)
		delete(ann, metakeys.InstallStrategyRegistryAnnotation)
		delete(ann, metakeys.InstallStrategyIdentifierAnnotation)
		_ = unstructured.SetNestedStringMap(want, ann, "metadata", "annotations")
	}
	have, found, _ := unstructured.NestedMap(live.Object, info.PodTemplate...)
	if !found {
		return true, strings.Join(info.PodTemplate, ".")
	}
	if ch := additions(want, have); len(ch) > 0 {
		return true, "." + strings.Join(info.PodTemplate, ".") + ch[0].Path
	}
	return true, ""
}

// shared reports whether a live object is merged into rather than owned:
// no installation owns it, its kind is merged into (Namespaces), and it is
// not adopted — an implicit object (ImplicitAnnotation: a namespace the
// strategy's objects live in but that it does not define) never is.
func (a *Applier) shared(obj, live *unstructured.Unstructured) bool {
	info, _ := kinds.Lookup(live.GroupVersionKind().GroupKind())
	implicit := obj.GetAnnotations()[metakeys.ImplicitAnnotation] != ""
	return info.MergeIntoExisting && ClaimOf(live, a.opts.Owner) == inventory.ClaimNone && (!a.adoptable(strategy.RefOf(obj), live) || implicit)
}

// Decide compares a prepared object (see Applier.Prepare) with its live
// object (nil when absent) and says what Apply would do, without writing.
func (a *Applier) Decide(prepared, live *unstructured.Unstructured) Result {
	res := Result{Ref: strategy.RefOf(prepared), Object: live}
	if live == nil {
		res.Action = ActionCreate
		return res
	}
	claim := ClaimOf(live, a.opts.Owner)
	_, owned := prepared.GetAnnotations()[metakeys.AppliedHashAnnotation]
	released := claim == inventory.ClaimOther && a.released(res.Ref, live)
	switch {
	case released:
	case claim == inventory.ClaimOther:
		res.Action = ActionConflict
		res.Reason = a.conflictOf(res.Ref, live, claim).Error()
		return res
	case claim == inventory.ClaimNone && !owned:
		// Prepared by prepareShared.
		res.Shared = true
	case claim == inventory.ClaimNone && !a.adoptable(res.Ref, live):
		res.Action = ActionConflict
		res.Reason = a.conflictOf(res.Ref, live, claim).Error()
		return res
	case claim == inventory.ClaimNone:
		res.Adopted = true
	}
	changes := differences(prepared.Object, live.Object)
	if len(changes) == 0 {
		res.Action = ActionUnchanged
		if res.Shared {
			res.Reason = "existing, not an installation's: merged into, never deleted"
		}
		return res
	}
	res.Action = ActionUpdate
	res.Changes = changes
	switch {
	case res.Adopted:
		res.Reason = "adopted" + fromWhom(live)
		if _, kept := prepared.GetAnnotations()[metakeys.KeptTemplateAnnotation]; kept {
			res.Reason += "; pod template kept (it holds the strategy's)"
		} else if workload, missing := templateHeld(prepared, live); workload && missing != "" {
			res.Reason += "; pod template written, replacing the pods: the live one does not hold the strategy's " + missing
		}
	case res.Shared:
		res.Reason = "existing, not an installation's: the strategy's fields merged in, never deleted"
	case released:
		res.Reason = "taken over from installation " + inventory.OtherOwner(live.GetLabels()) + ", which no longer exists"
	case claim == inventory.ClaimLegacy || claim == inventory.ClaimLegacyShared:
		res.Reason = "relabelled for installation " + a.opts.Owner.String() + " (written by an older installstrategy)"
	case live.GetAnnotations()[metakeys.AppliedHashAnnotation] != prepared.GetAnnotations()[metakeys.AppliedHashAnnotation]:
		res.Reason = "strategy changed"
	default:
		res.Reason = "drift at " + changes[0].Path
	}
	return res
}

// released reports whether live, another installation's object, is one
// Options.Released hands over: its labels still name the installation that
// was found gone.
func (a *Applier) released(ref strategy.ObjectRef, live *unstructured.Unstructured) bool {
	gone, ok := a.opts.Released[ref]
	return ok && gone == inventory.OtherOwner(live.GetLabels())
}

// fromWhom says who wrote an adopted object: its managed-by label and its
// field managers.
func fromWhom(live *unstructured.Unstructured) string {
	var parts []string
	if by := live.GetLabels()[metakeys.ManagedByLabel]; by != "" {
		parts = append(parts, "managed-by "+by)
	}
	seen := map[string]bool{}
	var managers []string
	for _, f := range live.GetManagedFields() {
		if !seen[f.Manager] {
			seen[f.Manager] = true
			managers = append(managers, f.Manager)
		}
	}
	if len(managers) > 0 {
		parts = append(parts, "field managers "+strings.Join(managers, ", "))
	}
	if len(parts) == 0 {
		return ""
	}
	return " from " + strings.Join(parts, "; ")
}
