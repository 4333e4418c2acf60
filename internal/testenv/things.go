package testenv

import (
	"fmt"
	"strings"
)

// ThingsCRD is the YAML of the CRD things.GROUP (kind Thing) of the given
// scope with one version v1, served and stored, whose .spec has the given
// properties (YAML flow map entries, e.g. "note: {type: string}").
func ThingsCRD(group, scope, specProps string) string {
	return thingsCRD(group, scope, thingsVersion{"v1", true, specProps})
}

// ThingsCRDv2 is the next release of ThingsCRD(group, "Namespaced",
// specProps): version v1 as before, still served, and a new version v2,
// stored, whose .spec has the same properties plus v2Props (the new
// fields; YAML flow map entries). Objects move between the two by
// apiVersion alone (no conversion webhook), so a v1 client reading an
// object stored at v2 has the new fields pruned: rolling back to
// ThingsCRD drops v2, and what objects hold in its new fields.
func ThingsCRDv2(group, specProps, v2Props string) string {
	return thingsCRD(group, "Namespaced", thingsVersion{"v1", false, specProps}, thingsVersion{"v2", true, specProps + ", " + v2Props})
}

type thingsVersion struct {
	name      string
	storage   bool
	specProps string
}

func thingsCRD(group, scope string, versions ...thingsVersion) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: things.%[1]s}
spec:
  group: %[1]s
  scope: %[2]s
  names: {plural: things, singular: thing, kind: Thing, listKind: ThingList}
  versions:
`, group, scope)
	for _, v := range versions {
		fmt.Fprintf(&b, `  - name: %s
    served: true
    storage: %v
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {%s}}
`, v.name, v.storage, v.specProps)
	}
	return b.String()
}
