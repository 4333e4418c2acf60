package engine

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/certs"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

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
