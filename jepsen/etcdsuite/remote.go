package etcdsuite

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ipfence/ipfence/verify/control"
	"github.com/ipfence/ipfence/verify/harness"
)

// The ports members use on remote nodes: etcd's own defaults, since each
// member has a machine (an address) of its own.
const (
	remoteClientPort = 2379
	remotePeerPort   = 2380
)

// DefaultRemoteDir is the folder on each node that holds a member's
// binary, data and log, as RemoteDir/<node>. It is wiped at the start of
// a run. The node name is in the path so that nodes sharing a file system
// (containers, namespaces of one machine) do not share a member's files.
const DefaultRemoteDir = "/var/tmp/ipfence-etcd"

// maxRemoteLog bounds the member log fetched into the store.
const maxRemoteLog = 64 << 20

// remoteCluster is an etcd cluster on nodes reached through remotes: the
// binary uploaded to each, one member per node started as a daemon,
// clients dialled straight to the nodes' addresses, partitions with
// nftables on the nodes, and every fault confirmed.
type remoteCluster struct {
	dir     string // the run's folder, here
	nodes   []control.Node
	names   []string
	remotes map[string]control.Remote
	base    map[string]string // node → its folder on the node
	client  map[string]string // node → client URL
	peer    map[string]string // node → peer URL
	args    map[string][]string
	version string

	procs  *control.Procs
	net    *control.NftNet
	ledger *control.Ledger
}

// readNodesFile reads and checks a nodes file for the test.
func readNodesFile(file string) ([]control.Node, error) {
	return control.ReadNodesFile(file, 1, 9, "etcd's test")
}

// startRemote installs and starts a member on each node and waits until
// every one serves a linearizable read. On error it stops whatever it
// started and fetches the members' logs into the run's folder.
func startRemote(ctx context.Context, o Options, dir, token string) (c *remoteCluster, err error) {
	nodes, err := readNodesFile(o.NodesFile)
	if err != nil {
		return nil, err
	}
	c = &remoteCluster{dir: dir, nodes: nodes, remotes: map[string]control.Remote{}, base: map[string]string{},
		client: map[string]string{}, peer: map[string]string{}, args: map[string][]string{}, ledger: &control.Ledger{}}
	defer func() {
		if err != nil {
			c.stop()
		}
	}()
	opts := control.SSHOptions{KnownHosts: o.KnownHosts}
	var initial []string
	for _, n := range nodes {
		r, err := control.NewSSH(n, opts)
		if err != nil {
			return c, err
		}
		c.names = append(c.names, n.Name)
		c.remotes[n.Name] = r
		c.base[n.Name] = path.Join(o.RemoteDir, n.Name)
		c.client[n.Name] = "http://" + net.JoinHostPort(n.Address, strconv.Itoa(remoteClientPort))
		c.peer[n.Name] = "http://" + net.JoinHostPort(n.Address, strconv.Itoa(remotePeerPort))
		initial = append(initial, n.Name+"="+c.peer[n.Name])
	}
	if c.net, err = control.NewNftNet(nodes, c.remotes, c.ledger); err != nil {
		return c, err
	}
	daemons := map[string]control.Daemon{}
	for _, n := range nodes {
		if err := c.install(ctx, n, o.Binary); err != nil {
			return c, err
		}
		peer := c.peer[n.Name]
		c.args[n.Name] = []string{
			"--name", n.Name,
			"--data-dir", path.Join(c.base[n.Name], "data"),
			"--listen-client-urls", c.client[n.Name], "--advertise-client-urls", c.client[n.Name],
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new",
			"--initial-cluster-token", token,
			"--heartbeat-interval", strconv.Itoa(heartbeatMS),
			"--election-timeout", strconv.Itoa(electionMS),
			"--logger", "zap", "--log-outputs", "stderr",
		}
		daemons[n.Name] = control.Daemon{Name: "etcd", Dir: c.base[n.Name],
			Argv: append([]string{path.Join(c.base[n.Name], "etcd")}, c.args[n.Name]...)}
	}
	if c.procs, err = control.NewProcs(c.remotes, daemons, c.ledger); err != nil {
		return c, err
	}
	c.procs.Ready = c.listening
	// A run that died may have left its cuts on the nodes.
	if err := c.net.Heal(ctx); err != nil {
		return c, fmt.Errorf("clearing the nodes' partition rules: %w", err)
	}
	for _, n := range c.names {
		if err := c.procs.Start(ctx, n); err != nil {
			return c, err
		}
	}
	rctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for _, n := range c.names {
		if err := c.waitReady(rctx, n); err != nil {
			return c, err
		}
	}
	return c, nil
}

// install wipes node's folder and uploads the etcd binary into it: a
// fresh data folder for a fresh cluster, and the same etcd on every node.
func (c *remoteCluster) install(ctx context.Context, n control.Node, bin string) error {
	r := c.remotes[n.Name]
	base := c.base[n.Name]
	// Stop a member a dead run left, which would hold the ports.
	if p, err := control.Find(ctx, r, control.Daemon{Name: "etcd", Dir: base, Argv: []string{"etcd"}}); err == nil {
		if err := control.Stop(ctx, r, p, 5*time.Second); err != nil {
			return fmt.Errorf("stopping the etcd a previous run left on %s: %w", n.Name, err)
		}
	}
	if _, err := control.Output(ctx, r, "rm -rf "+control.Quote(base)+" && mkdir -p "+control.Quote(base)); err != nil {
		return fmt.Errorf("preparing %s on %s: %w", base, n.Name, err)
	}
	f, err := os.Open(bin)
	if err != nil {
		return err
	}
	defer f.Close()
	remoteBin := path.Join(base, "etcd")
	if err := control.Upload(ctx, r, f, remoteBin, 0o755); err != nil {
		return fmt.Errorf("uploading %s to %s:%s: %w", bin, n.Name, remoteBin, err)
	}
	out, err := control.Output(ctx, r, control.Line(remoteBin, "--version"))
	if err != nil {
		return fmt.Errorf("etcd on %s: %w", n.Name, err)
	}
	c.version = strings.TrimSpace(strings.SplitN(out, "\n", 2)[0])
	return nil
}

func (c *remoteCluster) dial(node string) (*clientv3.Client, error) {
	return dialMember(c.client[node])
}

// waitReady waits until node answers a linearizable read.
func (c *remoteCluster) waitReady(ctx context.Context, node string) error {
	return waitMemberReady(ctx, node, c.client[node], func() bool { return c.procs.Running(ctx, node) }, func() string { return c.logTail(node) })
}

// listening waits until a restarted member's client port accepts
// connections, as the loopback cluster's Restart does.
func (c *remoteCluster) listening(ctx context.Context, node string) error {
	addr := strings.TrimPrefix(c.client[node], "http://")
	switch err := control.WaitListening(ctx, addr, restartWait, func() bool { return c.procs.Running(ctx, node) }); {
	case errors.Is(err, control.ErrGone):
		return fmt.Errorf("etcd member %s exited after restart: %s", node, c.logTail(node))
	case errors.Is(err, control.ErrNotListening):
		// As the loopback cluster's Restart: a member slow to listen is
		// left to the clients' retries and the checkers.
		return nil
	default:
		return err
	}
}

func (c *remoteCluster) daemon(node string) control.Daemon {
	return control.Daemon{Name: "etcd", Dir: c.base[node], Argv: []string{"etcd"}}
}

// logTail is the end of node's member log, for errors.
func (c *remoteCluster) logTail(node string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b strings.Builder
	if _, err := control.Logs(ctx, c.remotes[node], c.daemon(node), &b, 1500); err != nil {
		return "(no log: " + err.Error() + ")"
	}
	return "its log ends: " + strings.TrimSpace(b.String())
}

// stop heals the network, stops the members and fetches their logs into
// the run's logs folder.
func (c *remoteCluster) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if c.net != nil {
		_ = c.net.Heal(ctx)
	}
	if c.procs != nil {
		_ = c.procs.StopAll(ctx, 10*time.Second)
	}
	_ = os.MkdirAll(filepath.Join(c.dir, harness.LogDir), 0o755)
	for _, n := range c.names {
		f, err := os.Create(filepath.Join(c.dir, harness.LogDir, n+".log"))
		if err != nil {
			continue
		}
		_, _ = control.Logs(ctx, c.remotes[n], c.daemon(n), f, maxRemoteLog)
		_ = f.Close()
	}
	for _, r := range c.remotes {
		_ = r.Close()
	}
}

// peerURL is the URL node's member advertises to its peers.
func (c *remoteCluster) peerURL(node string) string { return c.peer[node] }

// proc is node's member process on its node.
func (c *remoteCluster) proc(_ context.Context, node string) (control.Remote, control.Proc, error) {
	p, ok := c.procs.Proc(node)
	if !ok {
		return c.remotes[node], control.Proc{}, fmt.Errorf("etcd member %s never started: %w", node, control.ErrGone)
	}
	return c.remotes[node], p, nil
}

// stopWiped stops node's member and removes its data folder on the node.
func (c *remoteCluster) stopWiped(ctx context.Context, node string) error {
	if err := c.procs.Stop(ctx, node, 10*time.Second); err != nil {
		return err
	}
	_, err := control.Output(ctx, c.remotes[node], "rm -rf "+control.Quote(path.Join(c.base[node], "data")))
	return err
}

// rejoin changes node's command line to join the existing cluster and
// starts it on a fresh data folder.
func (c *remoteCluster) rejoin(ctx context.Context, node, initial string, _ uint64) error {
	argv, err := rejoinArgs(c.procs.Argv(node), initial)
	if err != nil {
		return err
	}
	if err := c.procs.SetArgv(node, argv); err != nil {
		return err
	}
	if _, err := control.Output(ctx, c.remotes[node], "rm -rf "+control.Quote(path.Join(c.base[node], "data"))); err != nil {
		return err
	}
	return c.procs.Restart(ctx, node)
}
