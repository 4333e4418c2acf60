package testenv

import "fmt"

// ThingsCRD is the YAML of the CRD things.GROUP (kind Thing) of the given
// scope with one version v1, served and stored, whose .spec has the given
// properties (YAML flow map entries, e.g. "note: {type: string}").
func ThingsCRD(group, scope, specProps string) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: things.%[1]s}
spec:
  group: %[1]s
  scope: %[2]s
  names: {plural: things, singular: thing, kind: Thing, listKind: ThingList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {%[3]s}}
`, group, scope, specProps)
}
