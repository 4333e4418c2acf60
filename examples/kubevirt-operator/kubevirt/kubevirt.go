// Package kubevirt is the operator.Resource of KubeVirt's own custom
// resource, kubevirt.io/v1 KubeVirt: the spec fields that change what
// virt-operator installs become the Installation view's spec, and the
// view's status is written the way virt-operator writes it (phase,
// conditions, observed and target version, registry, deployment ID and
// config), so `kubectl wait kv/kubevirt --for condition=Available` and
// KubeVirt's tooling read it unchanged.
//
// The object is read as unstructured, through the small typed projection
// below, not through KubeVirt's API module (kubevirt.io/api): that module
// pins its own Kubernetes and brings CDI's and OpenShift's API modules
// with it, for the dozen fields read here. Fields this package does not
// know are kept as they are.
package kubevirt

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/crdsafety"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/operator"
)

// GVK is KubeVirt's kind.
var GVK = schema.GroupVersionKind{Group: "kubevirt.io", Version: "v1", Kind: "KubeVirt"}

// DefaultRegistry is where KubeVirt's release images are.
const DefaultRegistry = "quay.io/kubevirt"

// spec is the part of KubeVirt's spec read here.
type spec struct {
	ImageTag            string                        `json:"imageTag,omitempty"`
	ImageRegistry       string                        `json:"imageRegistry,omitempty"`
	ImagePullPolicy     corev1.PullPolicy             `json:"imagePullPolicy,omitempty"`
	ImagePullSecrets    []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
	Infra               *componentConfig              `json:"infra,omitempty"`
	Workloads           *componentConfig              `json:"workloads,omitempty"`
	CustomizeComponents *struct {
		Patches []struct {
			ResourceName string `json:"resourceName"`
			ResourceType string `json:"resourceType"`
			Patch        string `json:"patch"`
			Type         string `json:"type"`
		} `json:"patches,omitempty"`
	} `json:"customizeComponents,omitempty"`
	UninstallStrategy       string `json:"uninstallStrategy,omitempty"`
	MonitorNamespace        string `json:"monitorNamespace,omitempty"`
	MonitorAccount          string `json:"monitorAccount,omitempty"`
	ServiceMonitorNamespace string `json:"serviceMonitorNamespace,omitempty"`
	ProductName             string `json:"productName,omitempty"`
	ProductVersion          string `json:"productVersion,omitempty"`
	ProductComponent        string `json:"productComponent,omitempty"`
}

type componentConfig struct {
	NodePlacement *v1alpha1.NodePlacement `json:"nodePlacement,omitempty"`
}

// condition is KubeVirt's condition (it has lastProbeTime; metav1's has
// observedGeneration).
type condition struct {
	Type               string      `json:"type"`
	Status             string      `json:"status"`
	LastProbeTime      metav1.Time `json:"lastProbeTime,omitempty"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	Reason             string      `json:"reason,omitempty"`
	Message            string      `json:"message,omitempty"`
}

// status is the part of KubeVirt's status written here.
type status struct {
	Phase                    string      `json:"phase,omitempty"`
	Conditions               []condition `json:"conditions,omitempty"`
	ObservedKubeVirtVersion  string      `json:"observedKubeVirtVersion,omitempty"`
	ObservedKubeVirtRegistry string      `json:"observedKubeVirtRegistry,omitempty"`
	ObservedDeploymentID     string      `json:"observedDeploymentID,omitempty"`
	ObservedDeploymentConfig string      `json:"observedDeploymentConfig,omitempty"`
	TargetKubeVirtVersion    string      `json:"targetKubeVirtVersion,omitempty"`
	TargetKubeVirtRegistry   string      `json:"targetKubeVirtRegistry,omitempty"`
	TargetDeploymentID       string      `json:"targetDeploymentID,omitempty"`
	TargetDeploymentConfig   string      `json:"targetDeploymentConfig,omitempty"`
	ObservedGeneration       int64       `json:"observedGeneration,omitempty"`
}

// Resource is the KubeVirt kind as an operator.Resource (and
// operator.Configurer: the deployment ID is virt-operator's).
type Resource struct {
	// Defaults are the version and registry of a KubeVirt whose spec
	// names none (virt-operator's own version and registry).
	Defaults operator.Defaults
}

var (
	_ operator.Resource   = Resource{}
	_ operator.Configurer = Resource{}
)

func (Resource) GroupVersionKind() schema.GroupVersionKind { return GVK }

func (Resource) New() client.Object {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(GVK)
	return u
}

func (Resource) NewList() client.ObjectList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(GVK.GroupVersion().WithKind(GVK.Kind + "List"))
	return l
}

func field[T any](obj client.Object, name string, into *T) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("want *unstructured.Unstructured, got %T", obj)
	}
	m, _, _ := unstructured.NestedMap(u.Object, name)
	if m == nil {
		return nil
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, into); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// View maps the spec fields that change virt-operator's install strategy
// onto the Installation spec. The strategy comes from a dump Job of the
// target's virt-operator image, as virt-operator gets it.
func (r Resource) View(obj client.Object) (*v1alpha1.Installation, error) {
	var sp spec
	var st status
	if err := field(obj, "spec", &sp); err != nil {
		return nil, err
	}
	if err := field(obj, "status", &st); err != nil {
		return nil, err
	}
	in := &v1alpha1.Installation{}
	if err := field(obj, "metadata", &in.ObjectMeta); err != nil {
		return nil, err
	}
	in.Spec = v1alpha1.InstallationSpec{
		Version: sp.ImageTag, Registry: sp.ImageRegistry,
		ImagePullPolicy: sp.ImagePullPolicy, ImagePullSecrets: sp.ImagePullSecrets,
		UninstallStrategy: v1alpha1.UninstallStrategy(sp.UninstallStrategy),
		// virt-operator deletes KubeVirt's CRDs first when the CR goes
		// (which is what uninstallStrategy guards against).
		PruneCRDs: true,
		// A KubeVirt CR claims its namespace's KubeVirt, as for
		// virt-operator: objects of the strategy that no installation owns
		// (virt-operator's, when this replaces it) are taken over in
		// place. Another installation's objects are never adopted.
		Adopt: true,
	}
	if sp.Infra != nil {
		in.Spec.Infra = sp.Infra.NodePlacement
	}
	if sp.Workloads != nil {
		in.Spec.Workloads = sp.Workloads.NodePlacement
	}
	if cc := sp.CustomizeComponents; cc != nil && len(cc.Patches) > 0 {
		in.Spec.CustomizeComponents = &v1alpha1.CustomizeComponents{}
		for _, p := range cc.Patches {
			in.Spec.CustomizeComponents.Patches = append(in.Spec.CustomizeComponents.Patches, v1alpha1.CustomizePatch{
				ResourceKind: p.ResourceType, ResourceName: p.ResourceName, Type: v1alpha1.PatchType(p.Type), Patch: p.Patch})
		}
	}
	allow, err := crdChangesAllowed(obj.GetAnnotations()[metakeys.AllowCRDChangeAnnotation])
	if err != nil {
		return nil, err
	}
	in.Spec.CRDSafety = allow
	cfg, _, err := r.Config(in, r.Defaults)
	if err != nil {
		return nil, err
	}
	in.Spec.Strategy = &v1alpha1.StrategySource{Image: StrategyImage(cfg)}
	if name := obj.GetAnnotations()[metakeys.StrategyConfigMapAnnotation]; name != "" {
		in.Spec.Strategy = &v1alpha1.StrategySource{ConfigMap: &v1alpha1.ConfigMapStrategySource{Name: name, Digest: obj.GetAnnotations()[metakeys.StrategyDigestAnnotation]}}
	}
	in.Status = v1alpha1.InstallationStatus{
		Phase:              v1alpha1.InstallationPhase(st.Phase),
		ObservedGeneration: st.ObservedGeneration,
		ObservedVersion:    st.ObservedKubeVirtVersion, ObservedRegistry: st.ObservedKubeVirtRegistry, ObservedIdentifier: st.ObservedDeploymentID,
		TargetVersion: st.TargetKubeVirtVersion, TargetRegistry: st.TargetKubeVirtRegistry, TargetIdentifier: st.TargetDeploymentID,
	}
	for _, c := range st.Conditions {
		in.Status.Conditions = append(in.Status.Conditions, metav1.Condition{Type: c.Type, Status: metav1.ConditionStatus(c.Status),
			LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message, ObservedGeneration: st.ObservedGeneration})
	}
	return in, nil
}

// maxCRDChangesAllowed bounds the annotation's pairs, as the
// Installation's spec.crdSafety.allow is bounded.
const maxCRDChangesAllowed = 64

// crdChangesAllowed reads metakeys.AllowCRDChangeAnnotation: the KubeVirt
// CR has no field for spec.crdSafety, and whoever may write the CR chooses
// what is installed, as the writer of an Installation does. An unknown
// rule or a pair not of the CRD=RULE form is an error naming the
// annotation.
func crdChangesAllowed(v string) (*v1alpha1.CRDSafety, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	pairs := strings.Split(v, ",")
	if len(pairs) > maxCRDChangesAllowed {
		return nil, fmt.Errorf("annotation %s: %d pairs, at most %d", metakeys.AllowCRDChangeAnnotation, len(pairs), maxCRDChangesAllowed)
	}
	out := &v1alpha1.CRDSafety{}
	for _, p := range pairs {
		a, err := crdsafety.ParseAllow(strings.TrimSpace(p))
		if err != nil {
			return nil, fmt.Errorf("annotation %s: %w", metakeys.AllowCRDChangeAnnotation, err)
		}
		out.Allow = append(out.Allow, v1alpha1.CRDChangeAllowance{CRD: a.CRD, Rule: string(a.Rule)})
	}
	return out, nil
}

// phases maps ours onto KubeVirt's (which has no Failed: virt-operator
// stays Deploying with Degraded=True).
var phases = map[v1alpha1.InstallationPhase]string{v1alpha1.PhaseFailed: "Deploying"}

// SetStatus writes the view's status as virt-operator writes KubeVirt's.
// Every condition is kept (KubeVirt's tools read the four they know).
func (r Resource) SetStatus(obj client.Object, in *v1alpha1.Installation) error {
	u := obj.(*unstructured.Unstructured)
	var old status
	if err := field(obj, "status", &old); err != nil {
		return err
	}
	s := in.Status
	st := status{
		Phase:                   string(s.Phase),
		ObservedKubeVirtVersion: s.ObservedVersion, ObservedKubeVirtRegistry: s.ObservedRegistry, ObservedDeploymentID: s.ObservedIdentifier,
		TargetKubeVirtVersion: s.TargetVersion, TargetKubeVirtRegistry: s.TargetRegistry, TargetDeploymentID: s.TargetIdentifier,
		ObservedGeneration: s.ObservedGeneration, ObservedDeploymentConfig: old.ObservedDeploymentConfig, TargetDeploymentConfig: old.TargetDeploymentConfig,
	}
	if p, ok := phases[s.Phase]; ok {
		st.Phase = p
	}
	if cfg, alg, err := r.Config(in, r.Defaults); err == nil && s.TargetIdentifier != "" {
		if id, err := cfg.Identity(alg); err == nil && id.Identifier == s.TargetIdentifier {
			if text, err := kubeVirtConfigJSON(cfg, id.Identifier); err == nil {
				st.TargetDeploymentConfig = text
			}
		}
	}
	if s.ObservedIdentifier != "" && s.ObservedIdentifier == s.TargetIdentifier {
		st.ObservedDeploymentConfig = st.TargetDeploymentConfig
	}
	for _, c := range s.Conditions {
		// lastProbeTime is the transition's: virt-operator moves it on
		// every write, which would make every resync a write.
		st.Conditions = append(st.Conditions, condition{Type: c.Type, Status: string(c.Status),
			LastProbeTime: c.LastTransitionTime, LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message})
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		return err
	}
	prev, _, _ := unstructured.NestedMap(u.Object, "status")
	for k, v := range prev {
		// Status fields virt-operator writes that this package does not
		// (operatorVersion, generations…) stay.
		if _, known := m[k]; !known && !knownStatusField[k] {
			m[k] = v
		}
	}
	return unstructured.SetNestedMap(u.Object, m, "status")
}

// knownStatusField are the fields SetStatus owns: absent from its output,
// they are cleared rather than kept.
var knownStatusField = map[string]bool{}

func init() {
	b, _ := json.Marshal(status{Phase: "x", Conditions: []condition{{}}, ObservedKubeVirtVersion: "x", ObservedKubeVirtRegistry: "x",
		ObservedDeploymentID: "x", ObservedDeploymentConfig: "x", TargetKubeVirtVersion: "x", TargetKubeVirtRegistry: "x",
		TargetDeploymentID: "x", TargetDeploymentConfig: "x", ObservedGeneration: 1})
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	for k := range m {
		knownStatusField[k] = true
	}
}

// Config is virt-operator's deployment configuration of the view: the
// additional properties virt-operator derives from the KubeVirt spec
// (struct-valued fields appear as Go prints a reflect.Value of them, as in
// virt-operator's own), and KubeVirt's identifier algorithm. Placement is
// not part of it: virt-operator, like Prepare, places at apply time.
func (r Resource) Config(in *v1alpha1.Installation, d operator.Defaults) (*identity.Config, identity.Algorithm, error) {
	if r.Defaults != (operator.Defaults{}) {
		d = r.Defaults
	}
	version, registry := in.Spec.Version, in.Spec.Registry
	if version == "" {
		version = d.Version
	}
	if registry == "" {
		registry = d.Registry
	}
	if registry == "" {
		registry = DefaultRegistry
	}
	if version == "" {
		return nil, nil, fmt.Errorf("spec.imageTag is empty and the operator has no default version")
	}
	secrets, err := json.Marshal(in.Spec.ImagePullSecrets)
	if err != nil {
		return nil, nil, err
	}
	props := map[string]string{
		"CertificateRotationStrategy": "<v1.KubeVirtCertificateRotateStrategy Value>",
		"Configuration":               "<v1.KubeVirtConfiguration Value>",
		"CustomizeComponents":         "<v1.CustomizeComponents Value>",
		"WorkloadUpdateStrategy":      "<v1.KubeVirtWorkloadUpdateStrategy Value>",
		"Infra":                       "<*v1.ComponentConfig Value>",
		"Workloads":                   "<*v1.ComponentConfig Value>",
		"HypervisorName":              "kvm",
		"ImagePullPolicy":             string(in.Spec.ImagePullPolicy),
		"ImagePullSecrets":            string(secrets),
		"UninstallStrategy":           string(in.Spec.UninstallStrategy),
		"SynchronizationPort":         "",
	}
	for _, k := range []string{"MonitorAccount", "MonitorNamespace", "ProductComponent", "ProductName", "ProductVersion", "ServiceMonitorNamespace"} {
		props[k] = ""
	}
	if v, err := semver.NewVersion(version); err == nil && (v.Major() > 1 || v.Minor() >= 9) {
		props["ExternalNetResourceInjection"], props["VirtTemplateDeploymentEnabled"] = "", ""
	}
	cfg := &identity.Config{Namespace: in.Namespace, Registry: registry, Version: version, AdditionalProperties: props}
	cfg.ComponentImages = map[string]string{"virtOperatorImage": StrategyImage(cfg)}
	return cfg, identity.KubeVirt, nil
}

// What virt-operator's dump mode (--dump-install-strategy, run by the dump
// Job) needs besides the configuration, as virt-operator's own dump Job
// gives it: VIRT_OPERATOR_IMAGE (it exits without it), and reading
// Namespaces and ServiceAccounts (it looks for the monitoring namespace
// and its prometheus-k8s account). Its pod reports no digest, so the
// operator binds what it writes to the Job's run (operator.Options
// ForeignDumps, docs/adr/2026-12-06-foreign-dump-binding.md).
const DumpImageEnv = "VIRT_OPERATOR_IMAGE"

// DumpClusterRules: see DumpImageEnv.
var DumpClusterRules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces", "serviceaccounts"}, Verbs: []string{"get"}}}

// StrategyImage is the virt-operator image whose dump gives the strategy.
func StrategyImage(cfg *identity.Config) string {
	return strings.TrimSuffix(cfg.Registry, "/") + "/" + cfg.ImagePrefix + "virt-operator:" + cfg.Version
}

// kubeVirtConfigJSON is the deployment config as virt-operator writes it
// into status (its JSON, with the identifier and operator image).
func kubeVirtConfigJSON(cfg *identity.Config, id string) (string, error) {
	m := map[string]any{"id": id, "namespace": cfg.Namespace, "registry": cfg.Registry, "kubeVirtVersion": cfg.Version,
		"virtOperatorImage": StrategyImage(cfg), "additionalProperties": cfg.AdditionalProperties}
	b, err := json.Marshal(m)
	return string(b), err
}
