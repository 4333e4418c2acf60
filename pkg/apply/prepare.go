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

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// Labels and annotations the applier writes on every object it manages.
const (
	// ManagedByLabel names the writer of an object.
	ManagedByLabel = codec.ManagedByLabel
	// DefaultManagedBy is the managed-by value when Options.ManagedBy is "".
	DefaultManagedBy = codec.NativeManagedBy
	// DefaultFieldManager is the server-side apply field manager when
	// Options.FieldManager is "".
	DefaultFieldManager = "installstrategy"
	// VersionAnnotation records the target version an object was applied for
	// (on the object and its pod template).
	VersionAnnotation = "installstrategy.io/install-strategy-version"
	// RegistryAnnotation records the target registry.
	RegistryAnnotation = "installstrategy.io/install-strategy-registry"
	// IdentifierAnnotation records the target deployment identifier.
	IdentifierAnnotation = "installstrategy.io/install-strategy-identifier"
	// AppliedHashAnnotation holds the hash of what was last applied; with the
	// managed-by label it marks an object as written by the reconciler.
	AppliedHashAnnotation = "installstrategy.io/applied-hash"
)

// Prepare returns the object as the applier writes it: without status and
// creation timestamps, with the managed-by label and the identity
// annotations on the object and on its pod template, and with the
// AppliedHashAnnotation over all of that. obj is not modified.
func Prepare(obj *unstructured.Unstructured, id strategy.Identity, managedBy string) (*unstructured.Unstructured, error) {
	if managedBy == "" {
		managedBy = DefaultManagedBy
	}
	u := obj.DeepCopy()
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "metadata", "resourceVersion")
	unstructured.RemoveNestedField(u.Object, "metadata", "uid")
	unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
	if u.GroupVersionKind().GroupKind() == (schema.GroupKind{Kind: "Secret"}) {
		secretStringDataToData(u)
	}
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[ManagedByLabel] = managedBy
	u.SetLabels(labels)
	ann := identityAnnotations(u.GetAnnotations(), id)
	delete(ann, AppliedHashAnnotation)
	u.SetAnnotations(ann)

	info, _ := kinds.Lookup(u.GroupVersionKind().GroupKind())
	if info.PodTemplate != nil {
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
		if err := unstructured.SetNestedMap(u.Object, tmpl, info.PodTemplate...); err != nil {
			return nil, fmt.Errorf("prepare %s: pod template: %w", strategy.RefOf(obj), err)
		}
	}
	h, err := hashOf(u)
	if err != nil {
		return nil, fmt.Errorf("prepare %s: %w", strategy.RefOf(obj), err)
	}
	ann[AppliedHashAnnotation] = h
	u.SetAnnotations(ann)
	return u, nil
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
	ann[VersionAnnotation] = id.Version
	ann[RegistryAnnotation] = id.Registry
	ann[IdentifierAnnotation] = id.Identifier
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

// IsOurs reports whether a live object was written by an applier with the
// given managed-by value ("" means DefaultManagedBy): it carries the
// managed-by label and the AppliedHashAnnotation. Strategy ConfigMaps of
// pkg/store carry the same managed-by label but no applied hash, so they are
// never ours.
func IsOurs(live *unstructured.Unstructured, managedBy string) bool {
	if managedBy == "" {
		managedBy = DefaultManagedBy
	}
	if live.GetLabels()[ManagedByLabel] != managedBy {
		return false
	}
	_, ok := live.GetAnnotations()[AppliedHashAnnotation]
	return ok
}

// IdentityOf returns the identity annotations of a live object.
func IdentityOf(live *unstructured.Unstructured) strategy.Identity {
	ann := live.GetAnnotations()
	return strategy.Identity{Version: ann[VersionAnnotation], Registry: ann[RegistryAnnotation], Identifier: ann[IdentifierAnnotation]}
}
