package daemon

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture/config"
)

// logBuffer collects a node's log lines, safe for the node's goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// lines returns the log lines that contain every one of words.
func (l *logBuffer) lines(words ...string) []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		ok := line != ""
		for _, w := range words {
			ok = ok && strings.Contains(line, w)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

// testNode is one node running in this process on a memory provider.
type testNode struct {
	d      *Daemon
	url    string
	logs   *logBuffer
	cancel context.CancelFunc
	done   chan error
}

// nodeSpec shapes a single test node.
type nodeSpec struct {
	addresses int
	dataDir   string
	maxBody   string
	extra     string // YAML appended (timing, approval…)
	limits    Limits
}

// startNode writes a configuration and runs a node on a port of its own.
func startNode(t *testing.T, s nodeSpec) *testNode {
	t.Helper()
	dir := t.TempDir()
	if s.dataDir == "" {
		s.dataDir = filepath.Join(dir, "data")
	}
	if s.maxBody == "" {
		s.maxBody = "1MiB"
	}
	if s.addresses == 0 {
		s.addresses = 2
	}
	if err := os.WriteFile(filepath.Join(dir, "secret"), []byte(strings.Repeat("s", 40)), 0o600); err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for i := range s.addresses {
		addrs = append(addrs, fmt.Sprintf("10.1.%d.%d", i/250, 1+i%250))
	}
	yaml := fmt.Sprintf(`node: n1
listen: 127.0.0.1:1
advertise: http://127.0.0.1:1
data_dir: %s
federation: {secret_file: secret, max_body: %s}
providers:
  mem: {type: memory}
pools:
  - name: web
    provider: mem
    addresses: [%s]
    members:
      - {node: n1, priority: 1, target: eni-n1}
approval: {auto: true, providers: ["*"], kinds: ["*"], cidrs: ["10.0.0.0/8"], max_per_run: 100000}
%s`, s.dataDir, s.maxBody, strings.Join(addrs, ", "), s.extra)
	path := filepath.Join(dir, "n1.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	d, err := New(context.Background(), cfg, Options{
		Logger:   slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Listener: ln, Limits: s.limits,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &testNode{d: d, url: "http://" + ln.Addr().String(), logs: logs, cancel: cancel, done: make(chan error, 1)}
	go func() { n.done <- d.Run(ctx) }()
	t.Cleanup(n.stop)
	return n
}

func (n *testNode) stop() {
	if n.cancel == nil {
		return
	}
	n.cancel()
	n.cancel = nil
	select {
	case <-n.done:
	case <-time.After(20 * time.Second):
	}
}

// healthz returns /healthz's status code and body.
func (n *testNode) healthz(t *testing.T) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(n.url + "/healthz")
	if err != nil {
		t.Fatalf("healthz: %v", err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// eventually polls cond until it holds or limit passes.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
