package operator

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/loader"
	"github.com/installstrategy/installstrategy/pkg/render/helmspec"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/strategy"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// Name is the controller's name, also the source of its Events.
const Name = "installstrategy-operator"

// Defaults of Options.
const (
	DefaultResyncPeriod     = 5 * time.Minute
	DefaultProgressInterval = 2 * time.Second
	DefaultErrorRequeue     = 10 * time.Second
	// ClaimRequeue is how often an Installation whose cluster-scoped
	// objects another installation holds (ClaimedByOther) looks again.
	ClaimRequeue = 10 * time.Second
	// DefaultServedCertificateCheck is how often, at most, a deployed
	// Installation's Services are dialled to check the certificates they
	// present (and after every rollout).
	DefaultServedCertificateCheck = 10 * time.Minute
)

// Options tune the Reconciler. The zero value resyncs every 5 minutes,
// refreshes status every 2 seconds during a rollout, generates the sample
// product in process and uses the reconciler's default deadlines.
type Options struct {
	// Resource is the kind reconciled; nil means InstallationResource.
	Resource Resource
	// Product generates the operator's built-in product for a
	// configuration: the strategy of a view whose spec names no source
	// (a generator in the binary, like virt-operator's). nil: such views
	// fail to load, saying so.
	Product func(cfg *identity.Config) (*strategy.Strategy, error)
	// Defaults are the version and registry of Installations that name
	// none.
	Defaults Defaults
	// OperatorImage is the operator's own image. When set, an Installation
	// of the built-in product at a version other than Defaults.Version gets
	// its strategy from a dump Job of this image; otherwise the product is
	// generated in process for any version.
	OperatorImage string
	// ResyncPeriod is how often a deployed Installation is reconciled again
	// to repair drift; 0 means DefaultResyncPeriod.
	ResyncPeriod time.Duration
	// ProgressInterval is how often status.components is refreshed while a
	// rollout runs; 0 means DefaultProgressInterval.
	ProgressInterval time.Duration
	// ServedCertificateCheck is how often, at most, resyncs check the
	// certificates Services present (condition CertificatesServed); 0
	// means DefaultServedCertificateCheck, a negative value never.
	ServedCertificateCheck time.Duration
	// DialService connects to a Service's ClusterIP for that check; nil
	// means a plain TCP dial (tests route ClusterIPs their cluster does
	// not).
	DialService func(ctx context.Context, network, addr string) (net.Conn, error)
	// StageDeadline bounds each step of a rollout; 0 means the reconciler's
	// default.
	StageDeadline time.Duration
	// Interval is the polling interval of rollout waits; 0 means the
	// reconciler's default.
	Interval time.Duration
	// DumpPodLabels are put on dump Job pods (tests select simulated
	// failures with them).
	DumpPodLabels map[string]string
	// DumpPodEnv is added to the dump containers' environment, and
	// DumpPodPlacement's node selector and tolerations to their pods (see
	// loader.Options).
	DumpPodEnv       []corev1.EnvVar
	DumpPodPlacement *identity.NodePlacement
	// ForeignDumps, DumpImageEnv and DumpClusterRules are for products
	// whose own operator image is the dump image (KubeVirt's
	// virt-operator): its pods report no digest, so a Job's result is
	// bound to the Job's run; its container gets its own image under
	// DumpImageEnv; its service account gets DumpClusterRules
	// cluster-wide (see loader.Options: Foreign, ImageEnv, ClusterRules).
	ForeignDumps     bool
	DumpImageEnv     string
	DumpClusterRules []rbacv1.PolicyRule
	// DumpPollInterval is how soon a pending dump Job is looked at again
	// if no event of it came meanwhile (the Jobs are watched: a finished
	// dump is loaded at once); 0 means loader.DefaultPollInterval.
	DumpPollInterval time.Duration
	// MaxConcurrentReconciles bounds parallel reconciles; 0 means 4.
	MaxConcurrentReconciles int
	// Metrics receive the operator's metrics; nil means DefaultMetrics.
	Metrics *Metrics
	// KeyNamespace is the operator's own namespace, where only cluster
	// administrators write: it holds the operator's signing key (the
	// Secret trust.OperatorKeySecret, created on first use) and the
	// further trusted public keys (the ConfigMap
	// trust.TrustedKeysConfigMap). It must not be an install namespace.
	// "" means DefaultKeyNamespace.
	KeyNamespace string
	// HelmRenderer renders the charts of Helm sources; nil means
	// helmexec.Renderer: the helper installstrategy-helm-render beside
	// the running program, else in $PATH, so that Helm's template engine
	// stays out of the operator's process (pkg/render/helmspec says why).
	// render.InProcess renders in this process instead.
	HelmRenderer helmspec.Renderer
}

// DefaultKeyNamespace is the operator's namespace unless told otherwise.
const DefaultKeyNamespace = "installstrategy-system"

// Reconciler reconciles Installations.
type Reconciler struct {
	client client.Client
	reader client.Reader
	cfg    *rest.Config
	kube   kubernetes.Interface
	dyn    dynamic.Interface
	store  *store.Store // signs with the operator's key, trusts only its keys
	plain  *store.Store // no policy: reads ConfigMaps the controller judges itself
	loader *loader.Loader
	// live caches the objects installations wrote (informers filtered by
	// the managed-by label); rc and applier read from it.
	live    *apply.InformerCache
	rc      *engine.Reconciler
	applier *apply.Applier
	// rollouts holds the cancel function (context.CancelCauseFunc) of
	// each running rollout, by Installation UID.
	rollouts sync.Map
	// certChecked holds, by Installation UID, when the certificates its
	// Services present were last checked (time.Time).
	certChecked sync.Map
	// wrote holds, by namespaced name, the resourceVersion of each
	// Installation as the operator last wrote or read it from the API
	// server. A cached copy at another version may be older than that
	// write (the informer has not seen it yet), so Reconcile reads the
	// object itself then: a status computed from a stale copy would
	// overwrite a newer one.
	wrote sync.Map
	// own holds the strategy ConfigMaps the operator itself is creating
	// or deleting (ownEvents): their watch events queue no reconcile.
	own ownEvents
	// drifts holds, by namespace, the *driftLog of the rollout running
	// there: the workload changes seen while it runs (workloadDrift).
	drifts sync.Map
	// warmed is closed once warmer has started the kind table's informers.
	warmed chan struct{}
	// oci caches pulled artifacts and registry clients (OCI and Helm
	// sources).
	oci ociArtifacts
	// charts caches the renders of Helm sources' charts.
	charts renderedCharts
	// keyCache holds the key Secret and trusted keys ConfigMap
	// (keyWatches); nil until SetupWithManager.
	keyCache cache.Cache
	keyMu    sync.Mutex
	key      *trust.OperatorKey
	// keyStale: the key Secret was deleted or unreadable; the next use
	// reads (or makes) it again, the held key serving until then.
	keyStale bool
	// started is when the Reconciler was made (keyWatches ignores the
	// trusted keys ConfigMap's creation before it).
	started  time.Time
	recorder recorder.EventRecorder
	metrics  *Metrics
	opts     Options
	res      Resource
}

// New returns a Reconciler that uses the manager's clients and
// configuration.
func New(mgr ctrl.Manager, opts Options) (*Reconciler, error) {
	cfg := mgr.GetConfig()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	if opts.KeyNamespace == "" {
		opts.KeyNamespace = DefaultKeyNamespace
	}
	r := &Reconciler{client: mgr.GetClient(), reader: mgr.GetAPIReader(), cfg: cfg, kube: kube, dyn: dyn,
		recorder: mgr.GetEventRecorder(Name), opts: opts, res: opts.Resource, warmed: make(chan struct{}), started: time.Now()}
	if r.res == nil {
		r.res = InstallationResource()
	}
	st, err := store.NewForConfig(cfg, store.Options{Signer: operatorSigner{r}, Trusted: r.trustedStored,
		Creating: func(cm *corev1.ConfigMap) { r.own.expect(createKey(cm)) },
		Deleting: func(e store.Entry) { r.own.expect(deleteKey(e.UID)) }})
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	plain, err := store.NewForConfig(cfg, store.Options{})
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	ld, err := loader.New(loader.Options{Store: st, Kube: kube, PodLabels: opts.DumpPodLabels, PodEnv: opts.DumpPodEnv, Placement: opts.DumpPodPlacement,
		PollInterval: opts.DumpPollInterval, Foreign: opts.ForeignDumps, ImageEnv: opts.DumpImageEnv, ClusterRules: opts.DumpClusterRules})
	if err != nil {
		return nil, fmt.Errorf("loader: %w", err)
	}
	r.metrics = opts.Metrics
	if r.metrics == nil {
		r.metrics = DefaultMetrics()
	}
	r.store, r.plain, r.loader = st, plain, ld
	// The reconciler's clients are built once; live objects come from the
	// informers of the cache, which the manager runs.
	live, err := apply.NewInformerCache(cfg)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(live); err != nil {
		return nil, fmt.Errorf("informer cache: %w", err)
	}
	base, err := engine.New(cfg)
	if err != nil {
		return nil, err
	}
	r.live, r.rc = live, base.WithCache(live)
	a, err := apply.NewForConfig(cfg, apply.Options{})
	if err != nil {
		return nil, err
	}
	r.applier = a.WithCache(live)
	return r, nil
}

// LiveCache reads the objects the reconciler's informer cache holds (only
// those installations wrote: it is filtered by the managed-by label).
func (r *Reconciler) LiveCache() client.Reader { return r.live.Informers() }

func (r *Reconciler) resync() time.Duration {
	if r.opts.ResyncPeriod > 0 {
		return r.opts.ResyncPeriod
	}
	return DefaultResyncPeriod
}
