package crdsafety

import (
	"fmt"
	"slices"
	"sort"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Compare returns what replacing live (the CRD in the cluster) with
// desired would change that a rule flags, sorted by version, path and
// rule. Nothing is judged yet: findings judged by objects are unsafe only
// when Judge finds an object they affect.
func Compare(live, desired *apiextv1.CustomResourceDefinition) []Finding {
	name := desired.Name
	var out []Finding
	if live.Spec.Scope != desired.Spec.Scope {
		out = append(out, Finding{CRD: name, Rule: RuleScope, Judge: Always,
			Detail: fmt.Sprintf("%s -> %s: the API server refuses it, and deleting the CRD to recreate it deletes every custom resource of it", live.Spec.Scope, desired.Spec.Scope)})
	}
	want := map[string]*apiextv1.CustomResourceDefinitionVersion{}
	storage := ""
	for i := range desired.Spec.Versions {
		v := &desired.Spec.Versions[i]
		want[v.Name] = v
		if v.Storage {
			storage = v.Name
		}
	}
	webhook := desired.Spec.Conversion != nil && desired.Spec.Conversion.Strategy == apiextv1.WebhookConverter ||
		live.Spec.Conversion != nil && live.Spec.Conversion.Strategy == apiextv1.WebhookConverter
	for i := range live.Spec.Versions {
		lv := &live.Spec.Versions[i]
		dv := want[lv.Name]
		stored := slices.Contains(live.Status.StoredVersions, lv.Name)
		if lv.Served && stored && dv != nil && !dv.Served {
			// Kept but no longer served: objects stay stored at it and
			// are not migrated (a version the definition drops is; see
			// below).
			out = append(out, Finding{CRD: name, Version: lv.Name, Rule: RuleServedVersionRemoved, Judge: AnyObject, ReadAt: lv.Name,
				Detail: "a stored version no longer served: objects stored at it are not migrated, and clients reading it break"})
		}
		switch {
		case dv != nil:
			out = append(out, compareSchemas(name, lv.Name, lv.Name, schemaOf(lv), schemaOf(dv), "")...)
		case stored && (webhook || storage == ""):
			why := "the new definition has no storage version"
			if webhook {
				why = "objects are migrated through a conversion webhook, whose losses cannot be checked"
			}
			out = append(out, Finding{CRD: name, Version: lv.Name, Rule: RuleStoredVersionRemoved, Judge: AnyObject, ReadAt: storageOf(live),
				Detail: "stored version removed: " + why})
		case stored && lv.Served:
			// The stored objects are rewritten at the new storage version
			// before the version goes (pkg/engine): what that
			// version's schema lacks of this one's is lost.
			out = append(out, compareSchemas(name, lv.Name, lv.Name, schemaOf(lv), schemaOf(want[storage]),
				fmt.Sprintf("stored version %s migrated to %s: ", lv.Name, storage))...)
		case stored:
			// Not served (an interrupted migration leaves it so): its
			// objects cannot be read at it, so any object counts.
			for _, f := range compareSchemas(name, lv.Name, storageOf(live), schemaOf(lv), schemaOf(want[storage]),
				fmt.Sprintf("stored version %s (not served, so not readable) migrated to %s: ", lv.Name, storage)) {
				f.Judge = AnyObject
				out = append(out, f)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Version != out[j].Version {
			return out[i].Version < out[j].Version
		}
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return slices.Index(Rules, out[i].Rule) < slices.Index(Rules, out[j].Rule)
	})
	return out
}

func storageOf(crd *apiextv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

func schemaOf(v *apiextv1.CustomResourceDefinitionVersion) *apiextv1.JSONSchemaProps {
	if v == nil || v.Schema == nil {
		return nil
	}
	return v.Schema.OpenAPIV3Schema
}
