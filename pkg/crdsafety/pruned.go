package crdsafety

import (
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Pruned returns the finding of a live CRD that the run deletes
// (RuleCRDPruned): its prune, let to delete CRDs, deletes one the target
// strategy lacks, and with it every custom resource of it. It is judged by
// any object (AnyObject) read at ReadAt, a version the CRD serves (its
// storage version if served: any served version lists every object).
// ReadAt is "" when the CRD serves none: nothing can be read, and the
// caller says so to Judge (truncated), which keeps the finding.
//
// The objects to give are the CRD's custom resources the prune does not
// delete itself (Stored.Pruned: the installation's own, dropped by the
// target): the others are users' data.
func Pruned(crd *apiextv1.CustomResourceDefinition) Finding {
	f := Finding{CRD: crd.Name, Rule: RuleCRDPruned, Judge: AnyObject,
		Detail: "the target strategy lacks the CRD and prune deletes it: every custom resource of it is deleted with it"}
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		if f.ReadAt == "" || v.Storage {
			f.ReadAt = v.Name
		}
	}
	return f
}
