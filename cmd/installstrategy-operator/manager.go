package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/internal/dump"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/operator"
	"github.com/installstrategy/installstrategy/pkg/render/helmexec"
)

const (
	defaultLeaderElectionNamespace = "installstrategy-system"
	leaderElectionID               = "installstrategy-operator.installstrategy.io"
)

// managerOptions are the flags of the manager mode.
type managerOptions struct {
	leaderElect             bool
	leaderElectionNamespace string
	probeAddr               string
	metricsAddr             string
	metricsInsecure         bool
	metricsCertDir          string
	enableHTTP2             bool
	// skipNameValidation lets tests run several managers in one process
	// (controller names are unique per process otherwise).
	skipNameValidation bool
	pprofAddr          string
	namespace          string
	keyNamespace       string
	dumpPodLabels      map[string]string
	dumpPodEnv         []corev1.EnvVar
	dumpPodPlacement   *identity.NodePlacement
	image              string
	registry           string
	version            string
	resync             time.Duration
	servedCheck        time.Duration
	stageDeadline      time.Duration
	qps                float64
	burst              int
	maxReconciles      int
	helmRenderer       string
}

// managerRestConfig is the --kubeconfig file, else controller-runtime's
// lookup ($KUBECONFIG, in-cluster, ~/.kube/config).
func managerRestConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return restConfig(kubeconfig)
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("no --kubeconfig given: %w", err)
	}
	return cfg, nil
}

// resolvedKeyNamespace is --key-namespace, else
// --leader-election-namespace, else the pod's namespace, else
// operator.DefaultKeyNamespace.
func (o managerOptions) resolvedKeyNamespace() string {
	if o.keyNamespace != "" {
		return o.keyNamespace
	}
	if o.leaderElectionNamespace != "" {
		return o.leaderElectionNamespace
	}
	if ns := podNamespace(); ns != "" {
		return ns
	}
	return operator.DefaultKeyNamespace
}

// newManager builds the manager with the Installation controller.
func newManager(log logr.Logger, cfg *rest.Config, o managerOptions) (ctrl.Manager, error) {
	scheme, err := managerScheme()
	if err != nil {
		return nil, err
	}
	keyNamespace := o.resolvedKeyNamespace()
	cacheOpts, err := cacheOptions(o, keyNamespace)
	if err != nil {
		return nil, err
	}
	leNamespace := o.leaseNamespace()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Logger:                  log,
		Cache:                   cacheOpts,
		Metrics:                 metricsOptions(o),
		Controller:              ctrlconfig.Controller{SkipNameValidation: &o.skipNameValidation},
		HealthProbeBindAddress:  o.probeAddr,
		PprofBindAddress:        o.pprofAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        leaderElectionID,
		LeaderElectionNamespace: leNamespace,
		// Give the lease up on shutdown, so a new replica takes over at once.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return nil, fmt.Errorf("manager: %w", err)
	}
	if o.probeAddr != "0" && o.probeAddr != "" {
		if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
			return nil, err
		}
	}
	logHelmRenderer(log, o.helmRenderer)
	// The key namespace is never the watched one (an install namespace,
	// whose ConfigMap editors must not choose the trusted keys).
	r, err := operator.New(mgr, operator.Options{
		Resource:                operator.InstallationResource(),
		Product:                 dump.Product,
		KeyNamespace:            keyNamespace,
		DumpPodLabels:           o.dumpPodLabels,
		DumpPodEnv:              o.dumpPodEnv,
		DumpPodPlacement:        o.dumpPodPlacement,
		Defaults:                operator.Defaults{Version: o.version, Registry: o.registry},
		OperatorImage:           o.image,
		ResyncPeriod:            o.resync,
		ServedCertificateCheck:  o.servedCheck,
		StageDeadline:           o.stageDeadline,
		MaxConcurrentReconciles: o.maxReconciles,
		HelmRenderer:            helmexec.Renderer{Path: o.helmRenderer},
	})
	if err != nil {
		return nil, err
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up controller: %w", err)
	}
	if o.probeAddr != "0" && o.probeAddr != "" {
		// Ready once the informers of the kind table have started.
		if err := mgr.AddReadyzCheck("informers", r.InformersStarted); err != nil {
			return nil, err
		}
	}
	return mgr, nil
}

// managerScheme is the scheme of the manager: client-go's kinds and the
// Installation.
func managerScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return scheme, nil
}

// cacheOptions is what the manager's cache holds: strategy ConfigMaps
// only, and of each only what the watch reads
// (operator.StrategyConfigMapsCache), without field managers, of the
// watched namespace (or every namespace but the key namespace).
func cacheOptions(o managerOptions, keyNamespace string) (cache.Options, error) {
	strategies, err := operator.StrategyConfigMapsCache()
	if err != nil {
		return cache.Options{}, err
	}
	// Field managers stripped: nothing here reads them, and they are half
	// of an object's metadata.
	cacheOpts := cache.Options{ByObject: map[client.Object]cache.ByObject{&corev1.ConfigMap{}: strategies},
		DefaultTransform: cache.TransformStripManagedFields()}
	var watched []string
	if o.namespace != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{o.namespace: {}}
		watched = []string{o.namespace}
	} else {
		// Every namespace but the key namespace.
		cacheOpts.DefaultFieldSelector = operator.ExcludeKeyNamespace(keyNamespace)
	}
	if err := operator.CheckKeyNamespace(keyNamespace, watched, o.namespace == ""); err != nil {
		return cache.Options{}, err
	}
	return cacheOpts, nil
}

// leaseNamespace is the namespace of the leader election Lease:
// --leader-election-namespace, else --namespace, else the pod's (left to
// controller-runtime in a cluster), else defaultLeaderElectionNamespace.
func (o managerOptions) leaseNamespace() string {
	leNamespace := o.leaderElectionNamespace
	if leNamespace == "" && o.namespace != "" {
		leNamespace = o.namespace
	}
	if leNamespace == "" {
		if _, err := rest.InClusterConfig(); err != nil {
			leNamespace = defaultLeaderElectionNamespace
		}
	}
	return leNamespace
}

// metricsOptions serves /metrics as kubebuilder scaffolds it: over HTTPS
// (the tls.crt and tls.key of metricsCertDir, reloaded when they change;
// without them a self-signed certificate controller-runtime makes at
// start), and only to a caller the API server authenticates (TokenReview)
// and authorizes for GET on the non-resource URL /metrics
// (SubjectAccessReview; operator.MetricsAuthFilter, the reviews of
// controller-runtime's filters.WithAuthenticationAndAuthorization without
// its dependencies, docs/NOTES.md): what the operator reports
// (its Installations, its requests, its Go runtime) is not for every pod
// that can reach it. metricsInsecure (--metrics-secure=false) serves plain
// HTTP to anyone, for a loopback address in development. HTTP/2 is off
// unless enableHTTP2 (its rapid stream resets, CVE-2023-44487).
func metricsOptions(o managerOptions) metricsserver.Options {
	opts := metricsserver.Options{BindAddress: o.metricsAddr}
	if o.metricsInsecure {
		return opts
	}
	opts.SecureServing = true
	opts.FilterProvider = operator.MetricsAuthFilter
	opts.CertDir = o.metricsCertDir
	if !o.enableHTTP2 {
		opts.TLSOpts = []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
	}
	return opts
}

// runManager runs the manager until ctx ends.
func runManager(ctx context.Context, log logr.Logger, cfg *rest.Config, o managerOptions) error {
	ctrl.SetLogger(log)
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
	if rl := log.V(requestLogVerbosity); rl.Enabled() {
		cfg.Wrap(logRequests(rl.WithName("client")))
	}
	mgr, err := newManager(log, cfg, o)
	if err != nil {
		return err
	}
	log.Info("starting manager", "namespace", o.namespace, "leaderElect", o.leaderElect, "metrics", o.metricsAddr, "metricsSecure", !o.metricsInsecure, "probes", o.probeAddr)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	return nil
}

// podNamespace is the namespace of the operator's pod, "" outside a
// cluster.
func podNamespace() string {
	data, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// logHelmRenderer says which renderer the charts of Helm sources go to
// (--helm-renderer was checked with the other flags): a missing default
// is not an error (Installations without a Helm source need none), but
// the log says so at once rather than at the first chart.
func logHelmRenderer(log logr.Logger, flagValue string) {
	path := flagValue
	if path == "" {
		p, err := helmexec.DefaultPath()
		if err != nil {
			log.Info("no chart renderer: Installations with a Helm source fail until one is installed", "reason", err.Error())
			return
		}
		path = p
	}
	log.Info("charts of Helm sources are rendered by " + path)
}

// executableFile checks that path is a file someone may execute.
func executableFile(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("not an executable file")
	}
	return nil
}
