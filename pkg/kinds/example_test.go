package kinds_test

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/installstrategy/installstrategy/pkg/kinds"
)

// Every per-kind behaviour is a field of the table: look a kind up, read
// the field, and never match on the kind's name.
func ExampleLookup() {
	deploy := schema.GroupKind{Group: "apps", Kind: "Deployment"}
	info, ok := kinds.Lookup(deploy)
	fmt.Println(ok, info.Resource, info.Namespaced, info.Stage > kinds.StageCRDs)

	// A custom resource is not in the table: it is applied after the
	// kinds that are.
	_, ok = kinds.Lookup(schema.GroupKind{Group: "example.com", Kind: "Widget"})
	fmt.Println(ok, kinds.Less(deploy, schema.GroupKind{Group: "example.com", Kind: "Widget"}))
	// Output:
	// true deployments true true
	// false true
}

// A workload's role comes from its annotation, else from the names a
// product's preset gives (KubeVirt's here), else from its kind.
func ExampleRoleOf() {
	ds := schema.GroupKind{Group: "apps", Kind: "DaemonSet"}
	deploy := schema.GroupKind{Group: "apps", Kind: "Deployment"}
	preset := kinds.KubeVirtRoles()
	fmt.Println(kinds.RoleOf(deploy, "virt-api", "", preset))
	fmt.Println(kinds.RoleOf(deploy, "my-controller", "", nil))
	fmt.Println(kinds.RoleOf(ds, "my-agent", "", nil))
	fmt.Println(kinds.RoleOf(deploy, "virt-api", string(kinds.RoleController), preset))
	// Output:
	// api
	// controller
	// handler
	// controller
}
