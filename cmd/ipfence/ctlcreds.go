package main

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"

	"github.com/ipfence/ipfence/capture/auth"
)

// ctlCredentials are what ipfence ctl proves itself with: the operator's
// secret (--token-file: federation.operator_secret_file, or the cluster's
// shared secret where no operator secret is configured), a client
// certificate for a cluster under mutual TLS, or both (a node under mutual
// TLS with an operator secret wants both).
type ctlCredentials struct {
	cert, key, ca *string
}

// addCtlCredentials declares the certificate flags.
func addCtlCredentials(fs *flag.FlagSet) *ctlCredentials {
	return &ctlCredentials{
		cert: fs.String("cert", "", "mutual TLS: the operator's client certificate (PEM)"),
		key:  fs.String("key", "", "mutual TLS: the key of --cert (PEM)"),
		ca:   fs.String("ca", "", "mutual TLS: the cluster's CA, which the node's certificate must chain to (PEM)"),
	}
}

// given reports whether any credential was named.
func (c *ctlCredentials) given(tokenFile string) bool { return tokenFile != "" || *c.cert != "" }

// transport builds the client's transport for endpoint: TLS with the
// client certificate when --cert is given, signing with the token when
// --token-file is.
func (c *ctlCredentials) transport(tokenFile, endpoint string) (http.RoundTripper, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("--endpoint: %v", err)
	}
	var tr http.RoundTripper = http.DefaultTransport
	switch tls := *c.cert != "" || *c.key != "" || *c.ca != ""; {
	case tls && (*c.cert == "" || *c.key == "" || *c.ca == ""):
		return nil, errors.New("--cert, --key and --ca go together: give all three for mutual TLS")
	case tls && u.Scheme != "https":
		return nil, fmt.Errorf("--endpoint %s: a client certificate needs an https:// endpoint", endpoint)
	case tls:
		tc, err := auth.ClientTLS(*c.cert, *c.key, *c.ca)
		if err != nil {
			return nil, err
		}
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = tc
		tr = t
	}
	if tokenFile != "" {
		secret, err := auth.ReadSecret(tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %v", err)
		}
		tr = (&auth.Signer{Secret: secret, Node: "ctl"}).Transport(tr)
	}
	return tr, nil
}
