// Package v1alpha1 holds the installstrategy.io/v1alpha1 API: the
// Installation custom resource that the installstrategy operator drives
// through install, upgrade, rollback and uninstall of a product from its
// install strategy.
//
// The CustomResourceDefinition in config/crd/bases and the DeepCopy methods
// in zz_generated.deepcopy.go are generated from these types by
// controller-gen (make manifests, make generate); never edit them by hand.
// docs/API.md describes the API field by field.
//
// +kubebuilder:object:generate=true
// +groupName=installstrategy.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of the Installation resource.
const GroupName = "installstrategy.io"

// GroupVersion is the group and version of the types in this package.
var GroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// Resource returns the group-qualified resource of the given plural name in
// this group, e.g. Resource("installations").
func Resource(resource string) schema.GroupResource {
	return GroupVersion.WithResource(resource).GroupResource()
}

var (
	// SchemeBuilder registers the types of this package with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &Installation{}, &InstallationList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
