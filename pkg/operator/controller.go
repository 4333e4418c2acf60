package operator

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	crreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/engine"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/loader"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
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

// SetupWithManager registers the reconciler with the manager: it watches
// Installations, strategy ConfigMaps of their namespaces, the workloads
// that keep pods running (kinds.PodKeepers: spec changes and deletions, for drift), the key
// Secret and trusted keys ConfigMap of the key namespace (keyWatches), and
// the dump Jobs' status (dumpJobWatch).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	n := r.opts.MaxConcurrentReconciles
	if n == 0 {
		n = 4
	}
	if err := mgr.Add(warmer{r}); err != nil {
		return fmt.Errorf("informers: %w", err)
	}
	byNamespace := handler.EnqueueRequestsFromMapFunc(r.installationsOfNamespace)
	keys, err := r.keyWatches(mgr)
	if err != nil {
		return err
	}
	dumps, err := r.dumpJobWatch(mgr, byNamespace)
	if err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(strings.ToLower(r.res.GroupVersionKind().Kind)).
		For(r.res.New(), builder.WithPredicates(r.stopDeletedRollouts(), installationChanged())).
		Watches(&corev1.ConfigMap{}, byNamespace, builder.WithPredicates(r.strategyConfigMapChanged()))
	// Workloads that keep pods running are watched through the informers
	// the reconciler reads from, which hold only objects installations
	// wrote: other products' workloads cost no memory.
	for _, info := range kinds.PodKeepers() {
		b = b.WatchesRawSource(source.Kind[client.Object](r.live.Informers(), workloadObject(info.GroupVersionKind()), byNamespace, r.workloadDrift()))
	}
	return b.WatchesRawSource(keys[0]).
		WatchesRawSource(keys[1]).
		WatchesRawSource(dumps).
		WithOptions(crcontroller.Options{MaxConcurrentReconciles: n}).
		Complete(r)
}

// workloadObject is the watched object of a workload kind: unstructured,
// so that the watch shares the informer the reconciler reads from.
func workloadObject(gvk schema.GroupVersionKind) client.Object {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// stopDeletedRollouts passes every event; on the update that gives an
// Installation its deletion timestamp it cancels the Installation's
// running rollout, so that its delete stages run at once instead of after
// the rollout (whose reconcile holds the Installation's key).
func (r *Reconciler) stopDeletedRollouts() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			if e.ObjectNew != nil && e.ObjectNew.GetDeletionTimestamp() != nil && (e.ObjectOld == nil || e.ObjectOld.GetDeletionTimestamp() == nil) {
				if cancel, ok := r.rollouts.Load(e.ObjectNew.GetUID()); ok {
					cancel.(context.CancelCauseFunc)(errDeletedMidRollout)
				}
			}
			return true
		},
	}
}

// installationChanged passes spec changes, deletions and removed
// finalizers (the operator's own put back), not the operator's own status
// writes, nor the finalizer it adds itself in the reconcile that goes on
// to roll out (passing that would reconcile everything once more at once).
func installationChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			if e.ObjectOld == nil || e.ObjectNew == nil {
				return true
			}
			return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
				!e.ObjectNew.GetDeletionTimestamp().Equal(e.ObjectOld.GetDeletionTimestamp()) ||
				slices.ContainsFunc(e.ObjectOld.GetFinalizers(), func(f string) bool { return !slices.Contains(e.ObjectNew.GetFinalizers(), f) })
		},
	}
}

// strategyConfigMapChanged passes the events of strategy ConfigMaps (a
// strategy published for a waiting Installation, one tampered with or
// deleted), except the creation and deletion of those the operator
// stores or garbage-collects itself: the reconcile that writes them goes
// on from there, and another at once would load the whole strategy again.
func (r *Reconciler) strategyConfigMapChanged() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool {
			return isStrategyConfigMap(e.Object) && !r.own.seen(createKey(e.Object))
		},
		UpdateFunc: func(e event.UpdateEvent) bool { return isStrategyConfigMap(e.ObjectNew) },
		DeleteFunc: func(e event.DeleteEvent) bool {
			return isStrategyConfigMap(e.Object) && !r.own.seen(deleteKey(e.Object.GetUID()))
		},
		GenericFunc: func(e event.GenericEvent) bool { return isStrategyConfigMap(e.Object) },
	}
}

// createKey names the creation of a native strategy ConfigMap: its
// namespace and digest (its name may be generated, its UID is not known
// before the write); "" for one without a digest.
func createKey(o client.Object) string {
	d := o.GetAnnotations()[metakeys.DigestAnnotation]
	if d == "" {
		return ""
	}
	return "create " + o.GetNamespace() + " " + d
}

// deleteKey names the deletion of an object.
func deleteKey(uid types.UID) string {
	if uid == "" {
		return ""
	}
	return "delete " + string(uid)
}

// ownEvents remembers writes the operator is about to make (recorded
// before the request, so that its watch event cannot come first), so that
// their events are told from others'. Records older than ownEventsTTL
// (the write failed, its event was missed) are dropped.
type ownEvents struct {
	mu   sync.Mutex
	keys map[string]time.Time
}

const ownEventsTTL = time.Minute

// expect records a write about to be made.
func (o *ownEvents) expect(key string) {
	if key == "" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	if o.keys == nil {
		o.keys = map[string]time.Time{}
	}
	for k, at := range o.keys {
		if now.Sub(at) > ownEventsTTL {
			delete(o.keys, k)
		}
	}
	o.keys[key] = now
}

// seen reports, once, whether an event is of a write recorded by expect.
func (o *ownEvents) seen(key string) bool {
	if key == "" {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.keys[key]
	delete(o.keys, key)
	return ok
}

func isStrategyConfigMap(o client.Object) bool {
	l := o.GetLabels()
	_, native := l[metakeys.StrategyLabel]
	_, kv := l[metakeys.KubeVirtStrategyLabel]
	return native || kv
}

func (r *Reconciler) installationsOfNamespace(ctx context.Context, o client.Object) []crreconcile.Request {
	return r.requests(ctx, o.GetNamespace())
}

// stage is one named step of the reconcile pipeline. Run returns done when
// the pipeline stops here for now (the state's result says when to come
// back).
type stage struct {
	Name string
	Run  func(ctx context.Context, s *state) (done bool, err error)
}

// state is what the stages of one reconcile share.
type state struct {
	// Installation is the view of the object reconciled (Resource.View);
	// its Status is written by the stages (under the state's lock while a
	// rollout runs) and into the object by writeStatus.
	Installation *v1alpha1.Installation
	// Object is the object reconciled, as read at the start.
	Object client.Object
	// Config is the deployment configuration (stage config).
	Config *identity.Config
	// Algorithm computes the configuration's identifier (stage config).
	Algorithm identity.Algorithm
	// Target is the identity of the strategy to deploy.
	Target strategy.Identity
	// Strategy is the loaded, customised strategy (stage load).
	Strategy *strategy.Strategy
	// Result says when to reconcile again.
	Result ctrl.Result
	// Outcome names the reconcile's outcome for the metrics.
	Outcome string

	log     logr.Logger
	mu      sync.Mutex // guards Installation.Status
	writeMu sync.Mutex // serialises status writes
	// written is the status as read at the start or last written: a
	// write of the same status is skipped (an unchanged resync writes
	// nothing).
	written *v1alpha1.InstallationStatus
	// lastWrite is the object as this reconcile's last status write
	// returned it: the next write starts from it instead of reading the
	// object again (a conflict, someone else's write since, reads it).
	lastWrite client.Object
	// claims is the claim stage's answer, which the rollout that follows
	// takes (engine.Options.Claims) instead of checking again.
	claims *engine.Claims
	// walking is set when the strategy loaded is an intermediate version
	// of an upgrade path (walkUpgradePath).
	walking bool
}

// stages returns the pipeline of an Installation that is not being deleted.
func (r *Reconciler) stages() []stage {
	return []stage{
		{"finalizer", r.stageFinalizer},
		{"active", r.stageActive},
		{"config", r.stageConfig},
		{"load", r.stageLoad},
		{"claim", r.stageClaim},
		{"apply", r.stageApply},
		{"gc", r.walkOn(r.stageGC)},
	}
}

// deleteStages returns the pipeline of an Installation being deleted.
func (r *Reconciler) deleteStages() []stage {
	return []stage{
		{"deleting", r.stageDeleting},
		{"workloads", r.stageWorkloads},
		{"uninstall", r.stageUninstall},
		{"strategies", r.stageDeleteStrategies},
		{"release", r.stageRelease},
	}
}

// current returns the Installation from the cache, or from the API server
// when the cached copy is not the version the operator last wrote or read
// (see Reconciler.wrote).
func (r *Reconciler) current(ctx context.Context, key client.ObjectKey) (client.Object, error) {
	obj := r.res.New()
	if err := r.client.Get(ctx, key, obj); err != nil {
		return nil, err
	}
	if rv, ok := r.wrote.Load(key); !ok || rv == obj.GetResourceVersion() {
		return obj, nil
	}
	if err := r.reader.Get(ctx, key, obj); err != nil {
		return nil, err
	}
	r.wrote.Store(key, obj.GetResourceVersion())
	return obj, nil
}

// Reconcile runs the stages for one Installation.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	if req.Namespace == r.opts.KeyNamespace {
		// The key namespace is never an install namespace: its ConfigMap
		// editors would choose the keys that vouch for what is applied.
		log.Error(ErrKeyNamespaceWatched, "installation in the key namespace not reconciled", "namespace", req.Namespace)
		return ctrl.Result{}, nil
	}
	obj, err := r.current(ctx, req.NamespacedName)
	if apierrors.IsNotFound(err) {
		r.wrote.Delete(req.NamespacedName)
		r.metrics.forget(req.Namespace, req.Name)
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	in, err := r.view(obj)
	if err != nil {
		// The author's object cannot be read as an installation: nothing
		// is done until it changes.
		log.Error(err, "not reconciled")
		return ctrl.Result{}, nil
	}
	s := &state{Installation: in, Object: obj, log: log, Outcome: "deployed", written: in.Status.DeepCopy()}
	start := time.Now()
	defer func() { r.metrics.ReconcileSeconds.WithLabelValues(s.Outcome).Observe(time.Since(start).Seconds()) }()
	stages := r.stages()
	if in.IsDeleting() {
		stages = r.deleteStages()
		s.Outcome = "deleted"
	}
	for _, st := range stages {
		done, err := st.Run(ctx, s)
		if err != nil {
			s.Outcome = "error"
			r.metrics.Reconciles.WithLabelValues("error").Inc()
			r.metrics.setPhase(in.Namespace, in.Name, in.Status.Phase)
			return s.Result, fmt.Errorf("stage %s: %w", st.Name, err)
		}
		if done {
			break
		}
	}
	r.metrics.Reconciles.WithLabelValues(s.Outcome).Inc()
	if in.Status.Phase != "" && !in.IsDeleting() {
		r.metrics.setPhase(in.Namespace, in.Name, in.Status.Phase)
	}
	return s.Result, nil
}

// update runs f on the status under the state's lock.
func (s *state) update(f func(in *v1alpha1.Installation)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s.Installation)
}

// writeStatus writes the state's status through the status subresource,
// on the latest version of the object.
func (r *Reconciler) writeStatus(ctx context.Context, s *state) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	// Ready, Reconciling and Stalled are derived from the rest of the
	// status for the generation this reconcile works on, which the write
	// records as observed: kstatus reads them together.
	s.Installation.SetStatusConditions()
	status := s.Installation.Status.DeepCopy()
	status.ObservedGeneration = s.Installation.Generation
	key := client.ObjectKeyFromObject(s.Installation)
	// The view SetStatus writes from: the spec and metadata of this
	// reconcile, the status to write.
	view := &v1alpha1.Installation{ObjectMeta: *s.Installation.ObjectMeta.DeepCopy(), Spec: *s.Installation.Spec.DeepCopy(), Status: *status}
	s.mu.Unlock()
	if s.written != nil && apiequality.Semantic.DeepEqual(*s.written, *status) {
		return nil
	}
	known := s.lastWrite
	s.lastWrite = nil
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		latest := known
		known = nil
		if latest == nil {
			latest = r.res.New()
			if err := r.reader.Get(ctx, key, latest); err != nil {
				return err
			}
		}
		// s.written may be older than the object (someone else wrote
		// it since): the object itself decides.
		next, changed, err := r.withStatus(latest, view)
		if err != nil {
			return err
		}
		if !changed {
			r.wrote.Store(key, latest.GetResourceVersion())
			return nil
		}
		if err := r.client.Status().Update(ctx, next); err != nil {
			return err
		}
		r.wrote.Store(key, next.GetResourceVersion())
		s.lastWrite = next
		return nil
	})
	if apierrors.IsNotFound(err) {
		// Gone (its finalizer was removed): nothing to report on.
		return nil
	}
	if err != nil {
		return fmt.Errorf("write status of installation %s: %w", key, err)
	}
	s.written = status
	return nil
}

func (r *Reconciler) event(in *v1alpha1.Installation, eventType, reason, action, note string, args ...any) {
	r.recorder.Eventf(r.ref(in), nil, eventType, reason, action, "%s", eventNote(fmt.Sprintf(note, args...)))
}

// maxEventNote is the API server's limit on an Event's note.
const maxEventNote = 1024

// eventNote shortens a note to the API server's limit (which rejects the
// whole Event otherwise).
func eventNote(s string) string { return v1alpha1.Truncate(s, maxEventNote) }

func (r *Reconciler) resync() time.Duration {
	if r.opts.ResyncPeriod > 0 {
		return r.opts.ResyncPeriod
	}
	return DefaultResyncPeriod
}

// stageFinalizer puts the finalizer on the Installation.
func (r *Reconciler) stageFinalizer(ctx context.Context, s *state) (bool, error) {
	in, obj := s.Installation, s.Object
	if controllerutil.ContainsFinalizer(obj, v1alpha1.Finalizer) {
		return false, nil
	}
	obj = obj.DeepCopyObject().(client.Object)
	controllerutil.AddFinalizer(obj, v1alpha1.Finalizer)
	if err := r.client.Update(ctx, obj); err != nil {
		return false, fmt.Errorf("add finalizer: %w", err)
	}
	s.Object = obj
	in.Finalizers, in.ResourceVersion = obj.GetFinalizers(), obj.GetResourceVersion()
	r.wrote.Store(client.ObjectKeyFromObject(obj), obj.GetResourceVersion())
	return false, nil
}

// activeInstallation returns the Installation of the namespace that may
// manage the product: the oldest that is not being deleted (ties go to the
// lesser name). Installations set aside as AnotherInstallationActive count,
// so one of them takes over when the active one goes.
func (r *Reconciler) activeInstallation(ctx context.Context, namespace string) (*v1alpha1.Installation, error) {
	list, err := r.list(ctx, namespace)
	if err != nil {
		return nil, fmt.Errorf("list installations of namespace %s: %w", namespace, err)
	}
	var winner *v1alpha1.Installation
	for _, c := range list {
		if c.IsDeleting() {
			continue
		}
		if winner == nil || c.CreationTimestamp.Before(&winner.CreationTimestamp) ||
			(c.CreationTimestamp.Equal(&winner.CreationTimestamp) && c.Name < winner.Name) {
			winner = c
		}
	}
	return winner, nil
}

// stageActive stops an Installation that is not the active one of its
// namespace: phase Deleted, AnotherInstallationActive, nothing installed.
func (r *Reconciler) stageActive(ctx context.Context, s *state) (bool, error) {
	in := s.Installation
	winner, err := r.activeInstallation(ctx, in.Namespace)
	if err != nil {
		return false, err
	}
	if winner == nil || winner.Name == in.Name {
		return false, nil
	}
	msg := fmt.Sprintf("installation %s/%s is active in this namespace; this one installs nothing", winner.Namespace, winner.Name)
	changed := in.Status.Phase != v1alpha1.PhaseDeleted
	in.Status.Phase = v1alpha1.PhaseDeleted
	changed = in.SetCondition(v1alpha1.ConditionSynchronized, metav1.ConditionFalse, v1alpha1.ReasonAnotherInstallationActive, msg) || changed
	changed = in.SetCondition(v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonAnotherInstallationActive, msg) || changed
	changed = in.SetCondition(v1alpha1.ConditionAvailable, metav1.ConditionFalse, v1alpha1.ReasonAnotherInstallationActive, msg) || changed
	changed = in.SetCondition(v1alpha1.ConditionProgressing, metav1.ConditionFalse, v1alpha1.ReasonAnotherInstallationActive, msg) || changed
	if changed || in.Status.ObservedGeneration != in.Generation {
		if err := r.writeStatus(ctx, s); err != nil {
			return false, err
		}
		r.event(in, corev1.EventTypeWarning, v1alpha1.ReasonAnotherInstallationActive, "Check", "%s", msg)
		s.log.Info("another installation is active", "active", winner.Name)
	}
	s.Outcome = "inactive"
	s.Result.RequeueAfter = 30 * time.Second
	return true, nil
}

// stageConfig maps the spec onto the deployment configuration and computes
// the target identity (native algorithm).
func (r *Reconciler) stageConfig(_ context.Context, s *state) (bool, error) {
	cfg, alg, err := r.config(s.Installation)
	if err != nil {
		return false, err
	}
	s.Algorithm = alg
	id, err := cfg.Identity(alg)
	if err != nil {
		return false, fmt.Errorf("identity: %w", err)
	}
	s.Config, s.Target = cfg, id
	return false, nil
}

// failLoad records a load failure: Degraded with reason, and the phase.
func (r *Reconciler) failLoad(ctx context.Context, s *state, phase v1alpha1.InstallationPhase, reason string, cause error) error {
	in := s.Installation
	s.update(func(in *v1alpha1.Installation) {
		switch {
		case phase != "":
			in.Status.Phase = phase
		case in.Status.Phase == "":
			in.Status.Phase = v1alpha1.PhaseDeploying
		}
		in.SetCondition(v1alpha1.ConditionDegraded, metav1.ConditionTrue, reason, cause.Error())
	})
	if err := r.writeStatus(ctx, s); err != nil {
		return err
	}
	r.event(in, corev1.EventTypeWarning, reason, "Load", "%s", cause.Error())
	s.log.Info("strategy not loaded", "reason", reason, "error", cause.Error())
	s.Outcome = "degraded"
	return nil
}
