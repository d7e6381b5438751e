package auth

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
)

// ServerTLS returns a server configuration for mutual TLS: it presents the
// certificate in certFile with the key in keyFile, and requires every client
// to present a certificate that chains to a CA in caFile. TLS 1.3 is the
// minimum, since every node runs this same code and needs nothing older.
func ServerTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	cert, pool, err := loadTLS(certFile, keyFile, caFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
	}, nil
}

// ClientTLS returns a client configuration for mutual TLS: it presents the
// certificate in certFile with the key in keyFile, and trusts only servers
// whose certificates chain to a CA in caFile.
func ClientTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	cert, pool, err := loadTLS(certFile, keyFile, caFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
	}, nil
}

func loadTLS(certFile, keyFile, caFile string) (tls.Certificate, *x509.CertPool, error) {
	certPEM, err := readFile("certificate", certFile)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	keyPEM, err := readFile("key", keyFile)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	caPEM, err := readFile("CA", caFile)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("auth: load certificate %s with key %s: %w", certFile, keyFile, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return tls.Certificate{}, nil, fmt.Errorf("auth: CA file %s holds no PEM certificate", caFile)
	}
	return cert, pool, nil
}

// ClientCerts authenticates requests by the client certificate that the TLS
// handshake verified, the mutual TLS alternative to Verifier. It rejects a
// request without one, takes the certificate's CommonName as the node name
// (so Node works the same under either scheme), and applies the same body
// cap. Its fields must not change once Middleware is called, and it must not
// be copied after first use.
type ClientCerts struct {
	// MaxBody caps the request body in bytes; zero or negative means
	// DefaultMaxBody.
	MaxBody int64
	// OnReject, when set, is called with the reason for each rejected
	// request, before the answer is written. It must not read the body.
	OnReject func(reason string, r *http.Request)

	counts rejections
}

// RequireClientCert is ClientCerts with its defaults, for callers that need
// neither the counts nor the hook.
func RequireClientCert(next http.Handler) http.Handler {
	return new(ClientCerts).Middleware(next)
}

// Rejected returns how many requests were rejected, by reason: missing,
// malformed and too-large, each present even at zero.
func (c *ClientCerts) Rejected() map[string]uint64 {
	return c.counts.snapshot(ReasonMissing, ReasonMalformed, ReasonTooLarge)
}

// Middleware returns a handler that calls next only for a request whose
// connection presented a client certificate that the server verified, with
// a CommonName usable as a node name, and whose body is within the cap.
// Only verified chains count: a server configured to request certificates
// without verifying them gets 401 here rather than trust in a self-signed
// name. The certificate is checked before the body is read, so a stranger's
// body is never read.
func (c *ClientCerts) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
			c.reject(w, r, rejection{http.StatusUnauthorized, ReasonMissing, "a verified client certificate is required"})
			return
		}
		node := r.TLS.VerifiedChains[0][0].Subject.CommonName
		if !validNode(node) {
			c.reject(w, r, rejection{http.StatusUnauthorized, ReasonMalformed, "client certificate CommonName is not a node name"})
			return
		}
		max := capBody(c.MaxBody)
		body, err := readBody(w, r, max)
		if err != nil {
			c.reject(w, r, bodyRejection(err, max))
			return
		}
		next.ServeHTTP(w, accepted(r, body, node))
	})
}

func (c *ClientCerts) reject(w http.ResponseWriter, r *http.Request, rej rejection) {
	reject(w, r, &c.counts, c.OnReject, "Ipfence-mTLS", rej)
}
