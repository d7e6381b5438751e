package capturesuite

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ipfence/ipfence/verify/control"
	"github.com/ipfence/ipfence/verify/harness"
)

// DefaultRemoteDir is the folder on each node of --nodes-file that holds
// its ipfence binary, configuration, secret, data and log, as
// RemoteDir/<node>. It is wiped at the start of a run. The node's name is
// in the path so that nodes sharing a file system (namespaces of one
// machine) do not share a node's files.
const DefaultRemoteDir = "/var/tmp/ipfence-capture"

// remotePort is the port every remote node's API listens on: each node
// has an address of its own, so they can all use the same one.
const remotePort = 7000

// maxRemoteLog bounds a node log fetched into the store.
const maxRemoteLog = 64 << 20

// RemoteRefused are the nemeses a run on the machines of a nodes file
// cannot make, and why: they work on the node's data folder as a file of
// this machine, or mount a disk for it.
var RemoteRefused = map[string]string{
	"wipe":    "it empties the node's data folder on the harness's own file system",
	"corrupt": "it damages the node's state file on the harness's own file system",
	"disk":    "it mounts a tmpfs on the harness's machine as each node's data folder",
}

// RemoteNemeses returns the kinds of Nemeses a run with a nodes file makes
// by default: every one but those RemoteRefused names.
func RemoteNemeses() []string {
	var out []string
	for _, k := range Nemeses {
		if RemoteRefused[k] == "" {
			out = append(out, k)
		}
	}
	return out
}

// readNodesFile reads and checks a nodes file for the capture test.
func readNodesFile(file string) ([]control.Node, error) {
	nodes, err := control.ReadNodesFile(file, 2, 9, "the capture test")
	if err != nil {
		return nil, err
	}
	for _, n := range nodes {
		// A NIC's id ends in its node's name after the last '-' or '.'
		// (nodeOf), so a name may hold neither.
		if strings.ContainsAny(n.Name, "-.") {
			return nil, fmt.Errorf("--nodes-file %s line %d: node name %q: the capture test's node names may not hold '-' or '.'", file, n.Line, n.Name)
		}
	}
	return nodes, nil
}

// checkRemote checks the options of a run with a nodes file (after
// Nodes is set from it), naming what such a run cannot do.
func (o *Options) checkRemote(nodes int) error {
	if o.RemoteDir == "" {
		o.RemoteDir = DefaultRemoteDir
	}
	var refused []string
	for _, k := range o.Nemesis {
		if why := RemoteRefused[k]; why != "" {
			refused = append(refused, k+" ("+why+")")
		}
	}
	switch {
	case o.Nodes != 0 && o.Nodes != nodes:
		return fmt.Errorf("--nodes %d and --nodes-file: the nodes file lists %d nodes", o.Nodes, nodes)
	case o.Netns:
		return errors.New("--nodes-file and --net netns: the nodes file's machines are the network; partitions are made with nftables on them")
	case o.Provider == "onprem":
		return errors.New("--nodes-file and --provider onprem: the on-premises lab is built of namespaces on this machine; --nodes-file runs the aws provider")
	case o.Provider != "" && o.Provider != CloudAlias && o.Provider != Clouds[0]:
		return fmt.Errorf("--nodes-file and --provider %s: runs on a nodes file's machines are built for aws (the EC2 simulator) only", o.Provider)
	case o.Epochs == "etcd":
		return errors.New("--nodes-file and --epochs etcd: the etcd line is started on this machine, out of the nodes' reach; run it with --net proxy")
	case len(refused) > 0:
		return fmt.Errorf("--nodes-file: the nemeses %s cannot run on the nodes file's machines: %s", strings.Join(refusedKinds(o.Nemesis), ","), strings.Join(refused, "; "))
	case !path.IsAbs(o.RemoteDir) || path.Clean(o.RemoteDir) == "/":
		return fmt.Errorf("--remote-dir must be an absolute folder other than /, not %q", o.RemoteDir)
	}
	return nil
}

// refusedKinds are the kinds of want that RemoteRefused names.
func refusedKinds(want []string) []string {
	var out []string
	for _, k := range want {
		if RemoteRefused[k] != "" && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// remoteNodes are the ipfence nodes of a cluster run on the machines of a
// nodes file: the binary, configuration and secret uploaded to each, the
// node started there as a daemon, partitions made with nftables on the
// machines, and every fault confirmed.
type remoteNodes struct {
	dir     string // the run's folder, here
	nodes   []control.Node
	remotes map[string]control.Remote
	base    map[string]string // node → its folder on its machine
	procs   *control.Procs
	net     *control.NftNet
	ledger  *control.Ledger
}

// remoteOptions say which machines a cluster runs on.
type remoteOptions struct {
	nodes      []control.Node
	knownHosts []string
	dir        string // Options.RemoteDir
}

// dialRemote connects to every node of o and makes the network and the
// processes' controls; nothing is started yet.
func dialRemote(o remoteOptions, dir string) (*remoteNodes, error) {
	r := &remoteNodes{dir: dir, nodes: o.nodes, remotes: map[string]control.Remote{}, base: map[string]string{}, ledger: &control.Ledger{}}
	for _, n := range o.nodes {
		s, err := control.NewSSH(n, control.SSHOptions{KnownHosts: o.knownHosts})
		if err != nil {
			r.close()
			return nil, err
		}
		r.remotes[n.Name] = s
		r.base[n.Name] = path.Join(o.dir, n.Name)
	}
	var err error
	if r.net, err = control.NewNftNet(o.nodes, r.remotes, r.ledger); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// address is node's address on its machine.
func (r *remoteNodes) address(node string) string {
	for _, n := range r.nodes {
		if n.Name == node {
			return n.Address
		}
	}
	return ""
}

// simHost is the address of this machine that the nodes reach it at: the
// source address the kernel picks for packets to the first node. The
// simulator listens there and nowhere else.
func (r *remoteNodes) simHost() (string, error) {
	n := r.nodes[0]
	// A UDP "connection" sends nothing; it only asks the routing table.
	conn, err := net.Dial("udp", net.JoinHostPort(n.Address, strconv.Itoa(max(n.Port, 22))))
	if err != nil {
		return "", fmt.Errorf("finding this machine's address towards %s (%s): %w", n.Name, n.Address, err)
	}
	defer conn.Close()
	host, _, err := net.SplitHostPort(conn.LocalAddr().String())
	return host, err
}

// daemon is the ipfence node's daemon on its machine.
func (r *remoteNodes) daemon(node string, argv []string) control.Daemon {
	return control.Daemon{Name: "ipfence", Dir: r.base[node], Argv: argv}
}

// install stops an ipfence a dead run left on node, wipes node's folder,
// and uploads the binary, the configuration and the secret into it. It
// returns the daemon to start.
func (r *remoteNodes) install(ctx context.Context, node, bin, config string, secret []byte, unfenced bool) (control.Daemon, error) {
	rem, base := r.remotes[node], r.base[node]
	if p, err := control.Find(ctx, rem, r.daemon(node, []string{"ipfence"})); err == nil {
		if err := control.Stop(ctx, rem, p, 5*time.Second); err != nil {
			return control.Daemon{}, fmt.Errorf("stopping the ipfence a previous run left on %s: %w", node, err)
		}
	}
	if _, err := control.Output(ctx, rem, "rm -rf "+control.Quote(base)+" && mkdir -p "+control.Quote(path.Join(base, "data"))); err != nil {
		return control.Daemon{}, fmt.Errorf("preparing %s on %s: %w", base, node, err)
	}
	f, err := os.Open(bin)
	if err != nil {
		return control.Daemon{}, err
	}
	defer f.Close()
	remoteBin := path.Join(base, "ipfence")
	if err := control.Upload(ctx, rem, f, remoteBin, 0o755); err != nil {
		return control.Daemon{}, fmt.Errorf("uploading %s to %s:%s: %w", bin, node, remoteBin, err)
	}
	if err := control.Upload(ctx, rem, strings.NewReader(config), path.Join(base, "config.yaml"), 0o600); err != nil {
		return control.Daemon{}, fmt.Errorf("uploading %s's configuration: %w", node, err)
	}
	if err := control.Upload(ctx, rem, strings.NewReader(string(secret)), path.Join(base, "secret"), 0o600); err != nil {
		return control.Daemon{}, fmt.Errorf("uploading %s's federation secret: %w", node, err)
	}
	argv := []string{remoteBin, "serve", "--config", path.Join(base, "config.yaml"), "--test-endpoints", "--log-level", "info"}
	if unfenced {
		argv = append(argv, "--unsafe-disable-fence")
	}
	return r.daemon(node, argv), nil
}

// listening waits until node's API port accepts connections, as the local
// nodes' "listening on" line says they do.
func (r *remoteNodes) listening(ctx context.Context, node string) error {
	addr := net.JoinHostPort(r.address(node), strconv.Itoa(remotePort))
	switch err := control.WaitListening(ctx, addr, startTimeout, func() bool { return r.procs.Running(ctx, node) }); {
	case errors.Is(err, control.ErrGone):
		return fmt.Errorf("ipfence node %s exited after its start: %s", node, r.logTail(node))
	case errors.Is(err, control.ErrNotListening):
		return fmt.Errorf("ipfence node %s does not listen on %s after %v: %s", node, addr, startTimeout, r.logTail(node))
	default:
		return err
	}
}

// logTail is the end of node's log, for errors.
func (r *remoteNodes) logTail(node string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b strings.Builder
	if _, err := control.Logs(ctx, r.remotes[node], r.daemon(node, []string{"ipfence"}), &b, 1500); err != nil {
		return "(no log: " + err.Error() + ")"
	}
	return "its log ends: " + strings.TrimSpace(b.String())
}

// fetchLogs copies each node's log into the run's logs folder as
// logs/<node>.log.
func (r *remoteNodes) fetchLogs(ctx context.Context) {
	_ = os.MkdirAll(filepath.Join(r.dir, harness.LogDir), 0o755)
	for _, n := range r.nodes {
		f, err := os.Create(filepath.Join(r.dir, harness.LogDir, n.Name+".log"))
		if err != nil {
			continue
		}
		_, _ = control.Logs(ctx, r.remotes[n.Name], r.daemon(n.Name, []string{"ipfence"}), f, maxRemoteLog)
		_ = f.Close()
	}
}

// stop heals the network, stops the nodes, fetches their logs and closes
// the connections.
func (r *remoteNodes) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = r.net.Heal(ctx)
	if r.procs != nil {
		_ = r.procs.StopAll(ctx, 10*time.Second)
	}
	r.fetchLogs(ctx)
	r.close()
}

func (r *remoteNodes) close() {
	for _, rem := range r.remotes {
		_ = rem.Close()
	}
}

// installRemote installs every node on its machine and makes the
// processes' controls: the nodes are then started like local ones.
func (c *cluster) installRemote(ctx context.Context, peerAddr map[[2]string]string) error {
	daemons := map[string]control.Daemon{}
	for _, n := range c.nodes {
		d, err := c.remote.install(ctx, n, c.bin, c.config(n, peerAddr), c.secret, c.unfenced)
		if err != nil {
			return err
		}
		d.Env = c.env
		daemons[n] = d
	}
	var err error
	if c.remote.procs, err = control.NewProcs(c.remote.remotes, daemons, c.remote.ledger); err != nil {
		return err
	}
	c.remote.procs.Ready = c.remote.listening
	// A run that died may have left its cuts on the machines.
	if err := c.remote.net.Heal(ctx); err != nil {
		return fmt.Errorf("clearing the nodes' partition rules: %w", err)
	}
	return c.describeRemote()
}

// describeRemote writes remote.txt into the run's folder: which machine
// ran each node, with what command line, and where the simulator was.
func (c *cluster) describeRemote() error {
	var b strings.Builder
	fmt.Fprintf(&b, "simulator: %s (on this machine)\n", c.sim)
	for _, n := range c.nodes {
		fmt.Fprintf(&b, "%s: %s at %s: %s\n", n, c.listens[n], c.remote.address(n), control.Line(c.remote.procs.Argv(n)...))
	}
	return os.WriteFile(filepath.Join(c.dir, "remote.txt"), []byte(b.String()), 0o644)
}
