package daemon_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture/auth"
	"github.com/ipfence/ipfence/capture/config"
	"github.com/ipfence/ipfence/capture/daemon"
	"github.com/ipfence/ipfence/capture/federation"
	"github.com/ipfence/ipfence/internal/testonly/testpki"
)

// idCluster is three in-process nodes n1..n3 with a memory provider,
// federated over mutual TLS or HMAC, with an operator secret apart.
type idCluster struct {
	t        *testing.T
	dir      string
	ports    []int
	ca       *testpki.CA
	fedKey   []byte
	opKey    []byte
	scheme   string
	stop     func()
	nodeCert map[string][2]string
}

func startIDCluster(t *testing.T, mtls bool) *idCluster {
	t.Helper()
	c := &idCluster{t: t, dir: t.TempDir(), nodeCert: map[string][2]string{}, scheme: "http",
		fedKey: []byte(strings.Repeat("f", 40)), opKey: []byte(strings.Repeat("o", 40))}
	for name, key := range map[string][]byte{"fed": c.fedKey, "op": c.opKey} {
		if err := os.WriteFile(filepath.Join(c.dir, name), key, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if mtls {
		c.ca = testpki.NewCA(t, c.dir, "cluster")
		c.scheme = "https"
	}
	var lns []net.Listener
	for range 3 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, l)
		c.ports = append(c.ports, l.Addr().(*net.TCPAddr).Port)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var done []chan error
	for i := range 3 {
		n := fmt.Sprintf("n%d", i+1)
		var b strings.Builder
		fmt.Fprintf(&b, "node: %s\nlisten: 127.0.0.1:%d\nadvertise: %s://127.0.0.1:%d\ndata_dir: %s-data\npeers:\n", n, c.ports[i], c.scheme, c.ports[i], n)
		for j := range 3 {
			if j != i {
				fmt.Fprintf(&b, "  - name: n%d\n    url: %s://127.0.0.1:%d\n", j+1, c.scheme, c.ports[j])
			}
		}
		if mtls {
			cert, key := c.ca.Issue(t, n, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
			c.nodeCert[n] = [2]string{cert, key}
			fmt.Fprintf(&b, "federation:\n  tls: {cert_file: %s, key_file: %s, ca_file: %s}\n  operator_secret_file: op\n", cert, key, c.ca.CAFile())
		} else {
			b.WriteString("federation:\n  secret_file: fed\n  operator_secret_file: op\n")
		}
		b.WriteString(`providers:
  mem: {type: memory}
pools:
  - name: web
    provider: mem
    group: g
    addresses: [10.0.0.10]
    members:
      - {node: n1, priority: 1, target: eni-n1}
      - {node: n2, priority: 2, target: eni-n2}
      - {node: n3, priority: 3, target: eni-n3}
timing: {heartbeat_interval: 50ms, heartbeat_ttl: 200ms, reconcile_interval: 200ms}
`)
		path := filepath.Join(c.dir, n+".yaml")
		if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		d, err := daemon.New(ctx, cfg, daemon.Options{Listener: lns[i]})
		if err != nil {
			t.Fatal(err)
		}
		ch := make(chan error, 1)
		go func() { ch <- d.Run(ctx) }()
		done = append(done, ch)
	}
	c.stop = func() {
		cancel()
		for _, ch := range done {
			<-ch
		}
	}
	t.Cleanup(c.stop)
	return c
}

// client presents the certificate of cn (mutual TLS; "" for none) and
// signs with secret (nil for none) as node signAs.
func (c *idCluster) client(cn string, secret []byte, signAs string) *http.Client {
	c.t.Helper()
	var tr http.RoundTripper = http.DefaultTransport
	if c.ca != nil {
		var cert, key string
		if f, ok := c.nodeCert[cn]; ok {
			cert, key = f[0], f[1]
		} else {
			cert, key = c.ca.Issue(c.t, cn, x509.ExtKeyUsageClientAuth)
		}
		tc, err := auth.ClientTLS(cert, key, c.ca.CAFile())
		if err != nil {
			c.t.Fatal(err)
		}
		tr = &http.Transport{TLSClientConfig: tc}
	}
	if secret != nil {
		tr = (&auth.Signer{Secret: secret, Node: signAs}).Transport(tr)
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: tr}
}

func (c *idCluster) call(cl *http.Client, node int, method, path, body string) (int, string) {
	c.t.Helper()
	req, _ := http.NewRequest(method, fmt.Sprintf("%s://127.0.0.1:%d%s", c.scheme, c.ports[node], path), strings.NewReader(body))
	resp, err := cl.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// drained asks n1 (as the operator) whether member is drained.
// callIntent is call for an operator's intent: sent again while the node
// answers 503 (it could not yet read or reach a majority), as ctl's user
// is told to.
func (c *idCluster) callIntent(cl *http.Client, node int, path string) (int, string) {
	c.t.Helper()
	for deadline := time.Now().Add(generous); ; time.Sleep(50 * time.Millisecond) {
		code, body := c.call(cl, node, http.MethodPost, path, "")
		if code != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return code, body
		}
	}
}

func (c *idCluster) drained(member string) bool {
	c.t.Helper()
	code, body := c.call(c.client("operator", c.opKey, "ctl"), 0, http.MethodGet, "/v1/status", "")
	if code != http.StatusOK {
		c.t.Fatalf("status: %d %s", code, body)
	}
	return statusDrained(body, member)
}

// statusDrained finds member's drained flag in a status document.
func statusDrained(body, member string) bool {
	i := strings.Index(body, `"node": "`+member+`"`)
	if i < 0 {
		return false
	}
	rest := body[i:]
	j := strings.Index(rest, `"drained": `)
	return j >= 0 && strings.HasPrefix(rest[j+len(`"drained": `):], "true")
}

func forgedDrain(from, origin, member string) string {
	return fmt.Sprintf(`{"from":%q,"events":[{"origin":%q,"seq":77,"lamport":77,"time":1,"kind":"drain","subject":%q}]}`, from, origin, member)
}

// Issue 14: under mutual TLS events were not bound to the certificate's
// name: a node's certificate could send events "from" another node, and a
// CA-signed certificate naming no member (CN mallory) could drain a node.
// And the operator's credential must not open the federation.
func TestMutualTLSBindsSenders(t *testing.T) {
	c := startIDCluster(t, true)
	fed := federationPath
	// n2's certificate sending a batch from n3.
	if code, body := c.call(c.client("n2", nil, ""), 0, http.MethodPost, fed, forgedDrain("n3", "n3", "n1")); code != http.StatusForbidden {
		t.Fatalf("n2 as n3: %d %s", code, body)
	}
	// mallory's certificate, as itself or as n2.
	mallory := c.client("mallory", nil, "")
	for _, from := range []string{"mallory", "n2"} {
		if code, body := c.call(mallory, 0, http.MethodPost, fed, forgedDrain(from, from, "n1")); code != http.StatusForbidden {
			t.Fatalf("mallory as %s: %d %s", from, code, body)
		}
	}
	if code, _ := c.call(mallory, 0, http.MethodGet, "/v1/federation/records", ""); code != http.StatusForbidden {
		t.Fatalf("mallory reading the records: %d", code)
	}
	// mallory (or any certificate) without the operator's secret cannot
	// drain through the operator API either.
	if code, _ := c.call(mallory, 0, http.MethodPost, "/v1/members/n1/drain", ""); code != http.StatusUnauthorized {
		t.Fatalf("mallory's drain: %d", code)
	}
	// The operator's certificate and secret do not open the federation.
	if code, _ := c.call(c.client("operator", c.opKey, "n2"), 0, http.MethodPost, fed, forgedDrain("n2", "n2", "n1")); code != http.StatusForbidden {
		t.Fatalf("the operator on the federation: %d", code)
	}
	// n2 relaying an event "from" n3: unsigned, signed by n2's own key,
	// and a real signature of n3's... that n2 altered. Each is refused at
	// the door: the batch's sender is n2, but only n3 can sign as n3.
	forged := signedAs(t, c, "n2", federation.Event{Origin: "n3", Seq: 78, Lamport: 78, Time: 1, Kind: federation.Drain, Subject: "n1"})
	unsigned := forged
	unsigned.Key, unsigned.Sig = "", nil
	altered := signedAs(t, c, "n3", federation.Event{Origin: "n3", Seq: 79, Lamport: 79, Time: 1, Kind: federation.Drain, Subject: "n2"})
	altered.Subject = "n1"
	certs := map[string][]byte{forged.Key: certOf(t, c, "n2"), altered.Key: certOf(t, c, "n3")}
	for what, e := range map[string]federation.Event{"signed by n2": forged, "unsigned": unsigned, "altered": altered} {
		b, _ := json.Marshal(federation.Batch{From: "n2", Events: []federation.Event{e}, Certs: certs})
		if code, body := c.call(c.client("n2", nil, ""), 0, http.MethodPost, fed, string(b)); code != http.StatusBadRequest || !strings.Contains(body, "signature") {
			t.Fatalf("n2 relaying a drain %s as n3's: %d %s", what, code, body)
		}
	}
	if c.drained("n1") {
		t.Fatal("a refused request drained n1")
	}
	// n2 as itself is served; the operator drains with its secret.
	if code, body := c.call(c.client("n2", nil, ""), 0, http.MethodPost, fed, `{"from":"n2","events":[]}`); code != http.StatusOK {
		t.Fatalf("n2 as itself: %d %s", code, body)
	}
	if code, body := c.callIntent(c.client("operator", c.opKey, "ctl"), 0, "/v1/members/n1/drain"); code != http.StatusOK {
		t.Fatalf("the operator's drain: %d %s", code, body)
	}
	if !c.drained("n1") {
		t.Fatal("the operator's drain did not take")
	}
	// Counted: the batch from the wrong name by the federation's door,
	// the callers that are no peer by the API.
	// n1 syncs (reads a peer's records) within moments of its start; a
	// loaded machine may take longer than the test took to get here.
	var metrics string
	for deadline := time.Now().Add(generous); ; time.Sleep(50 * time.Millisecond) {
		_, metrics = c.call(c.client("n2", nil, ""), 0, http.MethodGet, "/metrics", "")
		if strings.Contains(metrics, "ipfence_synced 1") || time.Now().After(deadline) {
			break
		}
	}
	for _, want := range []string{
		`ipfence_federation_refused_events_total{reason="forged-sender"} 1`,
		`ipfence_federation_refused_events_total{reason="bad-signature"} 3`,
		`ipfence_rejected_requests_total{reason="not-a-peer"} 4`,
		`ipfence_synced 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// Under HMAC with an operator secret the two credentials open disjoint
// parts of the API: a ctl user cannot forge node events.
func TestOperatorSecretIsApartFromTheFederation(t *testing.T) {
	c := startIDCluster(t, false)
	op := c.client("", c.opKey, "n2")
	if code, body := c.call(op, 0, http.MethodPost, federationPath, forgedDrain("n2", "n2", "n1")); code != http.StatusUnauthorized {
		t.Fatalf("the operator's secret on the federation: %d %s", code, body)
	}
	if code, _ := c.call(c.client("", c.fedKey, "n2"), 0, http.MethodGet, "/v1/status", ""); code != http.StatusUnauthorized {
		t.Fatalf("the federation's secret on the operator API: %d", code)
	}
	// A node's secret signing as a non-member is refused at the door.
	if code, _ := c.call(c.client("", c.fedKey, "mallory"), 0, http.MethodPost, federationPath, forgedDrain("mallory", "mallory", "n1")); code != http.StatusForbidden {
		t.Fatalf("mallory with the federation's secret: %d", code)
	}
	if c.drained("n1") {
		t.Fatal("a refused request drained n1")
	}
	if code, body := c.callIntent(c.client("", c.opKey, "ctl"), 0, "/v1/members/n1/drain"); code != http.StatusOK {
		t.Fatalf("the operator's drain: %d %s", code, body)
	}
	if !c.drained("n1") {
		t.Fatal("the operator's drain did not take")
	}
}

const federationPath = "/v1/federation/events"

// signedAs signs e with node's certificate's key, as its origin would.
func signedAs(t *testing.T, c *idCluster, node string, e federation.Event) federation.Event {
	t.Helper()
	keys, err := auth.LoadEventKeys(c.nodeCert[node][0], c.nodeCert[node][1], c.ca.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	e.Key = keys.KeyID()
	if e.Sig, err = keys.Sign(e.SignedBytes()); err != nil {
		t.Fatal(err)
	}
	return e
}

// certOf is node's certificate, DER.
func certOf(t *testing.T, c *idCluster, node string) []byte {
	t.Helper()
	keys, err := auth.LoadEventKeys(c.nodeCert[node][0], c.nodeCert[node][1], c.ca.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	return keys.Cert()
}
