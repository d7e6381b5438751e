package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/capture/config"
	"github.com/ipfence/ipfence/capture/daemon"
	"github.com/ipfence/ipfence/internal/cli"
	"github.com/ipfence/ipfence/internal/testonly/testpki"
)

// startCtlNode runs one node in this process, federated over mutual TLS
// or HMAC, with an operator secret apart, and returns its endpoint.
func startCtlNode(t *testing.T, dir string, ca *testpki.CA) string {
	t.Helper()
	for name, key := range map[string]string{"fed": strings.Repeat("f", 40), "op": strings.Repeat("o", 40)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(key), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	scheme, fed := "http", "federation: {secret_file: fed, operator_secret_file: op}"
	if ca != nil {
		cert, key := ca.Issue(t, "n1", x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
		scheme = "https"
		fed = fmt.Sprintf("federation:\n  tls: {cert_file: %s, key_file: %s, ca_file: %s}\n  operator_secret_file: op", cert, key, ca.CAFile())
	}
	yaml := fmt.Sprintf(`node: n1
listen: 127.0.0.1:%d
advertise: %s://127.0.0.1:%d
data_dir: n1-data
%s
providers:
  mem: {type: memory}
pools:
  - name: web
    provider: mem
    addresses: [10.0.0.10]
    members:
      - {node: n1, priority: 1, target: eni-n1}
timing: {heartbeat_interval: 50ms, heartbeat_ttl: 200ms, reconcile_interval: 200ms}
`, port, scheme, port, fed)
	path := filepath.Join(dir, "n1.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d, err := daemon.New(ctx, cfg, daemon.Options{Listener: l})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return fmt.Sprintf("%s://127.0.0.1:%d", scheme, port)
}

func ctl(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := runCtl(args, &out, &errb)
	return code, out.String(), errb.String()
}

// Issue 14: ipfence ctl must work against a cluster under mutual TLS, with
// the operator's credential.
func TestCtlMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "cluster")
	ep := startCtlNode(t, dir, ca)
	cert, key := ca.Issue(t, "operator", x509.ExtKeyUsageClientAuth)
	op := filepath.Join(dir, "op")
	code, out, errs := ctl("--endpoint", ep, "--cert", cert, "--key", key, "--ca", ca.CAFile(), "--token-file", op, "--json", "drain", "n1")
	if code != cli.ExitValid || !strings.Contains(out, `"intent": "drain"`) {
		t.Fatalf("drain over mutual TLS: %d %q %q", code, out, errs)
	}
	code, out, errs = ctl("--endpoint", ep, "--cert", cert, "--key", key, "--ca", ca.CAFile(), "--token-file", op, "--json", "status")
	if code != cli.ExitValid || !strings.Contains(out, `"node": "n1"`) || !strings.Contains(out, `"drained": true`) {
		t.Fatalf("status over mutual TLS: %d %q %q", code, out, errs)
	}
	// The certificate alone is not the operator's credential here.
	code, _, errs = ctl("--endpoint", ep, "--cert", cert, "--key", key, "--ca", ca.CAFile(), "status")
	if code != cli.ExitError || !strings.Contains(errs, "401") {
		t.Fatalf("without the operator's secret: %d %q", code, errs)
	}
	// Bad combinations are refused before anything is sent.
	for _, args := range [][]string{
		{"--endpoint", ep, "--cert", cert, "status"},
		{"--endpoint", strings.Replace(ep, "https", "http", 1), "--cert", cert, "--key", key, "--ca", ca.CAFile(), "status"},
	} {
		if code, _, errs := ctl(args...); code != cli.ExitError || !strings.Contains(errs, "--") {
			t.Errorf("%v: %d %q", args, code, errs)
		}
	}
}

// Under HMAC, ctl signs with the operator's secret; the federation's
// secret is refused by the operator API.
func TestCtlOperatorSecret(t *testing.T) {
	dir := t.TempDir()
	ep := startCtlNode(t, dir, nil)
	if code, out, errs := ctl("--endpoint", ep, "--token-file", filepath.Join(dir, "op"), "--json", "status"); code != cli.ExitValid || !strings.Contains(out, `"node": "n1"`) {
		t.Fatalf("with the operator's secret: %d %q %q", code, out, errs)
	}
	if code, _, errs := ctl("--endpoint", ep, "--token-file", filepath.Join(dir, "fed"), "status"); code != cli.ExitError || !strings.Contains(errs, "401") {
		t.Fatalf("with the federation's secret: %d %q", code, errs)
	}
}
