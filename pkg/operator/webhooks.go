package operator

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// DefaultWebhookPort is the port an operator's webhook server listens on
// when Webhooks.Port is zero (controller-runtime's default).
const DefaultWebhookPort = 9443

// Webhooks are admission webhooks of the strategy that the operator's own
// process serves, rather than a workload of the strategy. KubeVirt's is
// the case: its strategy holds virt-operator-validator, whose Service
// (kubevirt-operator-webhook) selects virt-operator's pods, so an operator
// replacing virt-operator must answer it. The engine issues the serving
// certificate into Secret, for every name of the Service, because the
// operator's pods mount that Secret (pkg/engine: certificates know
// their Service); ServeWebhooks serves it from there and follows its
// rotation.
type Webhooks struct {
	// Configuration is the name of the strategy's
	// ValidatingWebhookConfiguration or MutatingWebhookConfiguration
	// whose webhooks these are (KubeVirt: virt-operator-validator).
	Configuration string
	// Namespace is where the Service and the Secret are: the install
	// namespace, where the operator's pods run.
	Namespace string
	// Secret is the TLS Secret of the strategy that the operator's pods
	// mount (KubeVirt: kubevirt-operator-certs). The server presents the
	// certificate it holds, read from the API server (not from the
	// mounted file), so an operator running outside the cluster serves
	// it too.
	Secret string
	// Handlers maps each webhook's clientConfig.service.path to its
	// handler (KubeVirt: /kubevirt-validate-delete, …).
	Handlers map[string]admission.Handler
	// Host is the address the server listens on; empty: every address.
	Host string
	// Port is the port the server listens on: the container port the
	// Service's targetPort names. Zero: DefaultWebhookPort.
	Port int
}

func (w Webhooks) port() int {
	if w.Port == 0 {
		return DefaultWebhookPort
	}
	return w.Port
}

func (w Webhooks) validate() error {
	var errs []error
	if w.Configuration == "" {
		errs = append(errs, errors.New("no webhook configuration named"))
	}
	if w.Namespace == "" || w.Secret == "" {
		errs = append(errs, errors.New("no namespace and secret of the serving certificate"))
	}
	if len(w.Handlers) == 0 {
		errs = append(errs, errors.New("no handlers"))
	}
	for path, h := range w.Handlers {
		if !strings.HasPrefix(path, "/") || h == nil {
			errs = append(errs, fmt.Errorf("handler path %q: want an absolute path and a handler", path))
		}
	}
	if w.Port < 0 || w.Port > 65535 {
		errs = append(errs, fmt.Errorf("port %d out of range", w.Port))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("webhooks %q: %w", w.Configuration, err)
	}
	return nil
}

// ServeWebhooks adds to mgr controller-runtime's webhook server for w:
// each handler at its path, over TLS with the certificate of Secret
// w.Namespace/w.Secret, watched (only that Secret) and reloaded when the
// engine rotates it. Until the Secret holds a certificate, handshakes
// fail: a webhook with failurePolicy Fail refuses what it guards rather
// than being answered by a server the API server cannot verify. The
// server runs on every replica (no leader election). It returns the
// server, whose StartedChecker is a readiness check.
func ServeWebhooks(mgr manager.Manager, w Webhooks) (webhook.Server, error) {
	if err := w.validate(); err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("webhooks %q: %w", w.Configuration, err)
	}
	cert := newSecretCertificate(kube, w.Namespace, w.Secret)
	srv := webhook.NewServer(webhook.Options{Host: w.Host, Port: w.port(), TLSOpts: []func(*tls.Config){func(c *tls.Config) {
		c.MinVersion = tls.VersionTLS12
		c.GetCertificate = cert.GetCertificate
	}}})
	paths := make([]string, 0, len(w.Handlers))
	for p := range w.Handlers {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		srv.Register(p, &webhook.Admission{Handler: w.Handlers[p]})
	}
	if err := mgr.Add(cert); err != nil {
		return nil, fmt.Errorf("webhooks %q: %w", w.Configuration, err)
	}
	if err := mgr.Add(srv); err != nil {
		return nil, fmt.Errorf("webhooks %q: %w", w.Configuration, err)
	}
	return srv, nil
}

// secretCertificate is the serving certificate of one TLS Secret, from an
// informer on that Secret alone, parsed again only when it changes.
type secretCertificate struct {
	namespace, name string
	informer        toolscache.SharedIndexInformer

	mu      sync.Mutex
	version string
	cert    *tls.Certificate
}

func newSecretCertificate(kube kubernetes.Interface, namespace, name string) *secretCertificate {
	only := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = only
			return kube.CoreV1().Secrets(namespace).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = only
			return kube.CoreV1().Secrets(namespace).Watch(ctx, o)
		},
	}
	return &secretCertificate{namespace: namespace, name: name,
		informer: toolscache.NewSharedIndexInformer(lw, &corev1.Secret{}, 0, toolscache.Indexers{})}
}

// Start runs the informer until ctx ends (manager.Runnable).
func (s *secretCertificate) Start(ctx context.Context) error {
	s.informer.RunWithContext(ctx)
	return nil
}

// NeedLeaderElection: every replica serves.
func (s *secretCertificate) NeedLeaderElection() bool { return false }

// GetCertificate returns the Secret's certificate (tls.Config).
func (s *secretCertificate) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	obj, ok, err := s.informer.GetStore().GetByKey(s.namespace + "/" + s.name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("serving certificate: secret %s/%s not found (yet)", s.namespace, s.name)
	}
	sec := obj.(*corev1.Secret)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cert != nil && sec.ResourceVersion == s.version {
		return s.cert, nil
	}
	if len(sec.Data[corev1.TLSCertKey]) == 0 {
		return nil, fmt.Errorf("serving certificate: secret %s/%s holds no certificate yet", s.namespace, s.name)
	}
	pair, err := tls.X509KeyPair(sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, fmt.Errorf("serving certificate: secret %s/%s: %w", s.namespace, s.name, err)
	}
	s.cert, s.version = &pair, sec.ResourceVersion
	return s.cert, nil
}

// Check says whether strategy s sends w's webhooks to the operator's
// pods, as pod (the operator Deployment's pod template) would run: the
// webhook configuration is in s; each of its webhooks dials a Service of
// w.Namespace at a path w handles, and every handler is dialed; each such
// Service is in s and selects pod's labels, and its target port is a
// container port of pod listening on w's port; w.Secret is a TLS Secret
// of s that pod mounts (which is what makes the engine name the Service
// on the certificate). Every mismatch is in the error.
func (w Webhooks) Check(s *strategy.Strategy, pod *corev1.PodTemplateSpec) error {
	if err := w.validate(); err != nil {
		return err
	}
	idx := s.Index()
	var errs []error
	var conf *unstructured.Unstructured
	for _, o := range s.Objects {
		if o.GetName() == w.Configuration && kinds.ConfiguresWebhooks(o.GroupVersionKind().GroupKind()) {
			conf = o
		}
	}
	if conf == nil {
		return fmt.Errorf("webhooks %q: no such webhook configuration in the strategy", w.Configuration)
	}
	// Where the configuration lists its webhooks and each names its
	// Service is the kind table's (kinds.Info.Dials, set for every kind
	// that ConfiguresWebhooks).
	info, _ := kinds.Lookup(conf.GroupVersionKind().GroupKind())
	dials := info.Dials
	hooks, _, _ := unstructured.NestedSlice(conf.Object, dials.Each...)
	dialed := map[string]bool{}
	services := map[string]bool{}
	for i, h := range hooks {
		hm, _ := h.(map[string]any)
		name, _, _ := unstructured.NestedString(hm, "name")
		svc, found, _ := unstructured.NestedMap(hm, dials.Service...)
		if !found {
			errs = append(errs, fmt.Errorf("webhook %d (%s) dials a URL, not a Service of %s", i, name, w.Namespace))
			continue
		}
		ns, _ := svc["namespace"].(string)
		svcName, _ := svc["name"].(string)
		path, _ := svc["path"].(string)
		if ns != w.Namespace {
			errs = append(errs, fmt.Errorf("webhook %d (%s) dials Service %s/%s, not one of %s", i, name, ns, svcName, w.Namespace))
			continue
		}
		if w.Handlers[path] == nil {
			errs = append(errs, fmt.Errorf("webhook %d (%s) dials path %q, which no handler serves", i, name, path))
		}
		dialed[path] = true
		services[svcName] = true
	}
	for path := range w.Handlers {
		if !dialed[path] {
			errs = append(errs, fmt.Errorf("handler %q: no webhook of the configuration dials it", path))
		}
	}
	names := make([]string, 0, len(services))
	for n := range services {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		errs = append(errs, w.checkService(idx[strategy.ObjectRef{Kind: kinds.Service.Kind, Namespace: w.Namespace, Name: n}], n, pod)...)
	}
	sec := idx[strategy.ObjectRef{Kind: kinds.Secret.Kind, Namespace: w.Namespace, Name: w.Secret}]
	if sec == nil || sec.Object["type"] != string(corev1.SecretTypeTLS) {
		errs = append(errs, fmt.Errorf("secret %s/%s: not a TLS Secret of the strategy", w.Namespace, w.Secret))
	}
	if !slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Secret != nil && v.Secret.SecretName == w.Secret }) {
		errs = append(errs, fmt.Errorf("the operator's pod mounts no volume of secret %s: the engine would not name the Service on its certificate", w.Secret))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("webhooks %q: %w", w.Configuration, err)
	}
	return nil
}

// checkService checks that Service svc (named name) sends to pod at w's
// port.
func (w Webhooks) checkService(svc *unstructured.Unstructured, name string, pod *corev1.PodTemplateSpec) []error {
	if svc == nil {
		return []error{fmt.Errorf("service %s/%s: not in the strategy", w.Namespace, name)}
	}
	sel, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
	if len(sel) == 0 || !labels.SelectorFromSet(sel).Matches(labels.Set(pod.Labels)) {
		return []error{fmt.Errorf("service %s/%s selects %v, not the operator's pod (labels %v)", w.Namespace, name, sel, pod.Labels)}
	}
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	var errs []error
	for _, p := range ports {
		pm, _ := p.(map[string]any)
		target := targetPort(pm)
		var got []int32
		for _, c := range pod.Spec.Containers {
			for _, cp := range c.Ports {
				if (target.Type == intstr.String && cp.Name == target.StrVal) || (target.Type == intstr.Int && cp.ContainerPort == target.IntVal) {
					got = append(got, cp.ContainerPort)
				}
			}
		}
		if !slices.Contains(got, int32(w.port())) {
			errs = append(errs, fmt.Errorf("service %s/%s targets port %s, which is not the operator's container port %d (found %v)", w.Namespace, name, target.String(), w.port(), got))
		}
	}
	return errs
}

// targetPort is a Service port's targetPort (its port when unset).
func targetPort(p map[string]any) intstr.IntOrString {
	switch v := p["targetPort"].(type) {
	case string:
		return intstr.FromString(v)
	case int64:
		return intstr.FromInt32(int32(v))
	case float64:
		return intstr.FromInt32(int32(v))
	}
	switch v := p["port"].(type) {
	case int64:
		return intstr.FromInt32(int32(v))
	case float64:
		return intstr.FromInt32(int32(v))
	}
	return intstr.IntOrString{}
}
