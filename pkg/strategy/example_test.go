package strategy_test

import (
	"fmt"

	"github.com/installstrategy/installstrategy/pkg/strategy"
)

func ExampleParse() {
	text := []byte(`---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: demo
data:
  note: |
    ---
    a separator inside a value never splits a document
---
apiVersion: v1
kind: ValidatingAdmissionPolicy
metadata:
  name: policy
`)
	s, warnings, err := strategy.Parse(text, strategy.ParseOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, o := range s.Objects {
		fmt.Println(strategy.RefOf(o), o.GetAPIVersion())
	}
	for _, w := range warnings {
		fmt.Println(w.Code)
	}
	// Output:
	// ValidatingAdmissionPolicy.admissionregistration.k8s.io/policy admissionregistration.k8s.io/v1
	// ConfigMap/demo/settings v1
	// APIVersionRepaired
}

func ExampleStrategy_Serialize() {
	s, _, _ := strategy.Parse([]byte(`{"kind":"ServiceAccount","apiVersion":"v1","metadata":{"name":"sa","namespace":"demo","creationTimestamp":null,"labels":{"app.kubernetes.io/managed-by":"someone"}},"status":{}}`), strategy.ParseOptions{})
	text, _ := s.Serialize()
	fmt.Print(string(text))
	// Output:
	// ---
	// apiVersion: v1
	// kind: ServiceAccount
	// metadata:
	//   labels: {}
	//   name: sa
	//   namespace: demo
}
