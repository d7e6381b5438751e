package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Under mutual TLS the certificate names the sender of a batch, but a batch
// also carries events that its sender relays from other members: without
// more, a member could relay an event "from" any other (a drain, a
// heartbeat keeping a dead node alive, an epoch record). EventKeys binds
// every event to its origin: the origin signs it with its certificate's
// key, and every receiver checks the signature against a certificate that
// chains to the cluster's CA and whose CommonName is the event's origin.
// The certificates travel with the events (by key id), so an event can be
// checked wherever it is relayed, and long after its origin is gone.

// ErrEventSignature is the error of every signature that does not check.
var ErrEventSignature = errors.New("event signature")

// maxCertSize bounds a certificate taken from a peer.
const maxCertSize = 16 << 10

// EventKeys signs this node's events with its certificate's key and checks
// other members' events against the certificates it has learned. It is
// safe for concurrent use.
type EventKeys struct {
	self    string
	signer  crypto.Signer
	certDER []byte
	id      string
	roots   *x509.CertPool

	mu    sync.Mutex
	known map[string]learned
}

// learned is a certificate that chained to the CA: whose it is and its key.
type learned struct {
	node string
	pub  crypto.PublicKey
}

// LoadEventKeys reads this node's certificate, key and the CA, as
// ServerTLS does. The certificate's CommonName is the node's name.
func LoadEventKeys(certFile, keyFile, caFile string) (*EventKeys, error) {
	cert, pool, err := loadTLS(certFile, keyFile, caFile)
	if err != nil {
		return nil, err
	}
	signer, ok := cert.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("auth: the key in %s cannot sign", keyFile)
	}
	return NewEventKeys(cert.Certificate[0], signer, pool)
}

// NewEventKeys makes EventKeys from this node's certificate (DER), its
// private key and the CA pool. The certificate must chain to the pool.
func NewEventKeys(certDER []byte, key crypto.Signer, roots *x509.CertPool) (*EventKeys, error) {
	k := &EventKeys{signer: key, certDER: certDER, roots: roots, known: map[string]learned{}}
	id, err := k.Learn(certDER)
	if err != nil {
		return nil, fmt.Errorf("auth: this node's own certificate: %w", err)
	}
	k.id = id
	k.self = k.known[id].node
	return k, nil
}

// Node is the name this node's certificate gives it.
func (k *EventKeys) Node() string { return k.self }

// KeyID names this node's certificate: what its events carry.
func (k *EventKeys) KeyID() string { return k.id }

// Cert is this node's certificate, DER.
func (k *EventKeys) Cert() []byte { return k.certDER }

// CertKeyID is the key id of a certificate: the first 16 bytes of its
// SHA-256, in hex.
func CertKeyID(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:16])
}

// Sign signs msg (the event's signed bytes) with this node's key.
func (k *EventKeys) Sign(msg []byte) ([]byte, error) {
	sum := sha256.Sum256(msg)
	switch k.signer.Public().(type) {
	case ed25519.PublicKey:
		return k.signer.Sign(rand.Reader, msg, crypto.Hash(0))
	default:
		return k.signer.Sign(rand.Reader, sum[:], crypto.SHA256)
	}
}

// Learn takes a certificate (DER) from a peer: it must parse, chain to
// the CA and carry a node name as its CommonName. It returns the
// certificate's key id. Expiry is not held against it: a signature shows
// who made an event, and an epoch record made under a certificate since
// expired must still be read (a node that could not learn it would take
// that epoch again); connections are where expiry is enforced.
func (k *EventKeys) Learn(der []byte) (string, error) {
	if len(der) == 0 || len(der) > maxCertSize {
		return "", fmt.Errorf("%w: a certificate of %d bytes", ErrEventSignature, len(der))
	}
	id := CertKeyID(der)
	k.mu.Lock()
	_, ok := k.known[id]
	k.mu.Unlock()
	if ok {
		return id, nil
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return "", fmt.Errorf("%w: certificate: %v", ErrEventSignature, err)
	}
	// The chain is checked at a moment the certificate was valid.
	at := cert.NotBefore.Add(time.Second)
	if !cert.NotAfter.After(at) {
		at = cert.NotBefore
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: k.roots, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return "", fmt.Errorf("%w: certificate of %q does not chain to the cluster's CA: %v", ErrEventSignature, cert.Subject.CommonName, err)
	}
	if !validNode(cert.Subject.CommonName) {
		return "", fmt.Errorf("%w: certificate CommonName %q is not a node name", ErrEventSignature, cert.Subject.CommonName)
	}
	switch cert.PublicKey.(type) {
	case *ecdsa.PublicKey, ed25519.PublicKey, *rsa.PublicKey:
	default:
		return "", fmt.Errorf("%w: certificate of %q has a key of type %T", ErrEventSignature, cert.Subject.CommonName, cert.PublicKey)
	}
	k.mu.Lock()
	k.known[id] = learned{node: cert.Subject.CommonName, pub: cert.PublicKey}
	k.mu.Unlock()
	return id, nil
}

// Known reports whether the certificate of key id was learned.
func (k *EventKeys) Known(id string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.known[id]
	return ok
}

// Verify checks that sig over msg was made by origin, with the key of the
// certificate id names, which must have been learned and name origin.
func (k *EventKeys) Verify(origin, id string, msg, sig []byte) error {
	k.mu.Lock()
	l, ok := k.known[id]
	k.mu.Unlock()
	switch {
	case id == "" || len(sig) == 0:
		return fmt.Errorf("%w: the event from %q is not signed", ErrEventSignature, origin)
	case !ok:
		return fmt.Errorf("%w: the event from %q names key %s, whose certificate did not come with it", ErrEventSignature, origin, id)
	case l.node != origin:
		return fmt.Errorf("%w: the event says it is from %q, but key %s is %q's", ErrEventSignature, origin, id, l.node)
	}
	sum := sha256.Sum256(msg)
	good := false
	switch pub := l.pub.(type) {
	case *ecdsa.PublicKey:
		good = ecdsa.VerifyASN1(pub, sum[:], sig)
	case ed25519.PublicKey:
		good = ed25519.Verify(pub, msg, sig)
	case *rsa.PublicKey:
		good = rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig) == nil
	}
	if !good {
		return fmt.Errorf("%w: the event from %q does not match its signature", ErrEventSignature, origin)
	}
	return nil
}
