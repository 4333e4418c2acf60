// Package apply owns writing one strategy object to the cluster: it injects
// the managed-by label and the identity annotations, writes with server-side
// apply under one field manager, skips the write when the live object already
// holds what would be applied, falls back to create/update for objects that
// server-side apply rejects, recreates objects whose immutable fields change,
// and refuses to overwrite objects that are not ours unless told to adopt
// them.
package apply

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// prepare returns the object as the applier writes it: without status and
// creation timestamps, with the owner's labels (pkg/inventory) and the
// identity annotations on the object and, when templates is true, on its
// pod template, and with the metakeys.AppliedHashAnnotation over all of
// that. obj is not modified; the result shares obj's values below its top
// level and its metadata, so it must not be changed in place below them
// (copy it first, as the fallback update does).
func prepare(obj *unstructured.Unstructured, id strategy.Identity, owner inventory.Owner, templates bool) (*unstructured.Unstructured, error) {
	u := strip(obj)
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range owner.Labels() {
		labels[k] = v
	}
	u.SetLabels(labels)
	ann := identityAnnotations(u.GetAnnotations(), id)
	delete(ann, metakeys.AppliedHashAnnotation)
	u.SetAnnotations(ann)

	info, _ := kinds.Lookup(u.GroupVersionKind().GroupKind())
	if info.PodTemplate != nil && templates {
		tmpl, found, err := unstructured.NestedMap(u.Object, info.PodTemplate...)
		if err != nil {
			return nil, fmt.Errorf("prepare %s: pod template: %w", strategy.RefOf(obj), err)
		}
		if !found {
			tmpl = map[string]any{}
		}
		unstructured.RemoveNestedField(tmpl, "metadata", "creationTimestamp")
		tmplAnn, _, _ := unstructured.NestedStringMap(tmpl, "metadata", "annotations")
		tmplAnn = identityAnnotations(tmplAnn, id)
		if err := unstructured.SetNestedStringMap(tmpl, tmplAnn, "metadata", "annotations"); err != nil {
			return nil, fmt.Errorf("prepare %s: pod template: %w", strategy.RefOf(obj), err)
		}
		ownPath(u.Object, info.PodTemplate...)
		if err := unstructured.SetNestedMap(u.Object, tmpl, info.PodTemplate...); err != nil {
			return nil, fmt.Errorf("prepare %s: pod template: %w", strategy.RefOf(obj), err)
		}
	}
	h, err := hashOf(u)
	if err != nil {
		return nil, fmt.Errorf("prepare %s: %w", strategy.RefOf(obj), err)
	}
	ann[metakeys.AppliedHashAnnotation] = h
	u.SetAnnotations(ann)
	return u, nil
}

// prepareShared returns the object as the applier writes it into an
// existing object that is not an installation's, of a kind the table marks
// kinds.Info.MergeIntoExisting (a Namespace made by someone else): the
// strategy's own fields only — no owner labels, identity or applied hash —
// so the object is never taken for ours and never deleted.
func prepareShared(obj *unstructured.Unstructured) *unstructured.Unstructured {
	u := strip(obj)
	if ann := u.GetAnnotations(); ann[metakeys.ImplicitAnnotation] != "" {
		delete(ann, metakeys.ImplicitAnnotation)
		u.SetAnnotations(ann)
	}
	return u
}

// strip copies obj without what the server owns. Only the top level and
// the metadata are copied: everything below them is shared with obj (a
// strategy's objects are held for every rollout; copying all of a
// KubeVirt CRD's schema for each write held megabytes at once), so
// whatever changes a field below them must first make the maps on its
// path its own (ownPath).
func strip(obj *unstructured.Unstructured) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: maps.Clone(obj.Object)}
	if u.Object == nil {
		u.Object = map[string]any{}
	}
	delete(u.Object, "status")
	if md, ok := u.Object["metadata"].(map[string]any); ok {
		md = maps.Clone(md)
		for _, f := range []string{"creationTimestamp", "resourceVersion", "uid", "managedFields"} {
			delete(md, f)
		}
		u.Object["metadata"] = md
	}
	if info, _ := kinds.Lookup(u.GroupVersionKind().GroupKind()); info.FoldsStringData {
		secretStringDataToData(u)
	}
	return u
}

// ownPath replaces the maps of obj on the way to the field at path (all
// but its last element) with shallow copies, so that setting that field
// changes no map obj shares with another object (see strip).
func ownPath(obj map[string]any, path ...string) {
	m := obj
	for _, k := range path[:len(path)-1] {
		child, ok := m[k].(map[string]any)
		if !ok {
			return // SetNestedField makes new maps from here on
		}
		child = maps.Clone(child)
		m[k] = child
		m = child
	}
}

// secretStringDataToData moves a Secret's stringData into data, as the API
// server would, so the applied object compares equal to the live one.
func secretStringDataToData(u *unstructured.Unstructured) {
	sd, found, _ := unstructured.NestedStringMap(u.Object, "stringData")
	if !found {
		return
	}
	delete(u.Object, "stringData")
	data, _, _ := unstructured.NestedMap(u.Object, "data")
	if data == nil {
		data = map[string]any{}
	}
	for k, v := range sd {
		data[k] = base64.StdEncoding.EncodeToString([]byte(v))
	}
	u.Object["data"] = data
}

func identityAnnotations(ann map[string]string, id strategy.Identity) map[string]string {
	if ann == nil {
		ann = map[string]string{}
	}
	ann[metakeys.InstallStrategyVersionAnnotation] = id.Version
	ann[metakeys.InstallStrategyRegistryAnnotation] = id.Registry
	ann[metakeys.InstallStrategyIdentifierAnnotation] = id.Identifier
	return ann
}

// hashOf hashes the canonical JSON of an object (encoding/json sorts map
// keys).
func hashOf(u *unstructured.Unstructured) (string, error) {
	b, err := json.Marshal(u.Object)
	if err != nil {
		return "", fmt.Errorf("hash: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16]), nil
}

// ClaimOf says whom a live object belongs to, seen from owner: its labels
// (inventory.Owner.ClaimOf), where the legacy claims also need the
// metakeys.AppliedHashAnnotation (an older installstrategy wrote both; strategy
// ConfigMaps of pkg/store carry the managed-by value but no applied hash).
func ClaimOf(live *unstructured.Unstructured, owner inventory.Owner) inventory.Claim {
	c := owner.ClaimOf(live.GetLabels())
	if c == inventory.ClaimLegacy || c == inventory.ClaimLegacyShared {
		if _, ok := live.GetAnnotations()[metakeys.AppliedHashAnnotation]; !ok {
			return inventory.ClaimNone
		}
	}
	return c
}

// IsOurs reports whether a live object is the owner's to update and to
// delete: it carries the owner's labels, or the labels an older
// installstrategy wrote for this owner, and the metakeys.AppliedHashAnnotation.
// (An object labelled by hand is still deleted only when it is in the
// owner's inventory too; see pkg/engine.)
func IsOurs(live *unstructured.Unstructured, owner inventory.Owner) bool {
	if c := ClaimOf(live, owner); c == inventory.ClaimLegacy {
		return true
	} else if c != inventory.ClaimOurs {
		return false
	}
	_, ok := live.GetAnnotations()[metakeys.AppliedHashAnnotation]
	return ok
}

// TemplateIdentity returns the identity a live workload's pod template was
// applied for: the identity annotations of the template, or, when the
// applier kept the template of an adopted workload
// (metakeys.KeptTemplateAnnotation), the workload's own, which the same write set.
func TemplateIdentity(live *unstructured.Unstructured) strategy.Identity {
	if _, kept := live.GetAnnotations()[metakeys.KeptTemplateAnnotation]; kept {
		return identityOf(live)
	}
	info, _ := kinds.Lookup(live.GroupVersionKind().GroupKind())
	if info.PodTemplate == nil {
		return strategy.Identity{}
	}
	ann, _, _ := unstructured.NestedStringMap(live.Object, append(append([]string{}, info.PodTemplate...), "metadata", "annotations")...)
	return strategy.Identity{Version: ann[metakeys.InstallStrategyVersionAnnotation], Registry: ann[metakeys.InstallStrategyRegistryAnnotation], Identifier: ann[metakeys.InstallStrategyIdentifierAnnotation]}
}

// identityOf returns the identity annotations of a live object.
func identityOf(live *unstructured.Unstructured) strategy.Identity {
	ann := live.GetAnnotations()
	return strategy.Identity{Version: ann[metakeys.InstallStrategyVersionAnnotation], Registry: ann[metakeys.InstallStrategyRegistryAnnotation], Identifier: ann[metakeys.InstallStrategyIdentifierAnnotation]}
}
