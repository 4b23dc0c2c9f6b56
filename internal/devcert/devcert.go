// Package devcert makes certificates for tests and the demo cluster: a CA
// of its own and leaf certificates it signs, for the loopback names
// (127.0.0.1, ::1, localhost), valid for a day. Not for a deployment: the
// keys are written unencrypted and nothing revokes them.
package devcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
)

// lifetime is how long the certificates are valid: a test or a demo.
const lifetime = 24 * time.Hour

// backdate starts every certificate's validity before now, so that a
// verifier whose clock is a little behind still accepts it.
const backdate = time.Hour

// Usages a leaf may be issued for.
var (
	Server = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	Client = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	// Node is a server that is also a client of its peers (forwarding
	// under mutual TLS presents the node's own certificate).
	Node = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
)

// CA is a certificate authority: its certificate and its key.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	key     *ecdsa.PrivateKey
	serial  atomic.Int64
}

// Leaf is a certificate the CA issued, PEM-encoded, with its private key.
type Leaf struct {
	CertPEM, KeyPEM []byte
}

// NewCA makes a CA named name.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-backdate), NotAfter: now.Add(lifetime),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	ca := &CA{Cert: cert, CertPEM: pemBlock("CERTIFICATE", der), key: key}
	ca.serial.Store(1)
	return ca, nil
}

// Issue signs a certificate named cn for the loopback names, for usages.
func (ca *CA) Issue(cn string, usages []x509.ExtKeyUsage) (Leaf, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Leaf{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial.Add(1)), Subject: pkix.Name{CommonName: cn},
		NotBefore: now.Add(-backdate), NotAfter: now.Add(lifetime),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usages,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return Leaf{}, err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Leaf{}, err
	}
	return Leaf{CertPEM: pemBlock("CERTIFICATE", der), KeyPEM: pemBlock("EC PRIVATE KEY", kb)}, nil
}

// Pool is a pool holding the CA's certificate alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// WriteCA writes the CA's certificate to path.
func (ca *CA) WriteCA(path string) error { return os.WriteFile(path, ca.CertPEM, 0o600) }

// TLS is the leaf as crypto/tls takes it.
func (l Leaf) TLS() (tls.Certificate, error) { return tls.X509KeyPair(l.CertPEM, l.KeyPEM) }

// Write writes the certificate and the key into dir as <name>.crt and
// <name>.key, and returns their paths.
func (l Leaf) Write(dir, name string) (certPath, keyPath string, err error) {
	certPath, keyPath = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certPath, l.CertPEM, 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyPath, l.KeyPEM, 0o600); err != nil {
		return "", "", err
	}
	return certPath, keyPath, nil
}

func pemBlock(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}
