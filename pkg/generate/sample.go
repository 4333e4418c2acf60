package generate

import (
	"fmt"
	"regexp"
	"strconv"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// The sample product's names.
const (
	// SampleProduct is the sample's product name (its part-of label).
	SampleProduct = "sample"
	// SampleOperatorComponent is the image component of the operator that
	// ships the sample product and dumps its strategies.
	SampleOperatorComponent = "sample-operator"
	// SampleGroup is the API group of the sample's CRDs.
	SampleGroup = "sample.installstrategy.io"
)

// SampleVersions are the sample versions whose differences the tests use.
// Sample accepts any later version too (it has the newest features).
//
//   - v1.0.0: the base product, with the ConfigMap sample-legacy-settings.
//   - v1.1.0: Widget gains v1beta1 (now the storage version), the Service
//     sample-controller-metrics is added and sample-legacy-settings is
//     removed, sample-config changes.
//   - v1.2.0: Gadget gains v1beta1, sample-handler gets a new argument and
//     sample-controller a third replica.
//
// Every version changes every image (the tag is the version).
var SampleVersions = []string{"v1.0.0", "v1.1.0", "v1.2.0"}

var semverRE = regexp.MustCompile(`^v(\d+)\.(\d+)\.(\d+)(?:[-+].*)?$`)

// sampleVersion is a version as three numbers, comparable.
type sampleVersion [3]int

func parseSampleVersion(v string) (sampleVersion, error) {
	m := semverRE.FindStringSubmatch(v)
	if m == nil {
		return sampleVersion{}, fmt.Errorf("version %q is not vMAJOR.MINOR.PATCH", v)
	}
	var out sampleVersion
	for i := range out {
		out[i], _ = strconv.Atoi(m[i+1])
	}
	if out[0] < 1 {
		return sampleVersion{}, fmt.Errorf("version %q is older than the first sample version %s", v, SampleVersions[0])
	}
	return out, nil
}

func (v sampleVersion) atLeast(minor int) bool {
	return v[0] > 1 || v[1] >= minor
}

// Sample builds the sample product for a configuration: KubeVirt-shaped,
// with an api Deployment behind a Service and a validating webhook (and its
// empty TLS Secret), a controller Deployment, a handler DaemonSet, two
// CRDs, ServiceAccounts and RBAC, and ConfigMaps. Its content depends on
// cfg.Version as SampleVersions describes; opts.Product is ignored.
func Sample(cfg *identity.Config, opts Options) (*strategy.Strategy, error) {
	opts.Product = SampleProduct
	v, err := parseSampleVersion(cfg.Version)
	if err != nil {
		return nil, fmt.Errorf("generate %s: %w", SampleProduct, err)
	}
	b := New(cfg, opts)
	for _, add := range sampleParts {
		add(b, v)
	}
	return b.Build()
}

// sampleParts add the sample product's objects of version v to b, one
// concern each, in this order (the order of the strategy's objects).
var sampleParts = []func(b *Builder, v sampleVersion){
	sampleRBAC,
	sampleCRDs,
	sampleAPIFront,
	sampleWorkloads,
	sampleSettings,
}

// sampleRBAC adds the ServiceAccounts and RBAC of the three components.
func sampleRBAC(b *Builder, _ sampleVersion) {
	for _, name := range []string{"sample-api", "sample-controller", "sample-handler"} {
		b.ServiceAccount(name)
	}
	readSample := rbacv1.PolicyRule{APIGroups: []string{SampleGroup}, Resources: []string{"widgets", "gadgets"}, Verbs: []string{"get", "list", "watch"}}
	b.ClusterRole("sample-api",
		readSample,
		rbacv1.PolicyRule{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	)
	b.ClusterRole("sample-controller",
		rbacv1.PolicyRule{APIGroups: []string{SampleGroup}, Resources: []string{"widgets", "widgets/status", "gadgets", "gadgets/status"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods", "nodes"}, Verbs: []string{"get", "list", "watch"}},
	)
	b.ClusterRole("sample-handler",
		readSample,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "patch"}},
	)
	for _, name := range []string{"sample-api", "sample-controller", "sample-handler"} {
		b.ClusterRoleBinding(name, name, name)
	}
	b.Role("sample-controller",
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
	)
	b.RoleBinding("sample-controller", "sample-controller", "sample-controller")
}

// sampleCRDs adds the Widget and Gadget CRDs, whose versions grow with v.
func sampleCRDs(b *Builder, v sampleVersion) {
	widget := CRD{Group: SampleGroup, Kind: "Widget", ShortNames: []string{"wdg"}, Versions: []CRDVersion{{Name: "v1alpha1", Storage: true}}}
	if v.atLeast(1) {
		widget.Versions = []CRDVersion{{Name: "v1alpha1", Deprecated: true}, {Name: "v1beta1", Storage: true}}
	}
	gadget := CRD{Group: SampleGroup, Kind: "Gadget", Versions: []CRDVersion{{Name: "v1alpha1", Storage: true}}}
	if v.atLeast(2) {
		gadget.Versions = append(gadget.Versions, CRDVersion{Name: "v1beta1"})
	}
	b.CRD(widget).CRD(gadget)
}

// sampleAPIFront adds what stands in front of the api Deployment: its
// Service (and from v1.1.0 the controller's metrics Service), its TLS
// Secret and its validating webhook.
func sampleAPIFront(b *Builder, v sampleVersion) {
	b.Service("sample-api", "sample-api", corev1.ServicePort{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443), Protocol: corev1.ProtocolTCP})
	if v.atLeast(1) {
		b.Service("sample-controller-metrics", "sample-controller", corev1.ServicePort{Name: "metrics", Port: 8080, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP})
	}
	b.TLSSecret("sample-api-certs")
	b.ValidatingWebhook(Webhook{
		Name:    "sample-api-validator",
		Service: "sample-api",
		Path:    "/validate-widgets",
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{SampleGroup}, APIVersions: []string{"*"}, Resources: []string{"widgets"}},
		}},
	})
}

// sampleWorkloads adds the api and controller Deployments and the handler
// DaemonSet.
func sampleWorkloads(b *Builder, v sampleVersion) {
	b.Deployment(Workload{
		Name: "sample-api", Role: RoleAPI, Replicas: 2,
		Args:          []string{"--port=8443", "--tls-cert-dir=/etc/sample/certs"},
		Ports:         []corev1.ContainerPort{{Name: "https", ContainerPort: 8443, Protocol: corev1.ProtocolTCP}},
		SecretVolumes: map[string]string{"sample-api-certs": "/etc/sample/certs"},
	})
	controllerReplicas := int32(2)
	if v.atLeast(2) {
		controllerReplicas = 3
	}
	b.Deployment(Workload{
		Name: "sample-controller", Role: RoleController, Replicas: controllerReplicas,
		Args:  []string{"--leader-elect"},
		Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
	})
	handlerArgs := []string{"--node-name=$(NODE_NAME)"}
	if v.atLeast(2) {
		handlerArgs = append(handlerArgs, "--feature=node-labeller")
	}
	// The handler is ready once it serves /healthz on :8080, as
	// virt-handler is: a real handler that crashes at start never becomes
	// ready (without a probe, a container is ready the moment it runs, and
	// a canary could pass a pod that exits a moment later).
	b.DaemonSet(Workload{
		Name: "sample-handler", Role: RoleHandler,
		Args:  handlerArgs,
		Env:   []corev1.EnvVar{{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}},
		Ports: []corev1.ContainerPort{{Name: "health", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("health")}},
			PeriodSeconds: 2,
		},
	})
}

// sampleSettings adds the settings ConfigMaps.
func sampleSettings(b *Builder, v sampleVersion) {
	settings := map[string]string{"log-verbosity": "2", "features": "widgets"}
	if v.atLeast(1) {
		settings["features"] = "widgets,gadgets"
	}
	b.ConfigMap("sample-config", settings)
	if !v.atLeast(1) {
		b.ConfigMap("sample-legacy-settings", map[string]string{"mode": "legacy"})
	}
}
