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
	cfg    *config.Node
	limits Limits
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

// startNode runs a node alone (see startNodes).
func startNode(t *testing.T, s nodeSpec) *testNode { return startNodes(t, 1, s)[0] }

// startNodes writes the configurations of a cluster of k nodes (n1 first
// by priority) and runs each on a port of its own, each with a memory
// provider of its own.
func startNodes(t *testing.T, k int, s nodeSpec) []*testNode {
	t.Helper()
	dir := t.TempDir()
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
	lns := make([]net.Listener, k)
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
	}
	var nodes []*testNode
	for i := range k {
		name := fmt.Sprintf("n%d", i+1)
		data := s.dataDir
		if data == "" || i > 0 {
			data = filepath.Join(dir, name+"-data")
		}
		var peers, members strings.Builder
		for j := range k {
			if j != i {
				fmt.Fprintf(&peers, "  - {name: n%d, url: http://%s}\n", j+1, lns[j].Addr())
			}
			fmt.Fprintf(&members, "      - {node: n%d, priority: %d, target: eni-n%d}\n", j+1, j+1, j+1)
		}
		peerList := "peers: []\n"
		if k > 1 {
			peerList = "peers:\n" + peers.String()
		}
		yaml := fmt.Sprintf(`node: %s
listen: %s
data_dir: %s
%sfederation: {secret_file: secret, max_body: %s}
providers:
  mem: {type: memory}
pools:
  - name: web
    provider: mem
    addresses: [%s]
    members:
%sapproval: {auto: true, providers: ["*"], kinds: ["*"], cidrs: ["10.0.0.0/8"], max_per_run: 100000}
%s`, name, lns[i].Addr(), data, peerList, s.maxBody, strings.Join(addrs, ", "), members.String(), s.extra)
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		logs := &logBuffer{}
		d, err := New(context.Background(), cfg, Options{
			Logger:   slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
			Listener: lns[i], Limits: s.limits,
		})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, &testNode{cfg: cfg, limits: s.limits, d: d, url: "http://" + lns[i].Addr().String(), logs: logs, done: make(chan error, 1)})
	}
	for _, n := range nodes {
		ctx, cancel := context.WithCancel(context.Background())
		n.cancel = cancel
		go func() { n.done <- n.d.Run(ctx) }()
		t.Cleanup(n.stop)
	}
	return nodes
}

// restart stops the node and starts it again on its data and port.
func (n *testNode) restart(t *testing.T) {
	t.Helper()
	n.stop()
	ln, err := net.Listen("tcp", strings.TrimPrefix(n.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(context.Background(), n.cfg, Options{
		Logger:   slog.New(slog.NewTextHandler(n.logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Listener: ln, Limits: n.limits,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.d, n.cancel, n.done = d, cancel, make(chan error, 1)
	go func() { n.done <- d.Run(ctx) }()
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
