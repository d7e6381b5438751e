package daemon_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture/auth"
	"github.com/ipfence/ipfence/capture/config"
	"github.com/ipfence/ipfence/capture/daemon"
	"github.com/ipfence/ipfence/internal/testonly/testpki"
)

// Two nodes federated over mutual TLS instead of a shared secret: they
// hear each other, an operator with a certificate from the cluster's CA is
// served, and a client without one is refused at the handshake.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "cluster")
	var lns []net.Listener
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, l)
	}
	port := func(i int) int { return lns[i].Addr().(*net.TCPAddr).Port }
	names := []string{"n1", "n2"}
	ctx, cancel := context.WithCancel(context.Background())
	var done []chan error
	for i, n := range names {
		cert, key := ca.Issue(t, n, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
		yaml := fmt.Sprintf(`node: %s
listen: 127.0.0.1:%d
advertise: https://127.0.0.1:%d
data_dir: %s-data
peers:
  - name: %s
    url: https://127.0.0.1:%d
federation:
  tls: {cert_file: %s, key_file: %s, ca_file: %s}
providers:
  mem: {type: memory}
pools:
  - name: web
    provider: mem
    addresses: [10.0.0.10]
    members:
      - {node: n1, priority: 1, target: eni-n1}
      - {node: n2, priority: 2, target: eni-n2}
timing: {heartbeat_interval: 50ms, heartbeat_ttl: 200ms, reconcile_interval: 200ms}
`, n, port(i), port(i), n, names[1-i], port(1-i), cert, key, ca.CAFile())
		path := filepath.Join(dir, n+".yaml")
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
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
	defer func() {
		cancel()
		for _, ch := range done {
			<-ch
		}
	}()

	opCert, opKey := ca.Issue(t, "operator", x509.ExtKeyUsageClientAuth)
	tc, err := auth.ClientTLS(opCert, opKey, ca.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	op := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	status := func() (daemon.Status, error) {
		var st daemon.Status
		resp, err := op.Get(fmt.Sprintf("https://127.0.0.1:%d/v1/status", port(0)))
		if err != nil {
			return st, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return st, fmt.Errorf("status %s", resp.Status)
		}
		return st, json.NewDecoder(resp.Body).Decode(&st)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := status()
		if err == nil && len(st.Members) == 2 && st.Members[1].Node == "n2" && st.Members[1].Heard && !st.Members[1].Stale {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("n1 never heard n2 over mutual TLS: %+v %v", st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Certificate())
	bare := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}}}
	if resp, err := bare.Get(fmt.Sprintf("https://127.0.0.1:%d/v1/status", port(0))); err == nil {
		resp.Body.Close()
		t.Fatalf("a client without a certificate was answered %s", resp.Status)
	}
}
