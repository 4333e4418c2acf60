package localcluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// keyPair is a certificate with its private key, both PEM encoded.
type keyPair struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	keyPEM  []byte
}

// newCA creates a self-signed certificate authority.
func newCA(name string) (*keyPair, error) {
	return newCert(nil, &x509.Certificate{
		Subject:               pkix.Name{CommonName: name},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	})
}

// newServing creates a serving certificate signed by ca for the given names.
func newServing(ca *keyPair, cn string, dnsNames []string, ips []net.IP) (*keyPair, error) {
	return newCert(ca, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		DNSNames:    dnsNames,
		IPAddresses: ips,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// newClient creates a client certificate signed by ca; the API server maps
// cn to the user name and groups to the user's groups.
func newClient(ca *keyPair, cn string, groups ...string) (*keyPair, error) {
	return newCert(ca, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn, Organization: groups},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// newCert fills in the common fields of tmpl, creates a key and signs the
// certificate with parent, or with itself when parent is nil.
func newCert(parent *keyPair, tmpl *x509.Certificate) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key for %q: %w", tmpl.Subject.CommonName, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("generate serial for %q: %w", tmpl.Subject.CommonName, err)
	}
	now := time.Now()
	tmpl.SerialNumber = serial
	tmpl.NotBefore = now.Add(-time.Hour)
	tmpl.NotAfter = now.Add(365 * 24 * time.Hour)

	signerCert, signerKey := tmpl, crypto.Signer(key)
	if parent != nil {
		signerCert, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, key.Public(), signerKey)
	if err != nil {
		return nil, fmt.Errorf("sign certificate for %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse certificate for %q: %w", tmpl.Subject.CommonName, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal key for %q: %w", tmpl.Subject.CommonName, err)
	}
	return &keyPair{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// write stores the pair as dir/name.crt and dir/name.key.
func (p *keyPair) write(dir, name string) (certFile, keyFile string, err error) {
	certFile = filepath.Join(dir, name+".crt")
	keyFile = filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, p.certPEM, 0o600); err != nil {
		return "", "", fmt.Errorf("write %s: %w", certFile, err)
	}
	if err := os.WriteFile(keyFile, p.keyPEM, 0o600); err != nil {
		return "", "", fmt.Errorf("write %s: %w", keyFile, err)
	}
	return certFile, keyFile, nil
}

// writeServiceAccountKeys creates the key pair that signs service-account
// tokens and stores it as dir/sa.key and dir/sa.pub.
func writeServiceAccountKeys(dir string) (privFile, pubFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("generate service-account key: %w", err)
	}
	privDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", fmt.Errorf("marshal service-account key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return "", "", fmt.Errorf("marshal service-account public key: %w", err)
	}
	privFile = filepath.Join(dir, "sa.key")
	pubFile = filepath.Join(dir, "sa.pub")
	if err := os.WriteFile(privFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER}), 0o600); err != nil {
		return "", "", fmt.Errorf("write %s: %w", privFile, err)
	}
	if err := os.WriteFile(pubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o600); err != nil {
		return "", "", fmt.Errorf("write %s: %w", pubFile, err)
	}
	return privFile, pubFile, nil
}
