package daemon_test

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture/auth"
	"github.com/ipfence/ipfence/capture/daemon"
	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/internal/loopback"
	"github.com/ipfence/ipfence/internal/testonly/testenv"
)

func binary(t testing.TB) string { return testenv.Binary(t) }

// settings of a test cluster.
type settings struct {
	nodes, addresses int
	hold             time.Duration // de-provision hold
	// ttl, when set, is the heartbeat TTL instead of the package's ttl:
	// for a test whose assertion is that nothing moves while it watches,
	// on a machine loaded enough to delay a heartbeat past 600 ms.
	ttl time.Duration
	// before, when set, runs once the configurations are written and
	// before any node starts (to mount a data folder, say).
	before func(dir string)
	// via, when set, gives the provider endpoint node's configuration
	// names, given the simulator's URL (a proxy in front of it, say).
	via func(node, sim string) string
	// etcd, when set, is an etcd client URL: the pool is on the etcd
	// epoch line.
	etcd string
}

// cluster is a simulator and nodes running as real processes on loopback.
type cluster struct {
	t       testing.TB
	bin     string
	dir     string
	sim     string
	simCmd  *exec.Cmd
	secret  []byte
	names   []string
	ports   []int
	procs   map[string]*exec.Cmd
	addrs   []netip.Addr
	signer  *http.Client
	mu      sync.Mutex
	outputs map[string]*bytes.Buffer
}

const (
	heartbeat = 200 * time.Millisecond
	ttl       = 600 * time.Millisecond
	reconcile = 500 * time.Millisecond
)

// newFrame is a cluster with nothing started yet: the binary under test,
// a folder, nodes n1…nN with their NIC names eni-n1…, and the addresses
// 10.0.1.10 onward (200 to a /24). Every simulator's cluster starts here.
func newFrame(t testing.TB, s settings) (*cluster, []string) {
	t.Helper()
	c := &cluster{t: t, bin: binary(t), dir: t.TempDir(), procs: map[string]*exec.Cmd{}, outputs: map[string]*bytes.Buffer{}}
	t.Cleanup(c.stop)
	var nics []string
	for i := range s.nodes {
		c.names = append(c.names, fmt.Sprintf("n%d", i+1))
		nics = append(nics, fmt.Sprintf("eni-n%d", i+1))
	}
	for i := range s.addresses {
		c.addrs = append(c.addrs, netip.AddrFrom4([4]byte{10, 0, byte(1 + i/200), byte(10 + i%200)}))
	}
	return c, nics
}

// federate writes the cluster's shared secret, makes the signing client
// the test talks to the nodes with, and picks the nodes' ports.
func (c *cluster) federate() {
	c.t.Helper()
	c.secret = []byte(strings.Repeat("k", 40))
	if err := os.WriteFile(filepath.Join(c.dir, "secret"), c.secret, 0o600); err != nil {
		c.t.Fatal(err)
	}
	c.signer = &http.Client{Timeout: 10 * time.Second, Transport: (&auth.Signer{Secret: c.secret, Node: "test"}).Transport(http.DefaultTransport)}
	ports, err := loopback.FreePorts(len(c.names))
	if err != nil {
		c.t.Fatal(err)
	}
	c.ports = ports
}

func startCluster(t testing.TB, s settings) *cluster {
	t.Helper()
	c, nics := newFrame(t, s)
	c.sim = c.spawn("cloudsim", "cloudsim", "--latency", "none", "--listen", "127.0.0.1:0", "--nics", strings.Join(nics, ","), "--subnet", "10.0.0.0/16")
	c.federate()
	for i, n := range c.names {
		if err := os.WriteFile(c.configPath(n), []byte(c.config(i, s)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if s.before != nil {
		s.before(c.dir)
	}
	for _, n := range c.names {
		c.start(n)
	}
	c.waitSynced(generous)
	return c
}

// waitSynced waits until every node has synced: at a cluster's first
// start a node syncs once every peer has answered its pull, so a test
// that kills a node right after the first acquisition would otherwise
// kill it before its peers could learn from it — and a node that cannot
// learn stays passive by design (TestClusterKillHolder saw no failover in
// 20 s when n1 died before n2 and n3 had pulled from it).
func (c *cluster) waitSynced(d time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for _, n := range c.names {
		for {
			var st daemon.Status
			if c.api(n, http.MethodGet, "/v1/status", nil, &st) == http.StatusOK && st.Synced {
				break
			}
			if time.Now().After(deadline) {
				c.t.Fatalf("%s did not sync within %v of the cluster's start", n, d)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func (c *cluster) configPath(n string) string { return filepath.Join(c.dir, n+".yaml") }

func (c *cluster) config(i int, s settings) string {
	var b strings.Builder
	fmt.Fprintf(&b, "node: %s\nlisten: 127.0.0.1:%d\ndata_dir: %s-data\npeers:\n", c.names[i], c.ports[i], c.names[i])
	for j, n := range c.names {
		if j != i {
			fmt.Fprintf(&b, "  - name: %s\n    url: http://127.0.0.1:%d\n", n, c.ports[j])
		}
	}
	endpoint := c.sim
	if s.via != nil {
		endpoint = s.via(c.names[i], c.sim)
	}
	fmt.Fprintf(&b, "federation:\n  secret_file: secret\n  max_body: 64KiB\nproviders:\n  sim:\n    type: cloudsim\n    endpoint: %s\n", endpoint)
	b.WriteString("pools:\n  - name: web\n    provider: sim\n    group: g1\n    addresses: [")
	for k, a := range c.addrs {
		if k > 0 {
			b.WriteString(", ")
		}
		b.WriteString(a.String())
	}
	b.WriteString("]\n")
	if s.etcd != "" {
		b.WriteString("    epoch_line: etcd\n")
	}
	b.WriteString("    members:\n")
	for j, n := range c.names {
		fmt.Fprintf(&b, "      - {node: %s, priority: %d, target: eni-%s}\n", n, j+1, n)
	}
	if s.etcd != "" {
		fmt.Fprintf(&b, "etcd:\n  endpoints: [%s]\n  prefix: /test/\n  session_ttl: 2s\n", s.etcd)
	}
	b.WriteString("approval:\n  auto: true\n  providers: [\"*\"]\n  kinds: [\"*\"]\n  cidrs: [\"10.0.0.0/16\"]\n  max_per_run: 100000\n")
	fmt.Fprintf(&b, "timing:\n  reconcile_interval: %s\n  heartbeat_interval: %s\n  heartbeat_ttl: %s\n  deprovision_hold: %s\n", reconcile, heartbeat, cmp.Or(s.ttl, ttl), s.hold)
	return b.String()
}

// spawn runs the binary and returns the URL of its "listening on" line.
func (c *cluster) spawn(name string, args ...string) string {
	c.t.Helper()
	cmd := exec.Command(c.bin, args...)
	cmd.Dir = c.dir
	out := &bytes.Buffer{}
	c.mu.Lock()
	c.outputs[name] = out
	c.mu.Unlock()
	cmd.Stderr = lockedWriter{&c.mu, out}
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	line, err := bufio.NewReader(pipe).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		c.t.Fatalf("%s did not start: %v\n%s", name, err, out)
	}
	go io.Copy(io.Discard, pipe)
	if name == "cloudsim" {
		c.simCmd = cmd
	} else {
		c.procs[name] = cmd
	}
	return strings.TrimPrefix(strings.TrimSpace(line), "listening on ")
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (c *cluster) start(n string) {
	c.spawn(n, "serve", "--config", c.configPath(n), "--log-level", "info")
}

// signal sends sig to node n's process.
func (c *cluster) signal(n string, sig syscall.Signal) {
	if err := c.procs[n].Process.Signal(sig); err != nil {
		c.t.Fatal(err)
	}
	if sig == syscall.SIGKILL {
		c.procs[n].Wait()
		delete(c.procs, n)
	}
}

func (c *cluster) stop() {
	for _, p := range c.procs {
		p.Process.Signal(syscall.SIGCONT)
		p.Process.Signal(syscall.SIGTERM)
	}
	for n, p := range c.procs {
		done := make(chan error, 1)
		go func() { done <- p.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			p.Process.Kill()
			c.t.Errorf("%s did not stop within 10s of SIGTERM", n)
		}
	}
	if c.simCmd != nil {
		c.simCmd.Process.Signal(syscall.SIGTERM)
		c.simCmd.Wait()
	}
	if c.t.Failed() {
		c.mu.Lock()
		for n, out := range c.outputs {
			c.t.Logf("--- %s ---\n%s", n, tail(out.String(), 4000))
		}
		c.mu.Unlock()
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func (c *cluster) endpoint(n string) string {
	for i, m := range c.names {
		if m == n {
			return fmt.Sprintf("http://127.0.0.1:%d", c.ports[i])
		}
	}
	c.t.Fatalf("no node %s", n)
	return ""
}

// api calls node n's API, signed.
func (c *cluster) api(n, method, path string, body, out any) int {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.endpoint(n)+path, rd)
	resp, err := c.signer.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s on %s: %v", method, path, n, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(data, out); err != nil {
			c.t.Fatalf("%s %s on %s: %v\n%s", method, path, n, err, data)
		}
	}
	return resp.StatusCode
}

// intent sends an operator's intent (drain or undrain of member) through
// node n as ctl does, sending it again while the node answers 503 (it
// could not yet read or reach a majority of the cluster: nothing was
// taken, or not yet for sure), and fails the test on any other answer or
// if it is never taken.
func (c *cluster) intent(n, verb, member string) {
	c.t.Helper()
	path := "/v1/members/" + member + "/" + verb
	for deadline := time.Now().Add(generous); ; time.Sleep(50 * time.Millisecond) {
		code := c.api(n, http.MethodPost, path, nil, nil)
		if code == http.StatusOK {
			return
		}
		if code != http.StatusServiceUnavailable || time.Now().After(deadline) {
			c.t.Fatalf("%s %s through %s: %d", verb, member, n, code)
		}
	}
}

func (c *cluster) status(n string) daemon.Status {
	var st daemon.Status
	if code := c.api(n, http.MethodGet, "/v1/status", nil, &st); code != http.StatusOK {
		c.t.Fatalf("status of %s: %d", n, code)
	}
	return st
}

// mutations reads the simulator's authoritative history.
func (c *cluster) mutations() []provider.Mutation {
	c.t.Helper()
	resp, err := http.Get(c.sim + "/admin/mutations")
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var ms []provider.Mutation
	if err := json.NewDecoder(resp.Body).Decode(&ms); err != nil {
		c.t.Fatal(err)
	}
	return ms
}

// holders asks the simulator where every address is, by NIC.
func (c *cluster) holders() map[netip.Addr]string {
	c.t.Helper()
	resp, err := http.Get(c.sim + "/admin/state")
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		NICs []struct {
			ID        string       `json:"id"`
			Secondary []netip.Addr `json:"secondaryIps"`
		} `json:"nics"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		c.t.Fatal(err)
	}
	out := map[netip.Addr]string{}
	for _, n := range st.NICs {
		for _, a := range n.Secondary {
			out[a] = n.ID
		}
	}
	return out
}

// allOn reports whether every address is on nic.
func (c *cluster) allOn(nic string) bool {
	h := c.holders()
	for _, a := range c.addrs {
		if h[a] != nic {
			return false
		}
	}
	return true
}

// waitAllOn waits until every address is on nic and returns how long it
// took.
func (c *cluster) waitAllOn(nic string, limit time.Duration) time.Duration {
	c.t.Helper()
	start := time.Now()
	for !c.allOn(nic) {
		if time.Since(start) > limit {
			c.t.Fatalf("addresses not all on %s after %v: %v", nic, limit, c.holders())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// checkFence: no mutation that touched an address's capture carries an
// epoch lower than one already applied for the address. A vacating node's
// late forwarding clean-up of its own NIC, no longer the holder, is logged:
// the nodes' gates race (see provider.Stale).
func checkFence(t testing.TB, ms []provider.Mutation) {
	t.Helper()
	for _, s := range provider.StaleMutations(ms) {
		m := s.Mutation
		if s.Effective {
			t.Fatalf("mutation %d (%s %s on %s) carries epoch %d after epoch %d", s.Index, m.Call, m.Address, m.NIC, m.Epoch, s.High)
		}
		t.Logf("harmless stale mutation %d (%s %s on %s, not the holder) at epoch %d after %d", s.Index, m.Call, m.Address, m.NIC, m.Epoch, s.High)
	}
}
