package identity_test

import (
	"fmt"

	"github.com/installstrategy/installstrategy/pkg/identity"
)

// The identifier of a configuration, under both algorithms, and the images
// it names.
func Example() {
	cfg, err := identity.ParseConfig([]byte(`{
		"namespace": "sample",
		"registry": "registry.example/sample",
		"version": "v1.1.0",
		"additionalProperties": {"ImagePullPolicy": "IfNotPresent"}
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, alg := range identity.Algorithms {
		id, err := alg.Identifier(cfg)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s: %s\n", alg.Name(), id)
	}
	fmt.Println(cfg.Image("sample-api"))
	// Output:
	// native: 77c62f46fc162788ddf22a8bd3fcf2361b568bdca683af0ad587524f41110b84
	// kubevirt: c2ab71b1ae70ac74cd2e601b60fdf8071bd6a577
	// registry.example/sample/sample-api:v1.1.0
}

// The deployment ID KubeVirt's virt-operator writes, from its
// TARGET_DEPLOYMENT_CONFIG JSON.
func ExampleIdentifierOf() {
	id, err := identity.IdentifierOf([]byte(`{"namespace":"kubevirt","registry":"quay.io/kubevirt","kubeVirtVersion":"v1.9.0","virtOperatorImage":"quay.io/kubevirt/virt-operator:v1.9.0"}`), "kubevirt")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(id)
	// Output: d55df38466a66f4d725a28219f1c0d4487f5e4e0
}
