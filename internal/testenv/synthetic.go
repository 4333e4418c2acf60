package testenv

import (
	"fmt"
	"strings"
	"testing"

	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// NamespacedProductConfigMaps is how many ConfigMaps NamespacedProduct
// holds.
const NamespacedProductConfigMaps = 5

// NamespacedProduct is a synthetic product whose every object lives in
// namespace ns (no CRD, ClusterRole or webhook), so that any number of
// Installations of it, one per namespace, never meet each other's objects
// (the built-in sample product cannot: its cluster-scoped objects have fixed
// names, and a second installation is rightly refused them). Its 16 objects:
// a ServiceAccount, a Role and its RoleBinding, NamespacedProductConfigMaps
// ConfigMaps, a Secret, two Services, a PodDisruptionBudget, a
// NetworkPolicy, two one-replica Deployments (roles api and controller) and
// a DaemonSet (handler) — workloads the local cluster's kwok nodes run. The
// identity is version at registry.example/synthetic.
func NamespacedProduct(tb testing.TB, ns, version string) *strategy.Strategy {
	tb.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: v1
kind: ServiceAccount
metadata:
  name: synthetic
  namespace: %[1]s
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: synthetic
  namespace: %[1]s
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: synthetic
  namespace: %[1]s
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: synthetic
subjects:
- kind: ServiceAccount
  name: synthetic
  namespace: %[1]s
---
apiVersion: v1
kind: Secret
metadata:
  name: synthetic-credentials
  namespace: %[1]s
type: Opaque
stringData:
  token: synthetic-%[2]s
---
apiVersion: v1
kind: Service
metadata:
  name: synthetic-api
  namespace: %[1]s
spec:
  selector:
    app: synthetic-api
  ports:
  - name: https
    port: 443
    targetPort: 8443
---
apiVersion: v1
kind: Service
metadata:
  name: synthetic-metrics
  namespace: %[1]s
spec:
  selector:
    app: synthetic-controller
  ports:
  - name: metrics
    port: 8080
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: synthetic-api
  namespace: %[1]s
spec:
  maxUnavailable: 1
  selector:
    matchLabels:
      app: synthetic-api
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: synthetic
  namespace: %[1]s
spec:
  podSelector:
    matchLabels:
      app.kubernetes.io/part-of: synthetic
  ingress:
  - ports:
    - port: 8443
  policyTypes: [Ingress]
`, ns, version)
	for i := range NamespacedProductConfigMaps {
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: ConfigMap
metadata:
  name: synthetic-config-%d
  namespace: %s
data:
  version: %s
  index: "%d"
`, i, ns, version, i)
	}
	workload := func(kind, name, role, replicas string) {
		fmt.Fprintf(&b, `---
apiVersion: apps/v1
kind: %[1]s
metadata:
  name: %[2]s
  namespace: %[4]s
  annotations:
    installstrategy.io/role: %[3]s
spec:
%[6]s  selector:
    matchLabels:
      app: %[2]s
  template:
    metadata:
      labels:
        app: %[2]s
        app.kubernetes.io/part-of: synthetic
    spec:
      serviceAccountName: synthetic
      containers:
      - name: %[3]s
        image: registry.example/synthetic/%[2]s:%[5]s
`, kind, name, role, ns, version, replicas)
	}
	workload("Deployment", "synthetic-api", "api", "  replicas: 1\n")
	workload("Deployment", "synthetic-controller", "controller", "  replicas: 1\n")
	workload("DaemonSet", "synthetic-handler", "handler", "")
	s, _, err := strategy.Parse([]byte(b.String()), strategy.ParseOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	s.Identity = strategy.Identity{Version: version, Registry: "registry.example/synthetic"}
	s.Sort()
	return s
}
