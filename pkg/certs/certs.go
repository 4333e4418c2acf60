// Package certs owns the certificates a strategy needs but never stores: a
// CA, serving certificates for Services signed by it, and the decision when
// either must be rotated. It is pure (no cluster access); pkg/engine
// keeps the CA in a Secret and fills empty kubernetes.io/tls Secrets.
package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"time"
)

// Keys of the data of a kubernetes.io/tls Secret.
const (
	CertKey = "tls.crt"
	KeyKey  = "tls.key"
	// CAKey holds the CA certificate beside a serving certificate.
	CAKey = "ca.crt"
)

// Pair is a certificate and its key, PEM encoded.
type Pair struct {
	Cert []byte
	Key  []byte
}

// NewCA returns a self-signed CA certificate valid for validity from now.
func NewCA(commonName string, now time.Time, validity time.Duration) (Pair, error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	return issue(tmpl, nil, nil)
}

// NewServing returns a certificate for the DNS names, signed by ca, valid
// for validity from now (never past the CA's expiry), usable for serving
// and as a client certificate. The first name is the common name.
func NewServing(ca Pair, dnsNames []string, now time.Time, validity time.Duration) (Pair, error) {
	if len(dnsNames) == 0 {
		return Pair{}, errors.New("serving certificate: no DNS names")
	}
	caCert, caKey, err := parse(ca)
	if err != nil {
		return Pair{}, fmt.Errorf("serving certificate: ca: %w", err)
	}
	notAfter := now.Add(validity)
	if notAfter.After(caCert.NotAfter) {
		notAfter = caCert.NotAfter
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: dnsNames[0]},
		DNSNames:    dnsNames,
		NotBefore:   now.Add(-time.Minute),
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	return issue(tmpl, caCert, caKey)
}

func issue(tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return Pair{}, fmt.Errorf("serial: %w", err)
	}
	tmpl.SerialNumber = serial
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return Pair{}, fmt.Errorf("create certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Pair{}, fmt.Errorf("marshal key: %w", err)
	}
	return Pair{
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func parse(p Pair) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	kp, err := tls.X509KeyPair(p.Cert, p.Key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(kp.Certificate[0])
	if err != nil {
		return nil, nil, err
	}
	key, ok := kp.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil, nil, errors.New("key is not ECDSA")
	}
	return cert, key, nil
}

// Renewal says why a certificate must be replaced, "" when it is good.
// A pair is replaced when it does not parse or match its key, expires
// within renewBefore, is not signed by ca (when ca is given), or does not
// carry exactly dnsNames (when given; in any order).
func Renewal(p Pair, ca *Pair, dnsNames []string, now time.Time, renewBefore time.Duration) string {
	if len(p.Cert) == 0 || len(p.Key) == 0 {
		return "no certificate"
	}
	cert, _, err := parse(p)
	if err != nil {
		return "unreadable: " + err.Error()
	}
	if !now.Add(renewBefore).Before(cert.NotAfter) {
		return fmt.Sprintf("expires %s, within %s", cert.NotAfter.UTC().Format(time.RFC3339), renewBefore)
	}
	if ca != nil {
		caCert, _, err := parse(*ca)
		if err != nil {
			return "ca unreadable: " + err.Error()
		}
		if err := cert.CheckSignatureFrom(caCert); err != nil || !bytes.Equal(cert.RawIssuer, caCert.RawSubject) {
			return "not signed by the current CA"
		}
	}
	if dnsNames != nil && !sameNames(cert.DNSNames, dnsNames) {
		return fmt.Sprintf("names %v, want %v", cert.DNSNames, dnsNames)
	}
	return ""
}

// sameNames reports whether a and b hold the same names, in any order.
func sameNames(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// ServiceDNSNames returns the names a Service is reached by inside the
// cluster.
func ServiceDNSNames(service, namespace string) []string {
	return []string{
		service,
		service + "." + namespace,
		service + "." + namespace + ".svc",
		service + "." + namespace + ".svc.cluster.local",
	}
}

// RenewalOwn says why a certificate someone else issued (another
// installer's, taken over with its Secret) must be replaced, "" while it is
// good to keep: it parses and matches its key (of any algorithm), and does
// not expire within a fifth of its own validity. Its CA and names are not
// judged: they are what its issuer chose.
func RenewalOwn(p Pair, now time.Time) string {
	if len(p.Cert) == 0 || len(p.Key) == 0 {
		return "no certificate"
	}
	kp, err := tls.X509KeyPair(p.Cert, p.Key)
	if err != nil {
		return "unreadable: " + err.Error()
	}
	cert, err := x509.ParseCertificate(kp.Certificate[0])
	if err != nil {
		return "unreadable: " + err.Error()
	}
	if before := cert.NotAfter.Sub(cert.NotBefore) / 5; !now.Add(before).Before(cert.NotAfter) {
		return fmt.Sprintf("expires %s, within a fifth of its validity", cert.NotAfter.UTC().Format(time.RFC3339))
	}
	return ""
}

// SplitPEM returns each certificate of a PEM bundle as a PEM block of its
// own; what is not a certificate is left out.
func SplitPEM(bundle []byte) [][]byte {
	var out [][]byte
	for {
		var b *pem.Block
		b, bundle = pem.Decode(bundle)
		if b == nil {
			return out
		}
		if b.Type == "CERTIFICATE" {
			out = append(out, pem.EncodeToMemory(b))
		}
	}
}

// IssuerOf returns the certificate (PEM) among candidates that signed the
// first certificate of cert (PEM) and is valid at now, nil when none did.
func IssuerOf(cert []byte, candidates [][]byte, now time.Time) []byte {
	leaf := Leaf(cert)
	if leaf == nil {
		return nil
	}
	for _, c := range candidates {
		ca := Leaf(c)
		if ca == nil || !now.Before(ca.NotAfter) || !bytes.Equal(leaf.RawIssuer, ca.RawSubject) {
			continue
		}
		if leaf.CheckSignatureFrom(ca) == nil {
			return c
		}
	}
	return nil
}

// Leaf parses the first certificate of a PEM chain; nil if there is none.
func Leaf(chain []byte) *x509.Certificate {
	b, _ := pem.Decode(chain)
	if b == nil {
		return nil
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil
	}
	return c
}
