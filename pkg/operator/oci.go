package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	k8schain "github.com/google/go-containerregistry/pkg/authn/kubernetes"
	"golang.org/x/sync/singleflight"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/source"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// DefaultOCIInterval is how often an OCI source's tag is resolved again
// unless the Installation says otherwise.
const DefaultOCIInterval = 5 * time.Minute

// ociArtifacts caches pulled artifacts by digest (a digest's content never
// changes, so a resync whose tag still resolves to it downloads nothing)
// and registry clients by their credentials (so connections and tokens
// are reused from poll to poll). Only artifacts whose trust was decided
// (a pinned digest, or a signature by a trusted key that the judgement
// accepted) are cached, and the cache is bounded in bytes
// (MaxCachedArtifactBytes): an untrusted artifact costs its pull and is
// dropped.
type ociArtifacts struct {
	mu        sync.Mutex
	artifacts map[string]*pulled // by REPOSITORY@DIGEST
	// order lists the cached keys, oldest first; bytes is their size.
	order   []string
	bytes   int64
	clients map[string]*oci.Client
	// flight shares one pull of a digest between the reconciles that want
	// it at once.
	flight singleflight.Group
}

// pulled is an artifact and the signatures read with it.
type pulled struct {
	a    *oci.Artifact
	sigs []oci.Signature
	// trusted is set once a signature verified: the signatures are then
	// not read again (only re-verified against the current keys), until
	// a judgement refuses them (a trusted key's signature for another
	// product or version), so that one pushed since is read at the next
	// poll. Several Installations may judge one artifact at once.
	trusted atomic.Bool
}

// MaxCachedArtifactBytes bounds the bytes of the trusted artifacts the
// operator keeps (each Installation needs only its current one); the
// oldest go first.
const MaxCachedArtifactBytes = 128 << 20

// maxClients bounds the registry clients kept.
const maxClients = 64

// size is what an artifact costs the cache: its text (a chart's archive).
func (p *pulled) size() int64 { return int64(len(p.a.Text)) }

func (c *ociArtifacts) get(ref string) *pulled {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.artifacts[ref]
}

// keep caches a trusted artifact under ref, dropping the oldest ones
// while the cache would exceed MaxCachedArtifactBytes; one larger than
// that alone is not cached.
func (c *ociArtifacts) keep(ref string, p *pulled) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.artifacts[ref]; ok {
		c.artifacts[ref] = p
		c.bytes += p.size() - old.size()
		return
	}
	if p.size() > MaxCachedArtifactBytes {
		return
	}
	if c.artifacts == nil {
		c.artifacts = map[string]*pulled{}
	}
	for c.bytes+p.size() > MaxCachedArtifactBytes && len(c.order) > 0 {
		oldest := c.order[0]
		c.order = c.order[1:]
		c.bytes -= c.artifacts[oldest].size()
		delete(c.artifacts, oldest)
	}
	c.artifacts[ref] = p
	c.order = append(c.order, ref)
	c.bytes += p.size()
}

// cached reports the number and bytes of the cached artifacts.
func (c *ociArtifacts) cached() (int, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.artifacts), c.bytes
}

// remoteSource is what an OCI or a Helm source says of where its artifact
// is and how to read it; both share the registry clients, the cache, the
// pull and the signature read.
type remoteSource struct {
	// what names the source in errors ("oci source", "helm source").
	what string
	// refs are the reference, then its mirrors.
	refs []string
	// Digest pins the artifact; empty means a signature must bind it.
	Digest    string
	SecretRef *corev1.LocalObjectReference
	Insecure  bool
	// Reference is refs[0].
	Reference string
	// verify names the source's own keys (nil: the trusted keys).
	verify *v1alpha1.VerifySource
	// kind keys the cache ("strategy" or "chart"), and pull reads one
	// artifact of the kind at a reference.
	kind string
	pull func(ctx context.Context, c *oci.Client, ref string) (*oci.Artifact, error)
}

// ociRemote is the remote source of an OCI strategy source.
func ociRemote(src *v1alpha1.OCIStrategySource) remoteSource {
	return remoteSource{what: "oci source", refs: append([]string{src.Reference}, src.Mirrors...), Reference: src.Reference,
		Digest: src.Digest, SecretRef: src.SecretRef, Insecure: src.Insecure, kind: "strategy", verify: src.Verify,
		pull: func(ctx context.Context, c *oci.Client, ref string) (*oci.Artifact, error) { return c.Pull(ctx, ref) }}
}

// client returns the registry client of the source's credentials: the
// pull Secret's content (by namespace, name and resourceVersion) or
// anonymous.
func (r *Reconciler) ociClient(ctx context.Context, namespace string, src remoteSource) (*oci.Client, error) {
	key := fmt.Sprintf("anonymous insecure=%t", src.Insecure)
	var keychain authn.Keychain
	if src.SecretRef != nil && src.SecretRef.Name != "" {
		sec, err := r.kube.CoreV1().Secrets(namespace).Get(ctx, src.SecretRef.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("%s %s: pull secret %s/%s: %w", src.what, src.Reference, namespace, src.SecretRef.Name, err)
		}
		key = fmt.Sprintf("%s/%s@%s insecure=%t", namespace, sec.Name, sec.ResourceVersion, src.Insecure)
		r.oci.mu.Lock()
		c := r.oci.clients[key]
		r.oci.mu.Unlock()
		if c != nil {
			return c, nil
		}
		if keychain, err = k8schain.NewFromPullSecrets(ctx, []corev1.Secret{*sec}); err != nil {
			return nil, fmt.Errorf("%s %s: pull secret %s/%s: %w", src.what, src.Reference, namespace, sec.Name, err)
		}
	}
	r.oci.mu.Lock()
	defer r.oci.mu.Unlock()
	if c := r.oci.clients[key]; c != nil {
		return c, nil
	}
	c, err := oci.New(oci.Options{Keychain: keychain, Insecure: src.Insecure, UserAgent: "installstrategy-operator"})
	if err != nil {
		return nil, err
	}
	if r.oci.clients == nil || len(r.oci.clients) >= maxClients {
		r.oci.clients = map[string]*oci.Client{}
	}
	r.oci.clients[key] = c
	return c, nil
}

// productOf is the product an OCI source expects: spec's, else the
// repository's last path element (oci.DefaultProduct).
func productOf(product, reference string, c *oci.Client) string {
	if product != "" {
		return product
	}
	r, err := c.Parse(reference)
	if err != nil {
		return "" // the pull named the reference's error already
	}
	return oci.DefaultProduct(r)
}

// pinnedRef is the reference with its tag replaced by digest.
func pinnedRef(ref, digest string) string {
	repo := ref
	if i := strings.IndexByte(repo, '@'); i >= 0 {
		repo = repo[:i]
	} else if i := strings.LastIndexByte(repo, ':'); i > strings.LastIndexByte(repo, '/') {
		repo = repo[:i]
	}
	return repo + "@" + digest
}

// remoteFetch is what the pull of a remote source leaves for after its
// judgement: the artifact, whether this load downloaded it, and the
// reference (or mirror) it came from.
type remoteFetch struct {
	p     *pulled
	fresh bool
	ref   string
}

// remote is an OCI or a Helm source as pkg/source judges it: its pull
// (the operator's registry clients, cache, mirrors and shared pulls) and
// what its artifact must be. A pinned digest is the Installation author's
// choice; otherwise a signature by a trusted key (sourceKeys) must bind
// the artifact's digest to the expected product (spec's, else the
// repository's last path element), to spec.version when set, and to a
// version no older than the deployed one (unless spec.allowDowngrade).
func (r *Reconciler) remote(ctx context.Context, in *v1alpha1.Installation, src remoteSource, product string) (source.Remote, *remoteFetch, error) {
	c, err := r.ociClient(ctx, in.Namespace, src)
	if err != nil {
		return source.Remote{}, nil, err
	}
	ring, err := r.sourceKeys(ctx, src.verify)
	if err != nil {
		return source.Remote{}, nil, err
	}
	f := &remoteFetch{}
	pull := func(ctx context.Context) (*oci.Artifact, []oci.Signature, error) {
		p, fresh, ref, err := r.fetchRemote(ctx, c, ring, src)
		if err != nil {
			return nil, nil, err
		}
		f.p, f.fresh, f.ref = p, fresh, ref
		return p.a, p.sigs, nil
	}
	expect := trust.Expect{Product: productOf(product, src.Reference, c), Version: in.Spec.Version,
		Deployed: in.Status.ObservedVersion, AllowDowngrade: in.Spec.AllowDowngrade}
	return source.Remote{Pull: pull, Pinned: src.Digest != "", Keys: ring, Expect: expect}, f, nil
}

// wrap names the source and the reference in an error of a load that
// pulled; a refused artifact's signatures are read again next time (a
// trusted key's signature for another product or version may be
// replaced by the right one).
func (f *remoteFetch) wrap(what string, err error) error {
	if f.p == nil {
		return err // the pull's own, which names the reference
	}
	if errors.As(err, new(*trust.UntrustedError)) {
		f.p.trusted.Store(false)
	}
	return fmt.Errorf("%s %s: %w", what, f.ref, err)
}

// ociSource is the Installation's OCI source: resolved, pulled (unless
// cached) and judged; a trusted artifact is cached, nothing is kept of
// one that fails a check, and an untrusted one is a
// *trust.UntrustedError.
func (r *Reconciler) ociSource(ctx context.Context, in *v1alpha1.Installation) (sourceLoad, error) {
	src := in.Spec.Strategy.OCI
	sl := sourceLoad{label: "oci", untrusted: true}
	rem, f, err := r.remote(ctx, in, ociRemote(src), src.Product)
	if err != nil {
		return sl, err
	}
	rem.Trusted = func(*oci.Artifact) { r.keepTrusted(ociRemote(src), f.ref, f.p) }
	sl.Source = source.OCI{Remote: rem}
	sl.wrap = func(err error) error { return f.wrap("oci source", err) }
	sl.record = func(l *source.Loaded, st *v1alpha1.StrategyStatus) {
		a := l.Artifact
		st.OCI, st.VerifiedBy = a.Reference, l.VerifiedBy
		if l.Statement != nil {
			st.Product = ptr.To(l.Statement.Product)
		}
		if f.fresh {
			r.event(in, corev1.EventTypeNormal, v1alpha1.ReasonStrategyPulled, "Load", "%s",
				fmt.Sprintf("pulled %s (%s %s), %s", a.Reference, a.Meta.Product, a.Meta.Version, l.VerifiedBy))
		}
	}
	return sl, nil
}

// fetchRemote resolves and pulls (unless cached) the source's artifact,
// with its signatures when its digest is not pinned: the reference first,
// then each mirror while the registry cannot be reached. It returns
// whether this call downloaded it, and the reference it came from.
func (r *Reconciler) fetchRemote(ctx context.Context, c *oci.Client, ring *trust.KeyRing, src remoteSource) (p *pulled, fresh bool, from string, err error) {
	var errs []error
	for _, ref := range src.refs {
		p, fresh, err := r.pullOCI(ctx, c, ring, src, ref)
		if err != nil {
			if src.Digest != "" {
				err = fmt.Errorf("%s %s (pinned %s): %w", src.what, ref, src.Digest, err)
			}
			errs = append(errs, err)
			var untrusted *trust.UntrustedError
			if errors.As(err, &untrusted) || errors.Is(err, oci.ErrNotStrategy) || errors.Is(err, oci.ErrNotChart) || errors.Is(err, codec.ErrDigestMismatch) {
				// What the registry serves is wrong: a mirror of the same
				// tag is no fallback for that.
				return nil, false, "", errors.Join(errs...)
			}
			continue
		}
		return p, fresh, ref, nil
	}
	return nil, false, "", errors.Join(errs...)
}

// pullOCI returns the artifact ref names (by the pinned digest when one is
// set), from the cache when its digest was pulled before. Reconciles that
// want one digest at once share one pull (and one signature read); only
// the one that pulled reports fresh.
func (r *Reconciler) pullOCI(ctx context.Context, c *oci.Client, ring *trust.KeyRing, src remoteSource, ref string) (*pulled, bool, error) {
	pinned := src.Digest
	digest := pinned
	if pinned != "" && !strings.Contains(ref, "@") {
		// A pinned tag is still resolved: a tag moved elsewhere is
		// refused (the pin and the tag no longer name one artifact). A
		// tag that cannot be resolved is no reason to refuse the pin.
		if d, err := c.Resolve(ctx, ref); err == nil && d != pinned {
			return nil, false, &trust.UntrustedError{Err: fmt.Errorf("%s: the tag now resolves to %s, not the pinned digest %s", ref, d, pinned)}
		}
	}
	if digest == "" {
		d, err := c.Resolve(ctx, ref)
		if err != nil {
			return nil, false, err
		}
		digest = d
	}
	byDigest := src.kind + " " + pinnedRef(ref, digest)
	if p := r.oci.get(byDigest); p != nil && (pinned != "" || p.trusted.Load()) {
		return p, false, nil
	}
	fresh := false
	key := byDigest
	if pinned != "" {
		key += " pinned" // loaded without its signatures
	}
	v, err, _ := r.oci.flight.Do(key, func() (any, error) {
		p := r.oci.get(byDigest)
		if p != nil && (pinned != "" || p.trusted.Load()) {
			return p, nil
		}
		if p == nil {
			a, err := src.pull(ctx, c, pinnedRef(ref, digest))
			if err != nil {
				return nil, err
			}
			p, fresh = &pulled{a: a}, true
		} else {
			// Not signed (by a trusted key) when it was pulled: the
			// signature may have been pushed since.
			p = &pulled{a: p.a}
		}
		if pinned == "" {
			sigs, err := c.Signatures(ctx, p.a)
			if err != nil {
				return nil, err
			}
			p.sigs = sigs
			if _, err := oci.Verify(sigs, p.a.Digest, ring); err == nil {
				p.trusted.Store(true)
			}
		}
		return p, nil // cached once judged trusted (keepTrusted)
	})
	if err != nil {
		return nil, false, err
	}
	return v.(*pulled), fresh, nil
}

// keepTrusted caches an artifact whose trust was decided (judged
// trusted) under the digest it was pulled by.
func (r *Reconciler) keepTrusted(src remoteSource, ref string, p *pulled) {
	r.oci.keep(src.kind+" "+pinnedRef(ref, p.a.Digest), p)
}

// trustedKeysConfigMap reads the trusted keys from the key namespace's
// watched cache (keyWatches), not the API server: a load, every poll of an
// OCI source included, costs no request for them.
func (r *Reconciler) trustedKeysConfigMap(ctx context.Context) (*trust.KeyRing, error) {
	if r.keyCache == nil {
		return trust.TrustedKeys(ctx, r.kube, r.opts.KeyNamespace)
	}
	var cm corev1.ConfigMap
	err := r.keyCache.Get(ctx, client.ObjectKey{Namespace: r.opts.KeyNamespace, Name: trust.TrustedKeysConfigMap}, &cm)
	switch {
	case apierrors.IsNotFound(err):
		return trust.TrustedKeysOf(nil)
	case err != nil:
		return nil, fmt.Errorf("trusted keys configmap %s/%s: %w", r.opts.KeyNamespace, trust.TrustedKeysConfigMap, err)
	}
	return trust.TrustedKeysOf(&cm)
}

// pollInterval is how soon an Installation is reconciled again when
// nothing else happens: the resync period, or its OCI source's interval
// when shorter.
func (r *Reconciler) pollInterval(in *v1alpha1.Installation) time.Duration {
	d := r.resync()
	var i *metav1.Duration
	switch in.Spec.StrategySourceType() {
	case v1alpha1.StrategySourceOCI:
		i = in.Spec.Strategy.OCI.Interval
	case v1alpha1.StrategySourceHelm:
		i = in.Spec.Strategy.Helm.Interval
	default:
		return d
	}
	iv := DefaultOCIInterval
	if i != nil && i.Duration > 0 {
		iv = i.Duration
	}
	return min(d, iv)
}
