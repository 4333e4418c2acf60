package engine

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/certs"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// DefaultCASecret is the Secret that keeps the CA unless
// CertOptions.CASecret names another.
const DefaultCASecret = "installstrategy-ca"

// CertOptions tunes the certificates of empty kubernetes.io/tls Secrets.
// The zero value keeps a CA valid for a year in the Secret
// "installstrategy-ca", issues certificates valid for 90 days and rotates
// each when a fifth of its validity is left.
type CertOptions struct {
	// Disabled leaves empty TLS Secrets empty and injects no CA bundle.
	Disabled bool
	// CASecret names the Secret that keeps the CA, in the namespace of the
	// first empty TLS Secret; "" means "installstrategy-ca".
	CASecret string
	// CAValidity is the CA's lifetime; 0 means 365 days.
	CAValidity time.Duration
	// CertValidity is a certificate's lifetime; 0 means 90 days.
	CertValidity time.Duration
	// CARenewBefore rotates the CA when it expires within it (every
	// certificate is then reissued by the new CA); 0 means a fifth of
	// CAValidity.
	CARenewBefore time.Duration
	// CertRenewBefore rotates a serving certificate that expires within
	// it; 0 means a fifth of CertValidity.
	CertRenewBefore time.Duration
	// Now returns the current time; nil means time.Now (tests set it to
	// move through rotation).
	Now func() time.Time
}

// certState fills empty TLS Secrets of a strategy and injects the CA
// bundle into webhooks and APIServices of its Services.
type certState struct {
	r        *run
	opts     CertOptions
	readOnly bool
	ca       certs.Pair
	// names maps a TLS Secret (namespace/name) to its certificate's DNS
	// names.
	names map[string][]string
	// services holds the namespace/name of every Service of the strategy.
	services map[string]bool
	// servedBy maps a TLS Secret (namespace/name) to the strategy's
	// Services in front of the workloads that mount it.
	servedBy map[string][]*unstructured.Unstructured
	// previous is the CA certificate the current one replaced, kept in
	// the bundle until it expires (pods still serve certificates it
	// signed until they restart).
	previous []byte
	// rotated is set when this run replaced an existing CA: the new
	// bundle is published before any certificate it signs (publishBundle).
	rotated bool
	mu      sync.Mutex
	// pairs caches the certificate chosen for each TLS Secret
	// (namespace/name) in this run; workloads mounting it carry its hash.
	pairs map[string]certs.Pair
	// kept holds the TLS Secrets (namespace/name) whose certificate another
	// installer issued and that are kept (see keepAdopted), with the CA
	// that signed each (PEM); the bundle holds those CAs too.
	kept map[string][]byte
	// candidates holds the CA certificates (PEM) a kept certificate's
	// issuer is looked for in, read once (see issuers).
	candidates [][]byte
	read       bool
}

// previousCAKey is the key of the CA Secret that keeps the CA certificate
// the current one replaced, while it is still valid.
const previousCAKey = "previous-ca.crt"

func (o *CertOptions) defaults() {
	if o.CASecret == "" {
		o.CASecret = DefaultCASecret
	}
	if o.CAValidity == 0 {
		o.CAValidity = 365 * 24 * time.Hour
	}
	if o.CertValidity == 0 {
		o.CertValidity = 90 * 24 * time.Hour
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// renewBefore returns renew when set, else a fifth of validity.
func renewBefore(renew, validity time.Duration) time.Duration {
	if renew > 0 {
		return renew
	}
	return validity / 5
}

func isEmptyTLSSecret(o *unstructured.Unstructured) bool {
	if info, _ := kinds.Lookup(o.GroupVersionKind().GroupKind()); !info.HoldsCertificates || o.GetAPIVersion() != info.APIVersion() {
		return false
	}
	typ, _, _ := unstructured.NestedString(o.Object, "type")
	data, _, _ := unstructured.NestedMap(o.Object, "data")
	sd, _, _ := unstructured.NestedMap(o.Object, "stringData")
	return typ == string(corev1.SecretTypeTLS) && len(data) == 0 && len(sd) == 0
}

// newCertState finds the empty TLS Secrets and loads or creates the CA.
func newCertState(ctx context.Context, r *run, opts CertOptions, readOnly bool) (*certState, error) {
	opts.defaults()
	c := &certState{r: r, opts: opts, readOnly: readOnly, names: map[string][]string{}, services: map[string]bool{},
		servedBy: map[string][]*unstructured.Unstructured{}, pairs: map[string]certs.Pair{}, kept: map[string][]byte{}}
	if opts.Disabled {
		return c, nil
	}
	sc := scanCerts(r.s.Objects)
	for _, svc := range sc.services {
		c.services[svc.GetNamespace()+"/"+svc.GetName()] = true
	}
	if len(sc.secrets) == 0 {
		return c, nil
	}
	servedBy, err := servingServices(ctx, sc, r.livePods)
	if err != nil {
		return nil, err
	}
	for _, s := range sc.secrets {
		key := s.GetNamespace() + "/" + s.GetName()
		c.servedBy[key] = servedBy[key]
		c.names[key] = dnsNamesFor(s, c.servedBy[key])
	}
	secrets := sc.secrets
	ns := secrets[0].GetNamespace()
	if !readOnly && ns != r.opts.Owner.Namespace {
		// The CA Secret's namespace may be another than the owner's (an
		// Installation in one namespace installing KubeVirt into
		// "kubevirt"): it is made first, and recorded before the CA is
		// written into it.
		if err := r.ensureNamespace(ctx, ns); err != nil {
			return nil, err
		}
		if err := r.invs.Write(ctx, r.inv); err != nil {
			return nil, err
		}
	}
	ca, err := c.loadCA(ctx, ns)
	if err != nil {
		return nil, err
	}
	c.ca = ca
	return c, nil
}

// loadCA reads the CA Secret, and creates or rotates it when needed. The
// CA Secret is written without the applied-hash annotation, so prune never
// deletes it. A read-only run (a plan) keeps a new CA in memory only.
func (c *certState) loadCA(ctx context.Context, ns string) (certs.Pair, error) {
	now := c.opts.Now()
	secrets := c.r.kube.CoreV1().Secrets(ns)
	live, err := c.r.typedSecret(ctx, ns, c.opts.CASecret)
	if err != nil {
		return certs.Pair{}, fmt.Errorf("ca secret %s/%s: %w", ns, c.opts.CASecret, err)
	}
	exists := live != nil
	if exists {
		switch c.r.opts.Owner.ClaimOf(live.Labels) {
		case inventory.ClaimOurs:
		case inventory.ClaimLegacy, inventory.ClaimLegacyShared:
			// Written by an older installstrategy for this installation:
			// relabelled in place, the CA kept.
			if !c.readOnly {
				upd := live.DeepCopy()
				upd.Labels = c.r.opts.Owner.Labels()
				if _, err := secrets.Update(ctx, upd, metav1.UpdateOptions{FieldManager: c.r.opts.FieldManager}); err != nil {
					return certs.Pair{}, fmt.Errorf("relabel ca secret %s/%s: %w", ns, c.opts.CASecret, err)
				}
			}
		default:
			return certs.Pair{}, fmt.Errorf("ca secret %s/%s exists and is not installation %s's (managed-by %q, installation %q); not overwritten",
				ns, c.opts.CASecret, c.r.opts.Owner, live.Labels[metakeys.ManagedByLabel], inventory.OtherOwner(live.Labels))
		}
		p := certs.Pair{Cert: live.Data[certs.CertKey], Key: live.Data[certs.KeyKey]}
		// A serving certificate never outlives its CA, so a CA inside the
		// serving certificates' renew-before would have them reissued on
		// every run: the CA is renewed by the longer of the two.
		before := max(renewBefore(c.opts.CARenewBefore, c.opts.CAValidity), renewBefore(c.opts.CertRenewBefore, c.opts.CertValidity))
		if certs.Renewal(p, nil, nil, now, before) == "" {
			c.previous = stillValid(live.Data[previousCAKey], now)
			return p, nil
		}
		c.previous, c.rotated = stillValid(p.Cert, now), true
	}
	p, err := certs.NewCA("installstrategy-"+c.r.opts.Owner.Namespace+"-"+c.r.opts.Owner.Name+"-ca", now, c.opts.CAValidity)
	if err != nil || c.readOnly {
		return p, err
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: c.opts.CASecret, Namespace: ns, Labels: c.r.opts.Owner.Labels()},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{certs.CertKey: p.Cert, certs.KeyKey: p.Key},
	}
	if len(c.previous) > 0 {
		sec.Data[previousCAKey] = c.previous
	}
	if !exists {
		_, err = secrets.Create(ctx, sec, metav1.CreateOptions{FieldManager: c.r.opts.FieldManager})
	} else {
		sec.ResourceVersion = live.ResourceVersion
		_, err = secrets.Update(ctx, sec, metav1.UpdateOptions{FieldManager: c.r.opts.FieldManager})
	}
	if err != nil {
		return certs.Pair{}, fmt.Errorf("write ca secret %s/%s: %w", ns, c.opts.CASecret, err)
	}
	return p, nil
}

// desired returns the object to apply for a strategy object: an empty TLS
// Secret with its certificate (the live one while it is good), a webhook or
// APIService with the CA bundle, any other object as it is.
func (c *certState) desired(ctx context.Context, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if len(c.names) == 0 {
		return o, nil
	}
	if isEmptyTLSSecret(o) {
		return c.secret(ctx, o)
	}
	info, _ := kinds.Lookup(o.GroupVersionKind().GroupKind())
	if info.PodTemplate != nil {
		return c.workload(ctx, o, info.PodTemplate)
	}
	return c.inject(ctx, o, info)
}

func (c *certState) secret(ctx context.Context, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	p, err := c.pair(ctx, o.GetNamespace(), o.GetName())
	if err != nil {
		return nil, err
	}
	out := o.DeepCopy()
	ca := c.ca.Cert
	c.mu.Lock()
	issuer, kept := c.kept[o.GetNamespace()+"/"+o.GetName()]
	c.mu.Unlock()
	if kept {
		ca = issuer
		sum := sha256.Sum256(p.Cert)
		ann := out.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[metakeys.KeptCertificateAnnotation] = hex.EncodeToString(sum[:16])
		out.SetAnnotations(ann)
	}
	out.Object["data"] = map[string]any{
		certs.CertKey: base64.StdEncoding.EncodeToString(p.Cert),
		certs.KeyKey:  base64.StdEncoding.EncodeToString(p.Key),
		certs.CAKey:   base64.StdEncoding.EncodeToString(ca),
	}
	return out, nil
}

// workload returns a workload whose pod template mounts TLS Secrets the
// certificates fill with CertificateHashAnnotation on its pod template: a
// renewed certificate changes it, so the pods restart and serve the new
// one (nothing else would make them reload it). A workload that mounts
// only kept certificates (see keepAdopted) gets none.
func (c *certState) workload(ctx context.Context, o *unstructured.Unstructured, template []string) (*unstructured.Unstructured, error) {
	vols, _, _ := unstructured.NestedSlice(o.Object, append(slices.Clone(template), "spec", "volumes")...)
	var mounted []string
	for _, v := range vols {
		m, _ := v.(map[string]any)
		name, _, _ := unstructured.NestedString(m, "secret", "secretName")
		if _, ok := c.names[o.GetNamespace()+"/"+name]; ok && !slices.Contains(mounted, name) {
			mounted = append(mounted, name)
		}
	}
	// Each certificate is chosen first: whether it is kept is known only
	// then, and a plan prepares workloads concurrently with the Secrets.
	for _, name := range mounted {
		if _, err := c.pair(ctx, o.GetNamespace(), name); err != nil {
			return nil, fmt.Errorf("%s: %w", strategy.RefOf(o), err)
		}
	}
	c.mu.Lock()
	allKept := true
	for _, name := range mounted {
		if _, ok := c.kept[o.GetNamespace()+"/"+name]; !ok {
			allKept = false
		}
	}
	c.mu.Unlock()
	if len(mounted) == 0 || allKept {
		// Certificates kept from the installer the Secrets were adopted
		// from are what the pods serve already: nothing to restart for.
		return o, nil
	}
	slices.Sort(mounted)
	h := sha256.New()
	for _, name := range mounted {
		p, err := c.pair(ctx, o.GetNamespace(), name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", strategy.RefOf(o), err)
		}
		h.Write(p.Cert)
	}
	out := o.DeepCopy()
	path := append(slices.Clone(template), "metadata", "annotations")
	ann, _, _ := unstructured.NestedStringMap(out.Object, path...)
	if ann == nil {
		ann = map[string]string{}
	}
	ann[metakeys.CertificateHashAnnotation] = hex.EncodeToString(h.Sum(nil))[:16]
	if err := unstructured.SetNestedStringMap(out.Object, ann, path...); err != nil {
		return nil, fmt.Errorf("%s: %w", strategy.RefOf(o), err)
	}
	return out, nil
}

// pair returns the certificate of the TLS Secret ns/name for this run:
// the live one while it is good, else a new one (chosen once per run).
func (c *certState) pair(ctx context.Context, ns, name string) (certs.Pair, error) {
	key := ns + "/" + name
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.pairs[key]; ok {
		return p, nil
	}
	p, err := c.choosePair(ctx, ns, name)
	if err != nil {
		return certs.Pair{}, err
	}
	c.pairs[key] = p
	return p, nil
}

func (c *certState) choosePair(ctx context.Context, ns, name string) (certs.Pair, error) {
	names := c.names[ns+"/"+name]
	live, err := c.r.typedSecret(ctx, ns, name)
	if err != nil {
		return certs.Pair{}, fmt.Errorf("secret %s/%s: %w", ns, name, err)
	}
	var p certs.Pair
	if live != nil {
		p = certs.Pair{Cert: live.Data[certs.CertKey], Key: live.Data[certs.KeyKey]}
		issuer, err := c.keepAdopted(ctx, live, p)
		if err != nil {
			return certs.Pair{}, err
		}
		if issuer != nil {
			c.kept[ns+"/"+name] = issuer
			return p, nil
		}
	}
	if certs.Renewal(p, &c.ca, names, c.opts.Now(), renewBefore(c.opts.CertRenewBefore, c.opts.CertValidity)) != "" {
		if p, err = certs.NewServing(c.ca, names, c.opts.Now(), c.opts.CertValidity); err != nil {
			return certs.Pair{}, fmt.Errorf("secret %s/%s: %w", ns, name, err)
		}
	}
	return p, nil
}

// keepAdopted returns the CA that signed the certificate of a live TLS
// Secret when that certificate is kept, nil when the Secret gets one of
// ours. A Secret that is adopted (no installation's, Options.Adopt) keeps
// the certificate its installer issued while it is good on its own terms
// (certs.RenewalOwn) and its issuer is known — in a live TLS Secret or CA
// bundle of the strategy (virt-operator keeps its CA in the kubevirt-ca
// Secret and the webhooks' bundles) — so that the takeover restarts no pod
// to load a new one; metakeys.KeptCertificateAnnotation records it, and it stays on
// later runs until it is due, then one of ours replaces it (and the pods
// mounting it restart, as for any renewal).
func (c *certState) keepAdopted(ctx context.Context, live *corev1.Secret, p certs.Pair) ([]byte, error) {
	claim := c.r.opts.Owner.ClaimOf(live.Labels)
	sum := sha256.Sum256(p.Cert)
	fp := hex.EncodeToString(sum[:16])
	adopting := claim == inventory.ClaimNone && c.r.opts.Adopt == apply.AdoptAll
	if !adopting && (claim != inventory.ClaimOurs || live.Annotations[metakeys.KeptCertificateAnnotation] != fp) {
		return nil, nil
	}
	if certs.RenewalOwn(p, c.opts.Now()) != "" {
		return nil, nil
	}
	candidates, err := c.issuers(ctx)
	if err != nil {
		return nil, err
	}
	return certs.IssuerOf(p.Cert, candidates, c.opts.Now()), nil
}
