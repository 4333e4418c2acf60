// Package generate owns the builder API with which an operator author
// declares a product for one deployment configuration (CRDs, RBAC, Services,
// certificate Secrets, webhooks, Deployments, DaemonSets, ConfigMaps), and
// the built-in sample product, a small KubeVirt-shaped product whose
// versions differ the way real upgrades do.
//
// Workloads carry their role (api, controller, handler) in the
// metakeys.RoleAnnotation, so the reconciler can order and place them from the
// objects alone. The builder does not place pods on nodes: the
// configuration's Placement is applied when the strategy is deployed, by
// pkg/placement, the same way for every strategy whatever made it.
package generate

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/podsec"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// Role is the part a workload plays in its product: the kind table's
// roles (kinds.Role), named here for product builders.
type Role = kinds.Role

// Roles of workloads (kinds.RoleAPI, kinds.RoleController,
// kinds.RoleHandler).
const (
	RoleAPI        = kinds.RoleAPI
	RoleController = kinds.RoleController
	RoleHandler    = kinds.RoleHandler
)

// ImagePullPolicyProperty is the additional property that sets the pull
// policy of every container (KubeVirt's key); empty means IfNotPresent.
const ImagePullPolicyProperty = "ImagePullPolicy"

// Options says how a Builder names and identifies what it builds. The zero
// value is usable: product "product", native identifiers.
type Options struct {
	// Product names the product in the part-of label; "" means "product".
	Product string
	// Algorithm computes the strategy's identifier; nil means
	// identity.Native.
	Algorithm identity.Algorithm
}

// Builder collects the objects of a product for one configuration. Its
// methods record the first problem and Build reports every one, so a
// product can be declared as a flat list of calls.
type Builder struct {
	cfg     *identity.Config
	opts    Options
	objects []*unstructured.Unstructured
	errs    []error
	// badVersion: the version's label error is already in errs.
	badVersion bool
}

// New returns a builder for a configuration. The builder keeps its own copy
// of cfg.
func New(cfg *identity.Config, opts Options) *Builder {
	if opts.Product == "" {
		opts.Product = "product"
	}
	if opts.Algorithm == nil {
		opts.Algorithm = identity.Native
	}
	return &Builder{cfg: cfg.Clone(), opts: opts}
}

// Config returns the configuration being built for (do not modify it).
func (b *Builder) Config() *identity.Config { return b.cfg }

// Namespace returns the install namespace.
func (b *Builder) Namespace() string { return b.cfg.Namespace }

// Image returns the image of a component (see identity.Config.Image).
func (b *Builder) Image(component string) string { return b.cfg.Image(component) }

// Labels returns the labels of an object of the product named name.
func (b *Builder) Labels(name string) map[string]string {
	return map[string]string{metakeys.AppPartOfLabel: b.opts.Product, metakeys.AppNameLabel: name}
}

// scheme knows every type the builder converts.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(s), apiextensionsv1.AddToScheme(s)); err != nil {
		panic(err)
	}
	return s
}()

// Add adds objects as they are: typed Kubernetes objects (built-in kinds
// and CRDs) or unstructured ones with apiVersion and kind. Namespaced kinds
// without a namespace get the install namespace.
func (b *Builder) Add(objs ...runtime.Object) *Builder {
	for _, obj := range objs {
		u, err := toUnstructured(obj)
		if err != nil {
			b.errs = append(b.errs, err)
			continue
		}
		if info, ok := kinds.Lookup(u.GroupVersionKind().GroupKind()); ok && info.Namespaced && u.GetNamespace() == "" {
			u.SetNamespace(b.cfg.Namespace)
		}
		b.objects = append(b.objects, u)
	}
	return b
}

func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		if u.GetAPIVersion() == "" || u.GetKind() == "" {
			return nil, fmt.Errorf("add %q: unstructured object without apiVersion or kind", u.GetName())
		}
		return u.DeepCopy(), nil
	}
	gvks, _, err := scheme.ObjectKinds(obj)
	if err != nil {
		return nil, fmt.Errorf("add %T: %w", obj, err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("add %T: %w", obj, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvks[0])
	return u, nil
}

func (b *Builder) meta(name string, namespaced bool) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: name, Labels: b.Labels(name)}
	if namespaced {
		m.Namespace = b.cfg.Namespace
	}
	return m
}

// ServiceAccount adds a ServiceAccount in the install namespace.
func (b *Builder) ServiceAccount(name string) *Builder {
	return b.Add(&corev1.ServiceAccount{ObjectMeta: b.meta(name, true)})
}

// ClusterRole adds a ClusterRole.
func (b *Builder) ClusterRole(name string, rules ...rbacv1.PolicyRule) *Builder {
	return b.Add(&rbacv1.ClusterRole{ObjectMeta: b.meta(name, false), Rules: rules})
}

// ClusterRoleBinding binds a ClusterRole to a ServiceAccount of the install
// namespace.
func (b *Builder) ClusterRoleBinding(name, clusterRole, serviceAccount string) *Builder {
	ref, subjects := b.binding(kinds.ClusterRole.Kind, clusterRole, serviceAccount)
	return b.Add(&rbacv1.ClusterRoleBinding{ObjectMeta: b.meta(name, false), RoleRef: ref, Subjects: subjects})
}

// Role adds a Role in the install namespace.
func (b *Builder) Role(name string, rules ...rbacv1.PolicyRule) *Builder {
	return b.Add(&rbacv1.Role{ObjectMeta: b.meta(name, true), Rules: rules})
}

// RoleBinding binds a Role to a ServiceAccount, both in the install
// namespace.
func (b *Builder) RoleBinding(name, role, serviceAccount string) *Builder {
	ref, subjects := b.binding(kinds.RoleKind.Kind, role, serviceAccount)
	return b.Add(&rbacv1.RoleBinding{ObjectMeta: b.meta(name, true), RoleRef: ref, Subjects: subjects})
}

// binding returns the role reference and subjects of a binding of a role to
// a ServiceAccount of the install namespace.
func (b *Builder) binding(kind, role, serviceAccount string) (rbacv1.RoleRef, []rbacv1.Subject) {
	return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role},
		[]rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: serviceAccount, Namespace: b.cfg.Namespace}}
}

// CRD declares a CustomResourceDefinition.
type CRD struct {
	Group string
	Kind  string
	// Plural is the resource name; "" means the lower-case kind + "s".
	Plural string
	// Cluster makes the resource cluster-scoped; the zero value is
	// namespaced.
	Cluster bool
	// ShortNames are kubectl's short names.
	ShortNames []string
	// Versions in the order the API server lists them.
	Versions []CRDVersion
}

// CRDVersion is one version of a CRD.
type CRDVersion struct {
	Name string
	// Storage marks the version stored in etcd; when no version is
	// marked, the first one is.
	Storage bool
	// Deprecated versions are still served, with a warning.
	Deprecated bool
	// Schema validates the version; nil accepts any object (spec and
	// status preserve unknown fields).
	Schema *apiextensionsv1.JSONSchemaProps
}

// CRD adds a CustomResourceDefinition; every version is served.
func (b *Builder) CRD(c CRD) *Builder {
	plural := c.Plural
	if plural == "" {
		plural = lower(c.Kind) + "s"
	}
	scope := apiextensionsv1.NamespaceScoped
	if c.Cluster {
		scope = apiextensionsv1.ClusterScoped
	}
	if len(c.Versions) == 0 {
		b.errs = append(b.errs, fmt.Errorf("crd %s.%s: no versions", plural, c.Group))
		return b
	}
	hasStorage := slices.ContainsFunc(c.Versions, func(v CRDVersion) bool { return v.Storage })
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: b.meta(plural+"."+c.Group, false),
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: c.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Kind: c.Kind, ListKind: c.Kind + "List", Plural: plural, Singular: lower(c.Kind), ShortNames: c.ShortNames,
			},
			Scope: scope,
		},
	}
	for i, v := range c.Versions {
		schema := v.Schema
		if schema == nil {
			schema = openSchema()
		}
		crd.Spec.Versions = append(crd.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{
			Name:         v.Name,
			Served:       true,
			Storage:      v.Storage || (!hasStorage && i == 0),
			Deprecated:   v.Deprecated,
			Schema:       &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: schema},
			Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
		})
	}
	return b.Add(crd)
}

func openSchema() *apiextensionsv1.JSONSchemaProps {
	open := apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}
	return &apiextensionsv1.JSONSchemaProps{
		Type:       "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": open, "status": open},
	}
}

func lower(s string) string {
	out := []byte(s)
	for i, c := range out {
		if 'A' <= c && c <= 'Z' {
			out[i] = c + 'a' - 'A'
		}
	}
	return string(out)
}

// Service adds a ClusterIP Service in the install namespace selecting the
// pods of the workload named selectorName.
func (b *Builder) Service(name, selectorName string, ports ...corev1.ServicePort) *Builder {
	return b.Add(&corev1.Service{
		ObjectMeta: b.meta(name, true),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: b.Labels(selectorName),
			Ports:    ports,
		},
	})
}

// TLSSecret adds an empty kubernetes.io/tls Secret: the certificate is
// generated when the product is reconciled, never stored in a strategy.
func (b *Builder) TLSSecret(name string) *Builder {
	return b.Add(&corev1.Secret{ObjectMeta: b.meta(name, true), Type: corev1.SecretTypeTLS})
}

// ConfigMap adds a ConfigMap in the install namespace.
func (b *Builder) ConfigMap(name string, data map[string]string) *Builder {
	return b.Add(&corev1.ConfigMap{ObjectMeta: b.meta(name, true), Data: maps.Clone(data)})
}

// Webhook declares a ValidatingWebhookConfiguration with one webhook served
// by a Service of the product. Its caBundle is left empty: it is injected
// when the product's certificates are generated.
type Webhook struct {
	// Name of the configuration.
	Name string
	// WebhookName is the webhook's fully qualified name; "" means
	// Name + "." + product + ".installstrategy.io".
	WebhookName string
	// Service and Path receive the admission reviews; Port 0 means 443.
	Service string
	Path    string
	Port    int32
	Rules   []admissionregistrationv1.RuleWithOperations
	// Ignore makes the API server admit requests when the webhook is
	// unreachable; the zero value fails them.
	Ignore bool
}

// ValidatingWebhook adds a ValidatingWebhookConfiguration.
func (b *Builder) ValidatingWebhook(w Webhook) *Builder {
	name := w.WebhookName
	if name == "" {
		name = w.Name + "." + b.opts.Product + ".installstrategy.io"
	}
	port := w.Port
	if port == 0 {
		port = 443
	}
	policy := admissionregistrationv1.Fail
	if w.Ignore {
		policy = admissionregistrationv1.Ignore
	}
	return b.Add(&admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: b.meta(w.Name, false),
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: name,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				Service: &admissionregistrationv1.ServiceReference{Namespace: b.cfg.Namespace, Name: w.Service, Path: ptr.To(w.Path), Port: ptr.To(port)},
			},
			Rules:                   w.Rules,
			FailurePolicy:           ptr.To(policy),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
		}},
	})
}

// Workload declares a Deployment or DaemonSet with one container.
type Workload struct {
	Name string
	// Role is recorded in metakeys.RoleAnnotation; it orders rollouts and chooses
	// the placement pkg/placement applies: the configuration's Infra
	// placement for api and controller, its Workloads placement for
	// handler.
	Role Role
	// Component names the image (see identity.Config.Image); "" means
	// Name.
	Component string
	// Replicas of a Deployment; 0 means 1. DaemonSets ignore it.
	Replicas int32
	// ServiceAccount runs the pods; "" means Name.
	ServiceAccount string
	Command        []string
	Args           []string
	Ports          []corev1.ContainerPort
	// Env comes before the configuration's passthrough variables.
	Env []corev1.EnvVar
	// SecretVolumes mounts Secrets of the install namespace, keyed by
	// Secret name, at the given paths.
	SecretVolumes map[string]string
	// ReadinessProbe of the container; nil means none (the pod is ready
	// as soon as its container runs).
	ReadinessProbe *corev1.Probe
}

// Deployment adds a Deployment.
func (b *Builder) Deployment(w Workload) *Builder {
	replicas := w.Replicas
	if replicas == 0 {
		replicas = 1
	}
	tmpl, sel := b.podTemplate(w)
	return b.Add(&appsv1.Deployment{
		ObjectMeta: b.workloadMeta(w),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: sel,
			Template: tmpl,
		},
	})
}

// DaemonSet adds a DaemonSet whose rolling update replaces one pod at a
// time (the reconciler widens it once the canary pod is ready).
func (b *Builder) DaemonSet(w Workload) *Builder {
	tmpl, sel := b.podTemplate(w)
	return b.Add(&appsv1.DaemonSet{
		ObjectMeta: b.workloadMeta(w),
		Spec: appsv1.DaemonSetSpec{
			Selector: sel,
			Template: tmpl,
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
				Type:          appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(1))},
			},
		},
	})
}

func (b *Builder) workloadMeta(w Workload) metav1.ObjectMeta {
	m := b.meta(w.Name, true)
	m.Labels[metakeys.AppComponentLabel] = string(w.Role)
	m.Labels[metakeys.AppVersionLabel] = b.cfg.Version
	if errs := validation.IsValidLabelValue(b.cfg.Version); len(errs) > 0 && !b.badVersion {
		// Said once, here rather than by the API server at the first write:
		// a semantic version's build metadata (+...) is no label value.
		b.badVersion = true
		b.errs = append(b.errs, fmt.Errorf("version %q is not a valid value of label %s: %s", b.cfg.Version, metakeys.AppVersionLabel, strings.Join(errs, "; ")))
	}
	m.Annotations = map[string]string{metakeys.RoleAnnotation: string(w.Role)}
	switch w.Role {
	case RoleAPI, RoleController, RoleHandler:
	default:
		b.errs = append(b.errs, fmt.Errorf("workload %s: role %q is not one of api, controller, handler", w.Name, w.Role))
	}
	return m
}

func (b *Builder) podTemplate(w Workload) (corev1.PodTemplateSpec, *metav1.LabelSelector) {
	component := w.Component
	if component == "" {
		component = w.Name
	}
	sa := w.ServiceAccount
	if sa == "" {
		sa = w.Name
	}
	labels := b.Labels(w.Name)
	sel := &metav1.LabelSelector{MatchLabels: maps.Clone(labels)}
	labels[metakeys.AppComponentLabel] = string(w.Role)
	labels[metakeys.AppVersionLabel] = b.cfg.Version

	env := slices.Clone(w.Env)
	for _, k := range slices.Sorted(maps.Keys(b.cfg.PassthroughEnvVars)) {
		env = append(env, corev1.EnvVar{Name: k, Value: b.cfg.PassthroughEnvVars[k]})
	}
	pull := corev1.PullPolicy(b.cfg.AdditionalProperties[ImagePullPolicyProperty])
	if pull == "" {
		pull = corev1.PullIfNotPresent
	}
	c := corev1.Container{
		Name:            w.Name,
		Image:           b.Image(component),
		ImagePullPolicy: pull,
		Command:         w.Command,
		Args:            w.Args,
		Ports:           w.Ports,
		Env:             env,
		SecurityContext: podsec.Container(),
		ReadinessProbe:  w.ReadinessProbe,
	}
	spec := corev1.PodSpec{
		ServiceAccountName: sa,
		SecurityContext:    podsec.Pod(),
		Containers:         []corev1.Container{c},
	}
	for _, secret := range slices.Sorted(maps.Keys(w.SecretVolumes)) {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: secret, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}})
		spec.Containers[0].VolumeMounts = append(spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: secret, MountPath: w.SecretVolumes[secret], ReadOnly: true})
	}
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}, sel
}

// Build returns the strategy: every object once, in serialisation order,
// with the identity of the configuration. It reports every problem met
// while building, and objects declared twice.
func (b *Builder) Build() (*strategy.Strategy, error) {
	errs := slices.Clone(b.errs)
	id, err := b.cfg.Identity(b.opts.Algorithm)
	if err != nil {
		errs = append(errs, err)
	}
	if b.cfg.Version == "" {
		errs = append(errs, errors.New("the configuration has no version"))
	}
	if b.cfg.Namespace == "" {
		errs = append(errs, errors.New("the configuration has no namespace"))
	}
	seen := map[strategy.ObjectRef]bool{}
	objs := make([]*unstructured.Unstructured, 0, len(b.objects))
	for _, u := range b.objects {
		ref := strategy.RefOf(u)
		switch {
		case u.GetName() == "":
			errs = append(errs, fmt.Errorf("%s: object without a name", ref))
			continue
		case seen[ref]:
			errs = append(errs, fmt.Errorf("%s: declared twice", ref))
			continue
		}
		seen[ref] = true
		objs = append(objs, u.DeepCopy())
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("generate %s: %w", b.opts.Product, err)
	}
	s := &strategy.Strategy{Identity: id, Objects: objs}
	s.Sort()
	return s, nil
}
