package controller

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	k8schain "github.com/google/go-containerregistry/pkg/authn/kubernetes"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/installstrategy/installstrategy/api/v1alpha1"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/strategy"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// DefaultOCIInterval is how often an OCI source's tag is resolved again
// unless the Installation says otherwise.
const DefaultOCIInterval = 5 * time.Minute

// ociArtifacts caches pulled artifacts by digest (a digest's content never
// changes, so a resync whose tag still resolves to it downloads nothing)
// and registry clients by their credentials (so connections and tokens
// are reused from poll to poll).
type ociArtifacts struct {
	mu        sync.Mutex
	artifacts map[string]*pulled // by REPOSITORY@DIGEST
	clients   map[string]*oci.Client
}

// pulled is an artifact and the signatures read with it.
type pulled struct {
	a    *oci.Artifact
	sigs []oci.Signature
	// trusted is set once a signature verified: the signatures are then
	// not read again (only re-verified against the current keys). Several
	// Installations may judge one artifact at once.
	trusted atomic.Bool
}

// maxCachedArtifacts bounds the cache; past it the cache starts again
// (each Installation needs only its current artifact).
const maxCachedArtifacts = 64

func (c *ociArtifacts) get(ref string) *pulled {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.artifacts[ref]
}

func (c *ociArtifacts) put(ref string, p *pulled) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.artifacts == nil || len(c.artifacts) >= maxCachedArtifacts {
		c.artifacts = map[string]*pulled{}
	}
	c.artifacts[ref] = p
}

// client returns the registry client of the source's credentials: the
// pull Secret's content (by namespace, name and resourceVersion) or
// anonymous.
func (r *Reconciler) ociClient(ctx context.Context, namespace string, src *v1alpha1.OCIStrategySource) (*oci.Client, error) {
	key := fmt.Sprintf("anonymous insecure=%t", src.Insecure)
	var keychain authn.Keychain
	if src.SecretRef != nil && src.SecretRef.Name != "" {
		sec, err := r.kube.CoreV1().Secrets(namespace).Get(ctx, src.SecretRef.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("oci source %s: pull secret %s/%s: %w", src.Reference, namespace, src.SecretRef.Name, err)
		}
		key = fmt.Sprintf("%s/%s@%s insecure=%t", namespace, sec.Name, sec.ResourceVersion, src.Insecure)
		r.oci.mu.Lock()
		c := r.oci.clients[key]
		r.oci.mu.Unlock()
		if c != nil {
			return c, nil
		}
		if keychain, err = k8schain.NewFromPullSecrets(ctx, []corev1.Secret{*sec}); err != nil {
			return nil, fmt.Errorf("oci source %s: pull secret %s/%s: %w", src.Reference, namespace, sec.Name, err)
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
	if r.oci.clients == nil || len(r.oci.clients) >= maxCachedArtifacts {
		r.oci.clients = map[string]*oci.Client{}
	}
	r.oci.clients[key] = c
	return c, nil
}

// productOf is the product an OCI source expects: spec's, else the last
// path element of the reference's repository.
func productOf(src *v1alpha1.OCIStrategySource) string {
	if src.Product != "" {
		return src.Product
	}
	repo := strings.TrimPrefix(src.Reference, oci.Scheme)
	if i := strings.IndexByte(repo, '@'); i >= 0 {
		repo = repo[:i]
	}
	if i := strings.LastIndexByte(repo, ':'); i > strings.LastIndexByte(repo, '/') {
		repo = repo[:i]
	}
	return path.Base(repo)
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

// ociLoaded is a strategy pulled from an OCI source and trusted.
type ociLoaded struct {
	strategy *strategy.Strategy
	// ref is REPOSITORY@DIGEST of the artifact; digest its text's.
	ref, digest string
	// verifiedBy says why it was trusted.
	verifiedBy string
	// fresh is set when the artifact was downloaded by this load (not
	// served from the cache).
	fresh bool
	meta  oci.Meta
}

// loadOCI resolves, pulls (unless cached) and judges the Installation's OCI
// source: the reference first, then each mirror while the registry cannot
// be reached. Nothing is returned of an artifact that fails a check; an
// untrusted one is a *trust.UntrustedError.
func (r *Reconciler) loadOCI(ctx context.Context, in *v1alpha1.Installation) (*ociLoaded, error) {
	src := in.Spec.Strategy.OCI
	c, err := r.ociClient(ctx, in.Namespace, src)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, ref := range append([]string{src.Reference}, src.Mirrors...) {
		p, fresh, err := r.pullOCI(ctx, c, ref, src.Digest)
		if err != nil {
			if src.Digest != "" {
				err = fmt.Errorf("oci source %s (pinned %s): %w", ref, src.Digest, err)
			}
			errs = append(errs, err)
			var untrusted *trust.UntrustedError
			if errors.As(err, &untrusted) || errors.Is(err, oci.ErrNotStrategy) || errors.Is(err, codec.ErrDigestMismatch) {
				// What the registry serves is wrong: a mirror of the same
				// tag is no fallback for that.
				return nil, errors.Join(errs...)
			}
			continue
		}
		l, err := r.judgeOCI(ctx, in, p)
		if err != nil {
			return nil, fmt.Errorf("oci source %s: %w", ref, err)
		}
		l.fresh = fresh
		return l, nil
	}
	return nil, errors.Join(errs...)
}

// pullOCI returns the artifact ref names (by the pinned digest when one is
// set), from the cache when its digest was pulled before.
func (r *Reconciler) pullOCI(ctx context.Context, c *oci.Client, ref, pinned string) (*pulled, bool, error) {
	digest := pinned
	if digest == "" {
		d, err := c.Resolve(ctx, ref)
		if err != nil {
			return nil, false, err
		}
		digest = d
	}
	byDigest := pinnedRef(ref, digest)
	if p := r.oci.get(byDigest); p != nil {
		if !p.trusted.Load() && pinned == "" {
			// Not signed (by a trusted key) when it was pulled: the
			// signature may have been pushed since.
			sigs, err := c.Signatures(ctx, p.a)
			if err != nil {
				return nil, false, err
			}
			p = &pulled{a: p.a, sigs: sigs}
			r.oci.put(byDigest, p)
		}
		return p, false, nil
	}
	a, err := c.Pull(ctx, byDigest)
	if err != nil {
		return nil, false, err
	}
	p := &pulled{a: a}
	if pinned == "" {
		if p.sigs, err = c.Signatures(ctx, a); err != nil {
			return nil, false, err
		}
	}
	r.oci.put(byDigest, p)
	return p, true, nil
}

// judgeOCI applies the trust policy to a pulled artifact and parses it: a
// pinned digest is the Installation author's choice; otherwise a
// signature by the operator's key or a trusted key must bind the
// artifact's digest to the expected product, to spec.version when set,
// and to a version no older than the deployed one (unless
// spec.allowDowngrade).
func (r *Reconciler) judgeOCI(ctx context.Context, in *v1alpha1.Installation, p *pulled) (*ociLoaded, error) {
	src := in.Spec.Strategy.OCI
	a := p.a
	verifiedBy := "pinned digest"
	if src.Digest == "" {
		ring, err := r.trustedKeys(ctx)
		if err != nil {
			return nil, err
		}
		verified, err := oci.Verify(p.sigs, a.Digest, ring)
		if err != nil {
			return nil, &trust.UntrustedError{Err: err}
		}
		v, err := oci.Check(a, verified, trust.Expect{Product: productOf(src), Version: in.Spec.Version,
			Digest: codec.Digest(a.Text), Deployed: in.Status.ObservedVersion, AllowDowngrade: in.Spec.AllowDowngrade})
		if err != nil {
			return nil, err
		}
		p.trusted.Store(true)
		verifiedBy = "signed by " + v.Key
	}
	st, _, err := strategy.Parse(a.Text, strategy.ParseOptions{})
	if err != nil {
		return nil, fmt.Errorf("artifact %s: manifests: %w", a.Reference, err)
	}
	st.Identity = strategy.Identity{Version: a.Meta.Version, Registry: a.Meta.Registry, Identifier: a.Meta.Identifier}
	return &ociLoaded{strategy: st, ref: a.Reference, digest: codec.Digest(a.Text), verifiedBy: verifiedBy, meta: a.Meta}, nil
}

// trustedKeys is the key ring strategies from outside the operator are
// judged by: the operator's keys and those of the trusted keys ConfigMap
// (read on every load, so a key added or removed there counts at the next
// poll).
func (r *Reconciler) trustedKeys(ctx context.Context) (*trust.KeyRing, error) {
	k, err := r.operatorKey(ctx)
	if err != nil {
		return nil, err
	}
	ring := &trust.KeyRing{}
	ring.Merge(k.Keys)
	extra, err := trust.TrustedKeys(ctx, r.kube, r.opts.KeyNamespace)
	if err != nil {
		return nil, err
	}
	ring.Merge(extra)
	return ring, nil
}

// pollInterval is how soon an Installation is reconciled again when
// nothing else happens: the resync period, or its OCI source's interval
// when shorter.
func (r *Reconciler) pollInterval(in *v1alpha1.Installation) time.Duration {
	d := r.resync()
	if in.Spec.StrategySourceType() != v1alpha1.StrategySourceOCI {
		return d
	}
	iv := DefaultOCIInterval
	if i := in.Spec.Strategy.OCI.Interval; i != nil && i.Duration > 0 {
		iv = i.Duration
	}
	return min(d, iv)
}
