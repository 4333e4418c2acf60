// Package loader owns where a strategy comes from: an in-memory cache, then
// the store, then a dump Job that runs the target version's operator image
// with --dump-install-strategy so it publishes its own strategy.
//
// Unlike KubeVirt's loader it notices every outcome of the Job: a failed Job
// is a *JobError with the pod's reason and last log lines, a Job that
// succeeded without publishing and a Job whose pod never starts are
// *JobErrors too, and each failure delays the next attempt by an
// exponential backoff measured on an injectable clock.
package loader

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// DumpFlag is the operator flag that makes it dump its strategy and exit.
const DumpFlag = "--dump-install-strategy"

// Labels and annotations of the dump Jobs and their RBAC.
const (
	// JobNamePrefix starts the name of every dump Job; the first
	// JobNameIDLength characters of the identifier follow.
	JobNamePrefix = "installstrategy-dump-"
	// JobNameIDLength is how much of the identifier a Job name carries.
	JobNameIDLength = 20
	// DefaultServiceAccount runs the dump Jobs unless told otherwise.
	DefaultServiceAccount = "installstrategy-dump"
)

// Defaults of Options.
const (
	DefaultActiveDeadline = 10 * time.Minute
	DefaultJobTTL         = time.Hour
	DefaultStartTimeout   = 2 * time.Minute
	DefaultInitialBackoff = 10 * time.Second
	defaultMaxBackoff     = 5 * time.Minute
	DefaultPollInterval   = 5 * time.Second
	defaultLogLines       = 20
	defaultCacheSize      = 8
)

// Options configure a Loader. Store and Kube are required; every other
// zero value means the default named in its comment.
type Options struct {
	Store *store.Store
	Kube  kubernetes.Interface
	// Clock measures backoff and the start timeout; nil means the real
	// clock.
	Clock clock.PassiveClock

	// ServiceAccount runs the dump Jobs; "" means DefaultServiceAccount.
	// The loader creates it with a Role that may only create, get and
	// list ConfigMaps in the install namespace.
	ServiceAccount string
	// PodLabels are added to the dump pods (tests use them to make the
	// simulated kubelet fail a pod).
	PodLabels map[string]string
	// Placement adds a node selector and tolerations to the dump pods, on
	// top of the configuration's Infra placement and the control-plane
	// tolerations every dump pod has; its affinity, when set, replaces the
	// dump pods' (by default a preference for control-plane nodes).
	Placement *identity.NodePlacement
	// PodEnv is added to the dump container's environment (after the
	// configuration's variable), e.g. KUBERNETES_SERVICE_HOST/PORT where
	// the kubernetes Service is not reachable from pods.
	PodEnv []corev1.EnvVar
	// ImageEnv, when set, names an environment variable of the dump
	// container that holds the container's own image reference
	// (KubeVirt's virt-operator refuses to start without
	// VIRT_OPERATOR_IMAGE, which its own dump Job sets).
	ImageEnv string
	// ClusterRules are granted to the dump service account cluster-wide
	// (a ClusterRole and a ClusterRoleBinding named after the account and
	// the namespace), for dump images that read cluster-scoped objects:
	// KubeVirt's dump reads Namespaces (and ServiceAccounts in them) to
	// find the monitoring namespace. nil grants nothing beyond the Role.
	ClusterRules []rbacv1.PolicyRule
	// Foreign says that the dump images are not this project's operator
	// (KubeVirt's virt-operator): their pods report no digest, so the
	// result of a believed, succeeded Job whose pod reported none is bound
	// to the Job's run instead (see adoptForeign). Without it such a Job
	// ends NoResult. Their containers get the configuration in KubeVirt's
	// JSON form (identity.Config.KubeVirtJSON), the one virt-operator's
	// dump mode reads.
	Foreign bool
	// ImagePullPolicy of the dump container; "" means IfNotPresent.
	ImagePullPolicy corev1.PullPolicy
	// BackoffLimit is how often one Job retries its pod; 0 means never:
	// the loader retries with its own backoff, so every failure is seen.
	BackoffLimit int32
	// ActiveDeadline bounds a Job's run; 0 means DefaultActiveDeadline.
	ActiveDeadline time.Duration
	// JobTTL deletes finished Jobs the loader did not clean up; 0 means
	// DefaultJobTTL.
	JobTTL time.Duration
	// StartTimeout is how long a Job's pod may stay unscheduled or
	// waiting before the loader gives up on the Job; 0 means
	// DefaultStartTimeout.
	StartTimeout time.Duration
	// InitialBackoff is the wait after the first failure, doubled after
	// each further one up to MaxBackoff; 0 means DefaultInitialBackoff
	// and defaultMaxBackoff.
	InitialBackoff, MaxBackoff time.Duration
	// PollInterval is the RequeueAfter of a pending result; 0 means
	// DefaultPollInterval.
	PollInterval time.Duration
	// LogLines of a failed pod are fetched for the error; 0 means
	// defaultLogLines, negative fetches none.
	LogLines int64
	// CacheSize is how many identifiers' strategies are cached; 0 means
	// defaultCacheSize.
	CacheSize int
}

// Request asks for the strategy of one configuration.
type Request struct {
	// Config is the target configuration; its Namespace is the install
	// namespace, where the strategy and the dump Job live.
	Config *identity.Config
	// Algorithm computes the identifier; nil means identity.Native.
	Algorithm identity.Algorithm
	// Image is the target version's operator image, run by the dump Job.
	Image string
	// ImagePullSecrets name Secrets of the install namespace that the dump
	// Job's pod pulls Image with.
	ImagePullSecrets []string
	// Generation of the custom resource asking. A customised strategy is
	// cached per generation: a new generation applies Customize again to a
	// fresh copy.
	Generation int64
	// Customize, when set, changes the loaded strategy (e.g. patches from
	// the custom resource) before it is returned. It may change anything
	// but the bulky fields in place (see Result.Strategy).
	Customize func(s *strategy.Strategy) error
}

// Source says where a strategy came from.
type Source string

// Sources of a strategy.
const (
	SourceCache Source = "cache"
	SourceStore Source = "store"
)

// Result is the outcome of Load: a strategy, or, while the dump Job runs,
// none and when to ask again.
type Result struct {
	// Strategy is a copy the caller may change, except the kinds' bulky
	// fields (kinds.Info.Bulky: a CRD's version schemas) in place: those
	// are shared with the loader's cache, as strategy.Parse shares them,
	// and are changed by replacing them. nil while pending.
	Strategy *strategy.Strategy
	// Digest is the "sha256:" digest of the manifests text the strategy
	// was read from (before Request.Customize); "" while pending.
	Digest string
	Source Source
	// Job is "namespace/name" of the dump Job while pending.
	Job string
	// RequeueAfter says when to call Load again while pending.
	RequeueAfter time.Duration
}

// Pending reports whether the strategy is still being dumped.
func (r *Result) Pending() bool { return r.Strategy == nil }

// Loader loads strategies. It is safe for concurrent use.
type Loader struct {
	opts Options

	mu    sync.Mutex
	tick  uint64
	cache map[string]*cached
	state map[string]*attempts
}

type cached struct {
	base *strategy.Strategy
	// digest is that of the text base was read from.
	digest     string
	used       uint64
	generation int64
	custom     *strategy.Strategy
}

// attempts is what the loader remembers about the dump Jobs of one
// identifier.
type attempts struct {
	failures int
	retryAt  time.Time
	lastErr  *JobError
	// job is the Job being watched and when the loader first saw it.
	job       types.UID
	firstSeen time.Time
	// created is the UID of the Job this loader created, as the API
	// server returned it (defaulted): createdJob.
	created    types.UID
	createdJob *batchv1.Job
	// expected is the generated Job as the API server defaults it (a dry
	// run), for the Job spec whose JSON is expectedKey.
	expected    *batchv1.Job
	expectedKey string
}

// New returns a loader.
func New(opts Options) (*Loader, error) {
	if opts.Store == nil || opts.Kube == nil {
		return nil, errors.New("loader: Options.Store and Options.Kube are required")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&opts.ActiveDeadline, DefaultActiveDeadline)
	def(&opts.JobTTL, DefaultJobTTL)
	def(&opts.StartTimeout, DefaultStartTimeout)
	def(&opts.InitialBackoff, DefaultInitialBackoff)
	def(&opts.MaxBackoff, defaultMaxBackoff)
	def(&opts.PollInterval, DefaultPollInterval)
	if opts.ServiceAccount == "" {
		opts.ServiceAccount = DefaultServiceAccount
	}
	if opts.ImagePullPolicy == "" {
		opts.ImagePullPolicy = corev1.PullIfNotPresent
	}
	if opts.LogLines == 0 {
		opts.LogLines = defaultLogLines
	}
	if opts.CacheSize <= 0 {
		opts.CacheSize = defaultCacheSize
	}
	return &Loader{opts: opts, cache: map[string]*cached{}, state: map[string]*attempts{}}, nil
}

// Load returns the strategy for a request: from the cache, else from the
// store, else it starts (or watches) the dump Job and returns a pending
// Result. A Job that failed, succeeded without publishing, or never
// started is a *JobError; until its backoff has passed, Load returns that
// same error without starting another Job. A stored strategy that cannot
// be trusted is a *store.CorruptError, and no Job is started for it.
func (l *Loader) Load(ctx context.Context, req Request) (*Result, error) {
	if req.Config == nil || req.Config.Namespace == "" {
		return nil, errors.New("load strategy: the configuration has no namespace")
	}
	id, err := req.Config.Identity(req.Algorithm)
	if err != nil {
		return nil, fmt.Errorf("load strategy: %w", err)
	}
	if s, digest, ok, err := l.fromCache(id.Identifier, req); ok {
		if err != nil {
			return nil, err
		}
		return &Result{Strategy: s, Digest: digest, Source: SourceCache}, nil
	}
	ns := req.Config.Namespace
	loaded, err := l.opts.Store.Load(ctx, ns, id)
	switch {
	case err == nil:
		return l.found(ctx, req, id, loaded)
	case !errors.Is(err, store.ErrNotFound):
		return nil, fmt.Errorf("load strategy %s: %w", id.Identifier, err)
	}
	if req.Image == "" {
		return nil, fmt.Errorf("load strategy %s: not stored in %s, and no operator image given to dump it", id.Identifier, ns)
	}
	return l.dump(ctx, req, id)
}

// found caches a strategy read from the store, forgets past failures and
// deletes the dump Job that published it, if any.
func (l *Loader) found(ctx context.Context, req Request, id strategy.Identity, loaded *store.Loaded) (*Result, error) {
	s := loaded.Strategy
	s.Identity = id
	l.mu.Lock()
	delete(l.state, id.Identifier)
	l.tick++
	l.cache[id.Identifier] = &cached{base: s, digest: loaded.Digest, used: l.tick}
	l.evict()
	l.mu.Unlock()
	if err := l.deleteJob(ctx, req.Config.Namespace, jobName(id.Identifier)); err != nil {
		return nil, err
	}
	out, digest, _, err := l.fromCache(id.Identifier, req)
	if err != nil {
		return nil, err
	}
	return &Result{Strategy: out, Digest: digest, Source: SourceStore}, nil
}

// fromCache returns a copy of the cached strategy, customised for the
// request's generation, and the digest of its text.
func (l *Loader) fromCache(key string, req Request) (*strategy.Strategy, string, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.cache[key]
	if !ok {
		return nil, "", false, nil
	}
	l.tick++
	c.used = l.tick
	if req.Customize == nil {
		return clone(c.base), c.digest, true, nil
	}
	if c.custom == nil || c.generation != req.Generation {
		fresh := clone(c.base)
		if err := req.Customize(fresh); err != nil {
			return nil, "", true, fmt.Errorf("customise strategy %s: %w", key, err)
		}
		c.custom, c.generation = fresh, req.Generation
	}
	return clone(c.custom), c.digest, true, nil
}

// evict drops the least recently used entries beyond CacheSize.
func (l *Loader) evict() {
	for len(l.cache) > l.opts.CacheSize {
		var oldest string
		for k, c := range l.cache {
			if oldest == "" || c.used < l.cache[oldest].used {
				oldest = k
			}
		}
		delete(l.cache, oldest)
	}
}

// clone copies s for a caller, except the kinds' bulky fields (a CRD's
// version schemas, most of a KubeVirt strategy), which stay the values
// Parse shared: a deep copy expanded KubeVirt's 1.7 MB of parsed schemas
// to about 6 MB at every reconcile, and the informer cache's Share had to
// compare each copy with the last one in full.
func clone(s *strategy.Strategy) *strategy.Strategy {
	out := &strategy.Strategy{Identity: s.Identity, Objects: make([]*unstructured.Unstructured, len(s.Objects))}
	for i, o := range s.Objects {
		info, _ := kinds.Lookup(o.GroupVersionKind().GroupKind())
		out.Objects[i] = &unstructured.Unstructured{Object: info.CopySharingBulky(o.Object)}
	}
	return out
}

// FailureReason classifies a dump Job failure.
type FailureReason string

// Failure reasons of a *JobError.
const (
	// ReasonFailed: the Job failed (its pod exited non-zero, or it ran past
	// its deadline).
	ReasonFailed FailureReason = "JobFailed"
	// ReasonNoResult: the Job succeeded but no matching strategy was
	// stored.
	ReasonNoResult FailureReason = "NoResult"
	// ReasonNotStarted: the Job's pod was not running within the start
	// timeout (unschedulable, image not pulled, pod not created).
	ReasonNotStarted FailureReason = "NotStarted"
	// ReasonUntrusted: the loader's own Job was changed after it created
	// it (its spec is no longer the one the loader generated).
	ReasonUntrusted FailureReason = "Untrusted"
)

// JobError says why a dump Job did not produce a strategy, and when the
// loader will try again.
type JobError struct {
	// Job is "namespace/name" of the Job (already deleted).
	Job        string
	Identifier string
	Reason     FailureReason
	// Message describes what the Job and its pod reported.
	Message string
	// Pod names the pod the message is about, "" when there was none.
	Pod string
	// Logs are the pod's last log lines, nil when unavailable.
	Logs []string
	// Attempt counts the consecutive failures for the identifier.
	Attempt int
	// RetryAt is when Load will start the next Job.
	RetryAt time.Time
}

func (e *JobError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "dump job %s for %s: %s: %s", e.Job, e.Identifier, e.Reason, e.Message)
	if len(e.Logs) > 0 {
		fmt.Fprintf(&b, "; last log lines: %s", strings.Join(e.Logs, " | "))
	}
	fmt.Fprintf(&b, " (attempt %d, next at %s)", e.Attempt, e.RetryAt.UTC().Format(time.RFC3339))
	return b.String()
}
