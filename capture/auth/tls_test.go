package auth

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"io/fs"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/internal/testonly/testpki"
)

// testCA adapts testpki's CA to this file's calls.
type testCA struct{ *testpki.CA }

func newCA(t *testing.T, dir, name string) *testCA { return &testCA{testpki.NewCA(t, dir, name)} }

func (ca *testCA) path(file string) string { return ca.Path(file) }

// issue writes a client certificate for cn, or a server one.
func (ca *testCA) issue(t *testing.T, cn string, server bool) (certFile, keyFile string) {
	if server {
		return ca.Issue(t, cn, x509.ExtKeyUsageServerAuth)
	}
	return ca.Issue(t, cn, x509.ExtKeyUsageClientAuth)
}

// startTLS runs h behind cfg, with handshake failures kept out of the test
// log.
func startTLS(t *testing.T, cfg *tls.Config, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = cfg
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func tlsClient(cfg *tls.Config) *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
}

func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, dir, "fleet")
	other := newCA(t, dir, "stranger")
	srvCert, srvKey := ca.issue(t, "node-a", true)
	cliCert, cliKey := ca.issue(t, "node-b", false)
	strangerCert, strangerKey := other.issue(t, "node-b", false)

	scfg, err := ServerTLS(srvCert, srvKey, ca.path("ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if scfg.MinVersion != tls.VersionTLS13 || scfg.ClientAuth != tls.RequireAndVerifyClientCert {
		t.Fatalf("server config: MinVersion %x ClientAuth %v", scfg.MinVersion, scfg.ClientAuth)
	}
	cc := &ClientCerts{MaxBody: 16}
	s := &sink{}
	srv := startTLS(t, scfg, cc.Middleware(s))

	good, err := ClientTLS(cliCert, cliKey, ca.path("ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if good.MinVersion != tls.VersionTLS13 {
		t.Fatalf("client config: MinVersion %x", good.MinVersion)
	}
	resp, err := tlsClient(good).Post(srv.URL+"/v1/claims", "text/plain", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(got) != "ok node-b 5" || s.node != "node-b" || string(s.body) != "hello" {
		t.Fatalf("good client: %d %q; handler saw node %q body %q", resp.StatusCode, got, s.node, s.body)
	}

	// The body cap applies under mTLS too.
	resp, err = tlsClient(good).Post(srv.URL+"/v1/claims", "text/plain", strings.NewReader(strings.Repeat("z", 17)))
	if err != nil {
		t.Fatal(err)
	}
	got, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || string(got) != `{"error":"request body over 16 bytes"}` || s.count() != 1 {
		t.Fatalf("oversized: %d %q, %d calls", resp.StatusCode, got, s.count())
	}

	pool := x509.NewCertPool()
	pool.AddCert(ca.Certificate())
	noCert := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}
	stranger, err := ClientTLS(strangerCert, strangerKey, ca.path("ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]*tls.Config{"no certificate": noCert, "certificate from another CA": stranger} {
		resp, err := tlsClient(cfg).Get(srv.URL + "/v1/state")
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s: got %d, want a failed handshake", name, resp.StatusCode)
		}
	}
	want := map[string]uint64{"missing": 0, "malformed": 0, "too-large": 1}
	if s.count() != 1 || !maps.Equal(cc.Rejected(), want) {
		t.Fatalf("%d handler calls, counts %v", s.count(), cc.Rejected())
	}
}

// TestClientCertsNeedsVerifiedChain runs a server that asks for a client
// certificate without verifying it: the middleware must not trust the name
// in an unverified certificate.
func TestClientCertsNeedsVerifiedChain(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, dir, "fleet")
	other := newCA(t, dir, "stranger")
	srvCert, srvKey := ca.issue(t, "node-a", true)
	strangerCert, strangerKey := other.issue(t, "node-b", false)
	scfg, err := ServerTLS(srvCert, srvKey, ca.path("ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	scfg.ClientAuth = tls.RequireAnyClientCert
	// Without a CA list in the request, the Go client sends its certificate
	// whoever signed it.
	scfg.ClientCAs = nil
	cc := &ClientCerts{}
	s := &sink{}
	srv := startTLS(t, scfg, cc.Middleware(s))
	ccfg, err := ClientTLS(strangerCert, strangerKey, ca.path("ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tlsClient(ccfg).Get(srv.URL + "/v1/state")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || string(got) != `{"error":"a verified client certificate is required"}` ||
		resp.Header.Get("WWW-Authenticate") != "Ipfence-mTLS" || s.count() != 0 || cc.Rejected()["missing"] != 1 {
		t.Fatalf("unverified certificate: %d %q, %d calls, counts %v", resp.StatusCode, got, s.count(), cc.Rejected())
	}
}

func TestClientCertsWithoutTLS(t *testing.T) {
	verified := func(cn string) *tls.ConnectionState {
		return &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{{Subject: pkix.Name{CommonName: cn}}}}}
	}
	cases := []struct {
		name   string
		state  *tls.ConnectionState
		body   string
		status int
		reason string
	}{
		{"plain HTTP", nil, "x", 401, "missing"},
		{"no verified chain", &tls.ConnectionState{PeerCertificates: []*x509.Certificate{{Subject: pkix.Name{CommonName: "node-b"}}}}, "x", 401, "missing"},
		{"empty CommonName", verified(""), "x", 401, "malformed"},
		{"CommonName with a newline", verified("node\nb"), "x", 401, "malformed"},
		{"body over the cap", verified("node-b"), strings.Repeat("x", DefaultMaxBody+1), 413, "too-large"},
		{"accepted", verified("node-b"), "x", 200, ""},
	}
	for _, c := range cases {
		cc := &ClientCerts{}
		var hooked []string
		cc.OnReject = func(reason string, _ *http.Request) { hooked = append(hooked, reason) }
		s := &sink{}
		r := httptest.NewRequest(http.MethodPost, "/v1/claims", strings.NewReader(c.body))
		r.TLS = c.state
		w := serve(cc.Middleware(s), r)
		want := map[string]uint64{"missing": 0, "malformed": 0, "too-large": 0}
		wantCalls := 0
		if c.reason != "" {
			want[c.reason] = 1
			if len(hooked) != 1 || hooked[0] != c.reason {
				t.Errorf("%s: OnReject saw %v", c.name, hooked)
			}
		} else {
			wantCalls = 1
		}
		if w.Code != c.status || s.count() != wantCalls || !maps.Equal(cc.Rejected(), want) {
			t.Errorf("%s: %d %q, %d calls, counts %v", c.name, w.Code, w.Body, s.count(), cc.Rejected())
		}
		if wantCalls == 1 && (s.node != "node-b" || string(s.body) != c.body) {
			t.Errorf("%s: handler saw node %q body %q", c.name, s.node, s.body)
		}
	}
	// The convenience wrapper rejects the same way.
	s := &sink{}
	w := serve(RequireClientCert(s), httptest.NewRequest(http.MethodGet, "/", nil))
	if w.Code != http.StatusUnauthorized || s.count() != 0 {
		t.Errorf("RequireClientCert on plain HTTP: %d, %d calls", w.Code, s.count())
	}
}

func TestTLSFiles(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, dir, "fleet")
	cert, key := ca.issue(t, "node-a", true)
	_, otherKey := ca.issue(t, "node-b", false)
	caFile := ca.path("ca.pem")
	missing := filepath.Join(dir, "absent.pem")
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		cert, key, ca string
		want          string
	}{
		{missing, key, caFile, "auth: read certificate file " + missing + ": no such file or directory"},
		{cert, missing, caFile, "auth: read key file " + missing + ": no such file or directory"},
		{cert, key, missing, "auth: read CA file " + missing + ": no such file or directory"},
		{cert, key, garbage, "auth: CA file " + garbage + " holds no PEM certificate"},
		{cert, otherKey, caFile, "auth: load certificate " + cert + " with key " + otherKey + ": tls: private key does not match public key"},
		{garbage, key, caFile, "auth: load certificate " + garbage + " with key " + key + ": tls: failed to find any PEM data in certificate input"},
	}
	for _, c := range cases {
		for name, load := range map[string]func(string, string, string) (*tls.Config, error){"ServerTLS": ServerTLS, "ClientTLS": ClientTLS} {
			cfg, err := load(c.cert, c.key, c.ca)
			if cfg != nil || err == nil || err.Error() != c.want {
				t.Errorf("%s: %v, want %q", name, err, c.want)
			}
		}
	}
	if _, err := ServerTLS(missing, key, caFile); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v does not wrap fs.ErrNotExist", err)
	}
}
