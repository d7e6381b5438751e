package etcdsuite

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/ipfence/ipfence/internal/loopback"
	"github.com/ipfence/ipfence/verify/control"
	"github.com/ipfence/ipfence/verify/harness"
	"github.com/ipfence/ipfence/verify/nemesis"
	"github.com/ipfence/ipfence/verify/netfault"
)

// Timing of the members: etcd's defaults (heartbeat 100 ms, election
// 1 s), so that what the test finds is what a default cluster does.
const (
	heartbeatMS = 100
	electionMS  = 1000
	// startTimeout bounds a cluster's first start: three members must
	// find each other and elect a leader.
	startTimeout = 60 * time.Second
	// restartWait bounds how long a restarted member gets to open its
	// client port before the nemesis moves on.
	restartWait = 15 * time.Second
)

// senderHeader is the header etcd's raft transport puts on every request
// between members, naming the sender's member ID in hex. The peer proxies
// read it to tell members apart, since every member dials one advertised
// address per peer.
const senderHeader = "X-Server-From"

// cluster is the etcd cluster under test: one process per member on
// loopback, clients direct to each member's client port, and peer traffic
// through a HeaderMesh so that partitions cut raft.
type cluster struct {
	bin     string
	dir     string
	nodes   []string
	client  map[string]string // node → its client URL
	peer    map[string]string // node → the host:port it listens on for peers
	mesh    *netfault.HeaderMesh
	args    map[string][]string
	version string

	// The members' processes: Pause, Resume and Kill.
	nemesis.Procs

	mu   sync.Mutex // guards logs, and args once the run has started
	logs map[string]*os.File
}

// startAttempts bounds the fresh starts of a cluster whose member could
// not bind its port: etcd is an external binary that cannot be handed a
// bound socket, so its ports are chosen free and another program may take
// one before etcd binds it.
const startAttempts = 3

// startCluster starts n members and waits until each answers a
// linearizable read, on fresh ports and a fresh data folder again when a
// member could not bind its port. On error it stops whatever it started.
func startCluster(ctx context.Context, bin, dir string, n int, token string) (*cluster, error) {
	return startNamed(ctx, bin, dir, "n", n, token)
}

// startNamed is startCluster with the members named prefix1, prefix2, …
func startNamed(ctx context.Context, bin, dir, prefix string, n int, token string) (*cluster, error) {
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --version: %w", bin, err)
	}
	version := strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	for attempt := 1; ; attempt++ {
		c, err := startOnce(ctx, bin, dir, prefix, n, fmt.Sprintf("%s-%d", token, attempt))
		if err == nil {
			c.version = version
			return c, nil
		}
		if attempt == startAttempts || !c.bindFailed() || ctx.Err() != nil {
			return nil, err
		}
		slog.Warn("an etcd member could not bind its port; starting the cluster again on fresh ports", "attempt", attempt, "err", err)
		// The members' logs stay (appended to); their data goes, since a
		// new cluster cannot start on a half-made one.
		if err := os.RemoveAll(filepath.Join(dir, "data")); err != nil {
			return nil, err
		}
	}
}

// bindFailed says a member's log reports that its port was taken.
func (c *cluster) bindFailed() bool {
	for _, node := range c.nodes {
		b, _ := os.ReadFile(c.logPath(node))
		if strings.Contains(string(b), "address already in use") {
			return true
		}
	}
	return false
}

// startOnce is one attempt of startCluster. On error it stops whatever it
// started and returns the stopped cluster, for its logs.
func startOnce(ctx context.Context, bin, dir, prefix string, n int, token string) (c *cluster, err error) {
	c = &cluster{bin: bin, dir: dir, client: map[string]string{}, peer: map[string]string{}, args: map[string][]string{},
		logs: map[string]*os.File{}}
	defer func() {
		if err != nil {
			c.stop()
		}
	}()
	ports, err := loopback.FreePorts(2 * n)
	if err != nil {
		return c, err
	}
	targets := map[string]string{}
	for i := range n {
		node := fmt.Sprintf("%s%d", prefix, i+1)
		c.nodes = append(c.nodes, node)
		c.client[node] = "http://127.0.0.1:" + strconv.Itoa(ports[2*i])
		c.peer[node] = "127.0.0.1:" + strconv.Itoa(ports[2*i+1])
		targets[node] = c.peer[node]
	}
	if c.mesh, err = netfault.NewHeaderMesh(targets, senderHeader); err != nil {
		return c, err
	}
	var initial []string
	for _, node := range c.nodes {
		initial = append(initial, node+"=http://"+c.mesh.Addr(node))
	}
	for _, node := range c.nodes {
		c.args[node] = []string{
			"--name", node,
			"--data-dir", c.dataDir(node),
			"--listen-client-urls", c.client[node], "--advertise-client-urls", c.client[node],
			"--listen-peer-urls", "http://" + c.peer[node],
			// Every other member dials this member's proxy.
			"--initial-advertise-peer-urls", "http://" + c.mesh.Addr(node),
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new",
			"--initial-cluster-token", token,
			"--heartbeat-interval", strconv.Itoa(heartbeatMS),
			"--election-timeout", strconv.Itoa(electionMS),
			"--logger", "zap", "--log-outputs", "stderr",
		}
		if err := c.start(node); err != nil {
			return c, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for _, node := range c.nodes {
		if err := c.waitReady(ctx, node); err != nil {
			return c, err
		}
	}
	// Teach the proxies which member ID is which node.
	cl, err := c.dial(c.nodes[0])
	if err != nil {
		return c, err
	}
	defer cl.Close()
	members, err := cl.MemberList(ctx)
	if err != nil {
		return c, fmt.Errorf("listing members: %w", err)
	}
	for _, m := range members.Members {
		c.mesh.SetSender(strconv.FormatUint(m.ID, 16), m.Name)
	}
	return c, nil
}

// dialMember opens a client of one member alone (its client URL), so that
// what a client sees is what that member serves.
func dialMember(url string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints: []string{url},
		Logger:    zap.NewNop(),
		// Notice a paused or cut-off member within seconds rather than
		// at TCP's pace.
		DialKeepAliveTime:    time.Second,
		DialKeepAliveTimeout: time.Second,
	})
}

// waitMemberReady waits until the member at url answers a linearizable
// read: it runs, it found its peers, and there is a leader. running says
// whether its process still runs; tail is what an error adds of its log.
func waitMemberReady(ctx context.Context, node, url string, running func() bool, tail func() string) error {
	cl, err := dialMember(url)
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := cl.Get(rctx, "ipfence-ready")
		cancel()
		if err == nil {
			return nil
		}
		if !running() {
			return fmt.Errorf("etcd member %s exited: %s", node, tail())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcd member %s did not serve within %v (%v): %s", node, startTimeout, err, tail())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// dial opens a client of node's member alone.
func (c *cluster) dial(node string) (*clientv3.Client, error) { return dialMember(c.client[node]) }

// waitReady waits until node's member serves (waitMemberReady).
func (c *cluster) waitReady(ctx context.Context, node string) error {
	return waitMemberReady(ctx, node, c.client[node], func() bool { return c.Running(node) }, func() string {
		return fmt.Sprintf("%s; see %s", nemesis.LogTail(c.logPath(node), 3), c.logPath(node))
	})
}

func (c *cluster) logPath(node string) string {
	return filepath.Join(c.dir, harness.LogDir, node+".log")
}

// start starts node's process with its output appended to its log.
func (c *cluster) start(node string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	logf := c.logs[node]
	if logf == nil {
		var err error
		if logf, err = os.OpenFile(c.logPath(node), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644); err != nil {
			return err
		}
		c.logs[node] = logf
	}
	// args may change (rejoin) while the run goes on.
	cmd := exec.Command(c.bin, c.args[node]...)
	cmd.Dir = c.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group: Ctrl-C goes to the harness, which heals and
	// stops the members itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting etcd member %s: %w", node, err)
	}
	c.Add(node, cmd)
	return nil
}

// Restart starts node's member again on its data and waits until its
// client port accepts connections. Whether it then serves depends on
// whether it can reach a quorum, which is the system's business, not the
// nemesis's.
func (c *cluster) Restart(ctx context.Context, node string) error {
	if c.Running(node) {
		return nil
	}
	if err := c.start(node); err != nil {
		return err
	}
	addr := strings.TrimPrefix(c.client[node], "http://")
	deadline := time.Now().Add(restartWait)
	for time.Now().Before(deadline) {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		if !c.Running(node) {
			return fmt.Errorf("etcd member %s exited after restart: %s; see %s", node, nemesis.LogTail(c.logPath(node), 3), c.logPath(node))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	slog.Warn("restarted etcd member does not listen yet", "node", node, "after", restartWait)
	return nil
}

// stop stops every member (SIGCONT first, in case one is paused, then
// SIGTERM, then SIGKILL after a while), closes the proxies and the logs.
func (c *cluster) stop() {
	c.StopAll(10 * time.Second)
	if c.mesh != nil {
		_ = c.mesh.Close()
	}
	c.mu.Lock()
	for _, f := range c.logs {
		_ = f.Close()
	}
	c.mu.Unlock()
}

// meshNet cuts the cluster's peer links through the header mesh.
type meshNet struct {
	m    *netfault.HeaderMesh
	mode netfault.Mode
}

func (n meshNet) Partition(_ context.Context, g netfault.Grudge) error {
	n.m.Apply(g, n.mode)
	return nil
}

func (n meshNet) Heal(context.Context) error { n.m.Heal(); return nil }

// peerURL is the URL node's member advertises to its peers: its proxy.
func (c *cluster) peerURL(node string) string { return "http://" + c.mesh.Addr(node) }

// proc is node's process, a child of this one, as the control layer
// reaches it on this machine.
func (c *cluster) proc(ctx context.Context, node string) (control.Remote, control.Proc, error) {
	r := &control.Local{Node: node}
	pid, ok := c.Pid(node)
	if !ok {
		return r, control.Proc{}, fmt.Errorf("etcd member %s: %w", node, control.ErrGone)
	}
	p, err := control.ProcOf(ctx, r, pid)
	return r, p, err
}

// stopWiped kills node's member and removes its data folder.
func (c *cluster) stopWiped(_ context.Context, node string) error {
	if c.Running(node) {
		if err := c.Kill(node); err != nil {
			return err
		}
	}
	return os.RemoveAll(c.dataDir(node))
}

func (c *cluster) dataDir(node string) string { return filepath.Join(c.dir, "data", node) }

// rejoin teaches the proxies node's new member ID, changes its command
// line to join the existing cluster, and starts it on a fresh data folder.
func (c *cluster) rejoin(ctx context.Context, node, initial string, id uint64) error {
	c.mesh.SetSender(hexID(id), node)
	c.mu.Lock()
	args, err := rejoinArgs(c.args[node], initial)
	if err == nil {
		c.args[node] = args
	}
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if err := os.RemoveAll(c.dataDir(node)); err != nil {
		return err
	}
	return c.Restart(ctx, node)
}

// confirmedProcs is the loopback members' processes with pause, resume
// and kill verified, as control.Procs verifies them over SSH: each signal
// is followed by reads of the pid's state until it shows the fault took
// effect (stopped, running again, gone), and each finding goes into the
// ledger, so that a fault that did not take effect makes the run unknown.
type confirmedProcs struct {
	c *cluster
	l *control.Ledger
}

// Pause stops node's member with SIGSTOP and confirms it stopped.
func (p confirmedProcs) Pause(node string) error {
	return signalMember(context.Background(), p.c, node, "STOP", control.Stopped, p.l, "pause")
}

// Resume continues node's member and confirms it runs; a member that is
// not running (killed meanwhile) is as resumed as it gets.
func (p confirmedProcs) Resume(node string) error {
	if !p.c.Running(node) {
		return nil
	}
	return signalMember(context.Background(), p.c, node, "CONT", control.Running, p.l, "resume")
}

// Kill kills node's member with SIGKILL, confirms the pid is gone, and
// reaps it.
func (p confirmedProcs) Kill(node string) error {
	if !p.c.Running(node) {
		return p.c.Kill(node) // its error: not running
	}
	err := signalMember(context.Background(), p.c, node, "KILL", control.Gone, p.l, "kill")
	return errors.Join(err, p.c.Kill(node))
}

// Restart starts node's member again and waits until it serves.
func (p confirmedProcs) Restart(ctx context.Context, node string) error {
	return p.c.Restart(ctx, node)
}
