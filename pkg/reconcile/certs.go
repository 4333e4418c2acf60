package reconcile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

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

// PreviousCAKey is the key of the CA Secret that keeps the CA certificate
// the current one replaced, while it is still valid.
const PreviousCAKey = "previous-ca.crt"

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
	if o.GetAPIVersion() != "v1" || o.GetKind() != "Secret" {
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

// dnsNamesFor returns the names of the Services that serve the Secret's
// certificate (servingServices), each as NAME, NAME.NS, NAME.NS.svc and
// NAME.NS.svc.cluster.local; a Secret no Service serves gets its own name
// (a client certificate).
func dnsNamesFor(secret *unstructured.Unstructured, services []*unstructured.Unstructured) []string {
	var names []string
	for _, svc := range services {
		names = append(names, certs.ServiceDNSNames(svc.GetName(), svc.GetNamespace())...)
	}
	if len(names) == 0 {
		return []string{secret.GetName()}
	}
	return names
}

// servingPod is what a pod (or a workload's pod template) tells about
// the certificates it serves: its labels and the Secrets it mounts.
type servingPod struct {
	namespace string
	labels    map[string]string
	secrets   []string
}

// podOf reads a pod or pod template (a map with metadata and spec).
func podOf(ns string, pod map[string]any) servingPod {
	p := servingPod{namespace: ns}
	p.labels, _, _ = unstructured.NestedStringMap(pod, "metadata", "labels")
	vols, _, _ := unstructured.NestedSlice(pod, "spec", "volumes")
	var typed []corev1.Volume
	for _, v := range vols {
		m, _ := v.(map[string]any)
		var vol corev1.Volume
		if m == nil || runtime.DefaultUnstructuredConverter.FromUnstructured(m, &vol) != nil {
			continue
		}
		typed = append(typed, vol)
	}
	p.mounts(typed)
	return p
}

// mounts adds the Secrets the volumes mount: secret volumes and the
// secret sources of projected ones.
func (p *servingPod) mounts(vols []corev1.Volume) {
	add := func(n string) {
		if n != "" && !slices.Contains(p.secrets, n) {
			p.secrets = append(p.secrets, n)
		}
	}
	for _, v := range vols {
		if v.Secret != nil {
			add(v.Secret.SecretName)
		}
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.Secret != nil {
					add(src.Secret.Name)
				}
			}
		}
	}
}

// certScan is what a strategy tells about its certificates: its empty
// TLS Secrets, its Services, its workloads' pod templates, and the
// Services (namespace/name) its webhooks and APIServices dial.
type certScan struct {
	secrets, services []*unstructured.Unstructured
	templates         []servingPod
	dialed            map[string]bool
}

func scanCerts(objects []*unstructured.Unstructured) certScan {
	sc := certScan{dialed: map[string]bool{}}
	for _, o := range objects {
		info, _ := kinds.Lookup(o.GroupVersionKind().GroupKind())
		switch {
		case isEmptyTLSSecret(o):
			sc.secrets = append(sc.secrets, o)
		case o.GetAPIVersion() == "v1" && o.GetKind() == "Service":
			sc.services = append(sc.services, o)
		case info.PodTemplate != nil:
			tmpl, _, _ := unstructured.NestedMap(o.Object, info.PodTemplate...)
			sc.templates = append(sc.templates, podOf(o.GetNamespace(), tmpl))
		}
		info.EachServiceCall(o.Object, func(call kinds.ServiceCall) { sc.dialed[call.Namespace+"/"+call.Name] = true })
	}
	return sc
}

// podLister lists at most limit pods of a namespace that match a label
// selector.
type podLister func(ctx context.Context, namespace, selector string, limit int64) ([]corev1.Pod, error)

// livePods is the run's podLister: the API server's first page.
func (r *run) livePods(ctx context.Context, namespace, selector string, limit int64) ([]corev1.Pod, error) {
	list, err := r.kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector, Limit: limit})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// livePodLimit bounds the pods read for one Service (see servingServices):
// the pods of one workload mount the same Secrets, so a few suffice.
const livePodLimit = 50

// servingServices returns, for each empty TLS Secret (namespace/name), the
// Services of the strategy that serve its certificate: those whose
// selector picks pods that mount it, as their clients reach them. The
// pods are the strategy's workloads' (their pod templates). A Service
// that a webhook or APIService of the strategy dials but that no workload
// of the strategy backs is served by pods outside it — KubeVirt's
// kubevirt-operator-webhook by virt-operator's own Deployment, which
// mounts kubevirt-operator-certs — so its live pods are read (at most
// livePodLimit, selected by its selector in its namespace): they tie it
// to the TLS Secrets of the strategy they mount, except a Secret a
// workload of the strategy mounts (a pod outside the strategy does not add
// names to a certificate the strategy's own workloads serve).
func servingServices(ctx context.Context, sc certScan, listPods podLister) (map[string][]*unstructured.Unstructured, error) {
	secrets, services, templates, dialed := sc.secrets, sc.services, sc.templates, sc.dialed
	tls := map[string]bool{}
	for _, s := range secrets {
		tls[s.GetNamespace()+"/"+s.GetName()] = true
	}
	mounted := map[string]bool{}
	for _, p := range templates {
		for _, n := range p.secrets {
			mounted[p.namespace+"/"+n] = true
		}
	}
	out := map[string][]*unstructured.Unstructured{}
	tie := func(p servingPod, svc *unstructured.Unstructured, outside bool) {
		for _, n := range p.secrets {
			key := p.namespace + "/" + n
			if !tls[key] || (outside && mounted[key]) || slices.Contains(out[key], svc) {
				continue
			}
			out[key] = append(out[key], svc)
		}
	}
	for _, svc := range services {
		sel, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
		if len(sel) == 0 {
			continue
		}
		selector := labels.SelectorFromSet(sel)
		backed := false
		for _, p := range templates {
			if p.namespace == svc.GetNamespace() && selector.Matches(labels.Set(p.labels)) {
				backed = true
				tie(p, svc, false)
			}
		}
		if backed || !dialed[svc.GetNamespace()+"/"+svc.GetName()] {
			continue
		}
		pods, err := listPods(ctx, svc.GetNamespace(), selector.String(), livePodLimit)
		if err != nil {
			return nil, fmt.Errorf("pods behind service %s/%s: %w", svc.GetNamespace(), svc.GetName(), err)
		}
		for i := range pods {
			pod := &pods[i]
			if pod.Namespace != svc.GetNamespace() || !selector.Matches(labels.Set(pod.Labels)) {
				continue
			}
			p := servingPod{namespace: pod.Namespace, labels: pod.Labels}
			p.mounts(pod.Spec.Volumes)
			tie(p, svc, true)
		}
	}
	return out, nil
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
			c.previous = stillValid(live.Data[PreviousCAKey], now)
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
		sec.Data[PreviousCAKey] = c.previous
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

// issuers returns the CA certificates a kept certificate's issuer may be:
// those in the live TLS Secrets (tls.crt, ca.crt) of the strategy and in
// the live CA bundles of its webhooks and APIServices. Called with c.mu
// held.
func (c *certState) issuers(ctx context.Context) ([][]byte, error) {
	if c.read {
		return c.candidates, nil
	}
	for _, o := range c.r.s.Objects {
		var pems [][]byte
		info, _ := kinds.Lookup(o.GroupVersionKind().GroupKind())
		switch {
		case isEmptyTLSSecret(o):
			live, err := c.r.typedSecret(ctx, o.GetNamespace(), o.GetName())
			if err != nil {
				return nil, fmt.Errorf("secret %s/%s: %w", o.GetNamespace(), o.GetName(), err)
			}
			if live != nil {
				pems = append(certs.SplitPEM(live.Data[certs.CertKey]), certs.SplitPEM(live.Data[certs.CAKey])...)
			}
		case info.Dials != nil:
			live, err := c.r.a.Get(ctx, o)
			var notServed *apply.NotServedError
			if errors.As(err, &notServed) {
				continue
			}
			if err != nil {
				return nil, err
			}
			if live == nil {
				continue
			}
			info.EachServiceCall(live.Object, func(call kinds.ServiceCall) {
				if b, ok, _ := unstructured.NestedString(call.At, info.Dials.CABundle...); ok {
					pems = append(pems, decodeBundle(b)...)
				}
			})
		}
		for _, p := range pems {
			if !slices.ContainsFunc(c.candidates, func(q []byte) bool { return bytes.Equal(p, q) }) {
				c.candidates = append(c.candidates, p)
			}
		}
	}
	c.read = true
	return c.candidates, nil
}

// decodeBundle returns the certificates of a base64 CA bundle.
func decodeBundle(b string) [][]byte {
	raw, err := base64.StdEncoding.DecodeString(b)
	if err != nil {
		return nil
	}
	return certs.SplitPEM(raw)
}

// bundle is the CA bundle of webhooks and APIServices: the CA, the one it
// replaced while that is valid (pods not restarted yet serve certificates
// it signed), and the CAs of kept certificates. Every certificate is chosen
// first (after the Secrets' step, which chose them, a lookup each).
func (c *certState) bundle(ctx context.Context) (string, error) {
	for key := range c.names {
		ns, name, _ := strings.Cut(key, "/")
		if _, err := c.pair(ctx, ns, name); err != nil {
			return "", err
		}
	}
	out := append(slices.Clone(c.ca.Cert), c.previous...)
	c.mu.Lock()
	keys := make([]string, 0, len(c.kept))
	for k := range c.kept {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var added [][]byte
	for _, k := range keys {
		if ca := c.kept[k]; !slices.ContainsFunc(added, func(q []byte) bool { return bytes.Equal(ca, q) }) && !bytes.Contains(out, ca) {
			added = append(added, ca)
			out = append(out, ca...)
		}
	}
	c.mu.Unlock()
	return base64.StdEncoding.EncodeToString(out), nil
}

// stillValid returns cert (PEM) when it parses and has not expired at
// now, else nil.
func stillValid(cert []byte, now time.Time) []byte {
	b, _ := pem.Decode(cert)
	if b == nil {
		return nil
	}
	x, err := x509.ParseCertificate(b.Bytes)
	if err != nil || !now.Before(x.NotAfter) {
		return nil
	}
	return cert
}

// publishBundle runs before any step when this run replaced the CA: the
// live webhooks and APIServices of the strategy get the new bundle (new
// CA and old) before a certificate the new CA signs is written, so no
// client rejects a pod that already serves one (KubeVirt's order). The
// admission step applies them in full later.
func (c *certState) publishBundle(ctx context.Context) error {
	if !c.rotated || c.readOnly {
		return nil
	}
	for _, o := range c.r.s.Objects {
		info, _ := kinds.Lookup(o.GroupVersionKind().GroupKind())
		if info.Dials == nil {
			continue
		}
		ri, err := c.r.a.Resource(o)
		if err != nil {
			return err
		}
		err = c.r.a.Retry(ctx, func() error {
			live, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			upd, err := c.inject(ctx, live, info)
			if err != nil || upd == live {
				return err
			}
			out, err := ri.Update(ctx, upd, metav1.UpdateOptions{FieldManager: c.r.opts.FieldManager})
			c.r.a.Wrote(out)
			return err
		})
		if err != nil {
			return fmt.Errorf("publish the new CA bundle to %s: %w", strategy.RefOf(o), err)
		}
	}
	return nil
}

// inject returns the object with the CA bundle in every place that dials
// a Service of the strategy (the kind's Dials: each webhook's clientConfig,
// an APIService's spec) and verifies it; the object itself when there is
// none.
func (c *certState) inject(ctx context.Context, o *unstructured.Unstructured, info kinds.Info) (*unstructured.Unstructured, error) {
	if info.Dials == nil {
		return o, nil
	}
	out := o.DeepCopy()
	var bundle string
	var err error
	changed := false
	info.EachServiceCall(out.Object, func(call kinds.ServiceCall) {
		if err != nil || call.SkipVerify || !c.services[call.Namespace+"/"+call.Name] {
			return
		}
		if bundle == "" {
			if bundle, err = c.bundle(ctx); err != nil {
				return
			}
		}
		err = unstructured.SetNestedField(call.At, bundle, info.Dials.CABundle...)
		changed = true
	})
	if err != nil {
		return nil, fmt.Errorf("%s: ca bundle: %w", strategy.RefOf(o), err)
	}
	if !changed {
		return o, nil
	}
	return out, nil
}
