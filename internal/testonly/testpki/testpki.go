// Package testpki makes certificate authorities and certificates for tests
// of mutual TLS: a CA per test, written as PEM files into a folder the test
// owns.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority made for one test.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	dir  string
	name string
}

// NewCA makes a CA named name and writes its certificate to CAFile.
func NewCA(t testing.TB, dir, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{cert: cert, key: key, dir: dir, name: name}
	WritePEM(t, ca.CAFile(), "CERTIFICATE", der)
	return ca
}

// CAFile is the path of the CA's certificate.
func (ca *CA) CAFile() string { return ca.Path("ca.pem") }

// Path names a file of this CA's in its folder.
func (ca *CA) Path(file string) string { return filepath.Join(ca.dir, ca.name+"-"+file) }

// Issue writes a certificate for cn and its key, and returns their paths.
// usages are the extended key usages: server certificates are also valid
// for 127.0.0.1, where tests listen.
func (ca *CA) Issue(t testing.TB, cn string, usages ...x509.ExtKeyUsage) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usages,
	}
	for _, u := range usages {
		if u == x509.ExtKeyUsageServerAuth {
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = ca.Path(cn+".pem"), ca.Path(cn+"-key.pem")
	WritePEM(t, certFile, "CERTIFICATE", der)
	WritePEM(t, keyFile, "EC PRIVATE KEY", keyDER)
	return certFile, keyFile
}

// WritePEM writes one PEM block.
func WritePEM(t testing.TB, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Certificate is the CA's own certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }
